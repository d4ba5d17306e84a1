import { afterEach, describe, expect, it } from "vitest";
import { MonitorView } from "../../js/monitor/view.js";
import { cellAt, cellColor, cellText, healthHeadline, logRange } from "../../js/monitor/health.js";
import { byTestId, disposeView, fakeModel, settle, testHost } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => {
  view = disposeView(view);
});

const PAYLOAD = {
  names: ["a.weight", "b.weight"],
  modules: ["a", "b"],
  steps: [1, 50, 100],
  grad_norm: [[1e-2, 1e-8, null], [1.0, 10.0, null]],
  update_ratio: [[1e-3, 1e-4, null], [1e-3, 2e-3, null]],
  weight_norm: [[2.0, 2.0, null], [3.0, 3.0, null]],
  nonfinite: [[false, false, true], [false, false, true]],
  dead: {},
  alerts: [{ kind: "vanishing", layer: "a.weight", step: 50 }, { kind: "nonfinite", layer: "a.weight", step: 100 }],
  first: { kind: "vanishing", layer: "a.weight", step: 50 },
};

describe("gradient health heatmap", () => {
  it("spans the log range of the finite positive values", () => {
    expect(logRange(PAYLOAD.grad_norm)).toEqual([-8, 1]);
    expect(logRange([[null, 0]])).toEqual([0, 1]);
    expect(logRange([[5]])[1] - logRange([[5]])[0]).toBeCloseTo(1);
  });

  it("colours on a log scale: ends of the ramp, red for non-finite, grey unmeasured", () => {
    expect(cellColor(1e-8, false, -8, 1)).toBe("rgb(40,30,160)");
    expect(cellColor(10, false, -8, 1)).toBe("rgb(255,230,40)");
    const mid = cellColor(10 ** -3.5, false, -8, 1);
    expect(mid).toBe(cellColor(10 ** -3.5 * 1.0000001, false, -8, 1));
    expect(mid).not.toBe(cellColor(10 ** -3.5 * 10, false, -8, 1)); // a decade moves the colour
    expect(cellColor(null, true, 0, 1)).toBe("rgb(220,30,30)");
    expect(cellColor(null, false, 0, 1)).toBe("rgb(128,128,128)");
  });

  it("finds the cell under the pointer and names its numbers", () => {
    expect(cellAt(PAYLOAD, 0, 0, 300)).toEqual({ row: 0, col: 0 });
    expect(cellAt(PAYLOAD, 299, 13, 300)).toEqual({ row: 1, col: 2 });
    expect(cellAt(PAYLOAD, 150, 30, 300)).toBeNull();
    expect(cellText(PAYLOAD, 0, 1)).toBe("a.weight at step 50: gradient norm 1.00e-8, update/weight 0.000100, weight norm 2.00");
    expect(cellText(PAYLOAD, 1, 2)).toContain("gradient norm non-finite");
  });

  it("the header names the first problem and its step", () => {
    expect(healthHeadline(PAYLOAD)).toBe("Gradient of a.weight vanished at step 50");
    const nan = { ...PAYLOAD, first: { kind: "nonfinite", layer: "b.bias", step: 7 } };
    expect(healthHeadline(nan)).toBe("Gradient of b.bias went non-finite at step 7 — the NaN started there");
    expect(healthHeadline({ ...PAYLOAD, first: null })).toBe("Gradient health: no problem in 3 samples (to step 100)");
    expect(healthHeadline({})).toBe("");
  });

  it("the monitor shows the panel only with health records", async () => {
    const model = fakeModel({ status: "running", health: {} });
    view = new MonitorView(model, el);
    await settle();
    expect(q("health").hidden).toBe(true);
    model.set("health", PAYLOAD);
    await settle();
    expect(q("health").hidden).toBe(false);
    expect(q("health-head").textContent).toBe("Gradient of a.weight vanished at step 50");
    expect(q("health-canvas").height).toBe(24);
  });
});
