// Builds the JupyterLab extension (js/lab) into nnx_lab/labextension with
// @jupyterlab/builder: a prebuilt (federated) extension that the wheel ships as
// share/jupyter/labextensions/nnx-lab. JupyterLab's own packages are not bundled: the
// builder marks them shared singletons, described by @jupyterlab/core-meta (the core
// package.json of the JupyterLab release we build against).
//   node js/lab/build.mjs [--development]
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");
const require = createRequire(import.meta.url);

// The builder reads <core path>/package.json; core-meta ships it as core.package.json.
const coreDir = join(root, "node_modules", ".cache", "nnx-lab-core");
mkdirSync(coreDir, { recursive: true });
copyFileSync(require.resolve("@jupyterlab/core-meta/core.package.json"), join(coreDir, "package.json"));

const builder = require.resolve("@jupyterlab/builder/lib/build-labextension.js");
const args = [builder, "--core-path", coreDir];
if (process.argv.includes("--development")) args.push("--development");
args.push(here);
const out = spawnSync(process.execPath, args, { stdio: "inherit", cwd: root });
process.exit(out.status ?? 1);
