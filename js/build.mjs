// Builds one ES module (and its CSS) per widget: js/<widget>/index.js -> nnx_lab/static/<widget>.js.
// js/shared/ is bundled into each entry that uses it. Prints each entry's size.
//   node js/build.mjs [--dev] [--watch]
import * as esbuild from "esbuild";
import { readdirSync, existsSync, statSync, readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const outdir = join(root, "nnx_lab", "static");
const dev = process.argv.includes("--dev") || process.argv.includes("--watch");

/** Every folder of js/ with an index.js, except the shared modules. */
export function entries() {
  return readdirSync(join(root, "js"))
    .filter((name) => name !== "shared" && existsSync(join(root, "js", name, "index.js")))
    .sort();
}

const options = {
  entryPoints: Object.fromEntries(entries().map((name) => [name, join(root, "js", name, "index.js")])),
  outdir,
  bundle: true,
  format: "esm",
  target: "es2020",
  minify: !dev,
  sourcemap: dev ? "inline" : false,
  legalComments: "none",
  logLevel: "warning",
};

if (process.argv.includes("--watch")) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
  console.log("watching js/ ...");
} else {
  await esbuild.build(options);
  for (const name of entries()) {
    for (const ext of ["js", "css"]) {
      const file = join(outdir, `${name}.${ext}`);
      if (!existsSync(file)) continue;
      const size = statSync(file).size;
      const gz = gzipSync(readFileSync(file)).length;
      console.log(`${name}.${ext}: ${(size / 1024).toFixed(1)} KiB (${(gz / 1024).toFixed(1)} KiB gzipped)`);
    }
  }
}
