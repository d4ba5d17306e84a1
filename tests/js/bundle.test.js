// The built bundle (what anywidget loads from a notebook), not the sources.
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { fakeModel, settle } from "./helpers.js";

const BUNDLE = resolve("nnx_lab/static/monitor.js");

describe("built monitor bundle", () => {
  let el;
  afterEach(() => el && el.remove());

  it("exports only a default widget object with render (anywidget warns about a direct render export)", async () => {
    expect(existsSync(BUNDLE), "run `npm run build` first").toBe(true);
    const mod = await import(/* @vite-ignore */ BUNDLE);
    expect(Object.keys(mod)).toEqual(["default"]);
    expect(Object.keys(mod.default)).toEqual(["render"]);
    el = document.createElement("div");
    document.body.append(el);
    const model = fakeModel({ run_id: "abc", status: "running" });
    const cleanup = mod.default.render({ model, el });
    await settle();
    expect(el.querySelector('[data-testid="status"]').textContent).toBe("running");
    expect(el.querySelector(".uplot")).not.toBeNull();
    expect(model.sent[0].content).toMatchObject({ kind: "hello", version: 2 });
    cleanup();
    expect(el.querySelector(".nnx-monitor")).toBeNull();
    expect(model.listenerCount()).toBe(0);
  });
});
