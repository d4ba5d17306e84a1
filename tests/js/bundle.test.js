// The built bundles (what anywidget loads from a notebook), not the sources.
import { afterEach, describe, expect, it } from "vitest";
import { builtWidget, fakeModel, settle } from "./helpers.js";

// entry -> [initial traits, the root's class, text the first render shows]
const ENTRIES = {
  monitor: [{ run_id: "abc", status: "running" }, ".nnx-monitor", "running"],
  calibration: [
    { temperature: 1, fitted_temperature: null, fit_message: "", path: "c.json", saved: "", revision: 0, info: { rows: 10, classes: 3, kind: "categorical", split_id: "cal", model_id: "m", slider_range: [0.05, 20] } },
    ".nnx-calibration",
    "10 rows · 3 classes",
  ],
  abstention: [
    { threshold: 0.5, risk_ceiling: 0.05, guarantee: null, use: "uncalibrated", selection: {}, readouts: {}, mistakes: [], abstained_rows: [], abstained_start: 0, path: "p.json", saved: "", revision: 0, info: { rows: 10, classes: 3, kind: "max_probability", sides: ["uncalibrated"], split_id: "val" } },
    ".nnx-abstention",
    "10 rows · 3 classes",
  ],
};

describe.each(Object.entries(ENTRIES))("built %s bundle", (entry, [state, rootClass, text]) => {
  let el;
  afterEach(() => el && el.remove());

  it("exports only a default widget object with render (anywidget warns about a direct render export)", async () => {
    const widget = await builtWidget(entry);
    el = document.createElement("div");
    document.body.append(el);
    const model = fakeModel(state);
    const cleanup = widget.render({ model, el });
    await settle();
    expect(el.querySelector(rootClass).textContent).toContain(text);
    expect(el.querySelector(".uplot")).not.toBeNull();
    expect(model.sent[0].content).toMatchObject({ kind: "hello", version: 2 });
    cleanup();
    expect(el.querySelector(rootClass)).toBeNull();
    expect(model.listenerCount()).toBe(0);
  });
});
