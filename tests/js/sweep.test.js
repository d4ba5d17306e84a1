// The Sweep view: scales (log, choices, metrics), the brush filter, one line per trial
// with a value on every axis, brushing and selecting from the page (page traits), the
// two buttons as messages, and the built bundle.
import { afterEach, describe, expect, it } from "vitest";
import { axisDomain, axisValue, fromUnit, linePoints, passes, toUnit } from "../../js/sweep/pcoords.js";
import { SweepView } from "../../js/sweep/view.js";
import { builtWidget, disposeView, fakeModel, testHost } from "./helpers.js";

const el = testHost();
let view;
afterEach(() => (view = disposeView(view)));

const AXES = [
  { key: "train.optim.max_lr", kind: "value", scale: "log", choices: [] },
  { key: "net.hidden_dims", kind: "value", scale: "choice", choices: [[32], [64, 32]] },
  { key: "val.loss", kind: "metric", scale: "linear", choices: [] },
];
const row = (index, lr, dims, loss, status = "finished") => ({
  index,
  name: `trial ${index}`,
  seed: index,
  run_id: `abcdef${index}0000000000`,
  status,
  values: { "train.optim.max_lr": lr, "net.hidden_dims": dims },
  metrics: loss === null ? {} : { "val.loss": loss },
  error: null,
});
const ROWS = [row(0, 1e-4, [32], 0.9), row(1, 1e-2, [64, 32], 0.3), row(2, 1e-1, [32], null, "pending")];

describe("parallel-coordinates helpers", () => {
  it("reads values, choice indices and metrics, and spans each axis", () => {
    expect(axisValue(ROWS[1], AXES[1])).toBe(1);
    expect(axisValue(ROWS[2], AXES[2])).toBe(null);
    const lr = axisDomain(AXES[0], ROWS);
    expect(lr).toEqual({ lo: 1e-4, hi: 1e-1, log: true });
    expect(toUnit(1e-2, lr)).toBeCloseTo(2 / 3);
    expect(fromUnit(1 / 3, lr)).toBeCloseTo(1e-3);
    expect(axisDomain(AXES[1], ROWS)).toEqual({ lo: 0, hi: 1, log: false });
    expect(axisDomain(AXES[2], ROWS)).toEqual({ lo: 0.3, hi: 0.9, log: false });
  });

  it("filters by every brush and draws only complete trials", () => {
    expect(passes(ROWS[0], AXES, {})).toBe(true);
    expect(passes(ROWS[0], AXES, { "net.hidden_dims": [1, 1] })).toBe(false);
    expect(passes(ROWS[1], AXES, { "net.hidden_dims": [1, 1], "val.loss": [0.2, 0.4] })).toBe(true);
    expect(passes(ROWS[2], AXES, { "val.loss": [0, 1] })).toBe(false);
    const domains = AXES.map((a) => axisDomain(a, ROWS));
    const size = { width: 100, height: 100, pad: 10 };
    expect(linePoints(ROWS[0], AXES, domains, size)).toBe("10.0,90.0 50.0,90.0 90.0,10.0");
    expect(linePoints(ROWS[2], AXES, domains, size)).toBe(null);
  });
});

describe("SweepView", () => {
  const model = () => fakeModel({ axes: AXES, trials: ROWS, best: 1, objective: "val.loss", direction: "min", status: "running", brushes: {}, selected: [], has_builder: true, monitor: null, comparison: null, error: "" });

  it("draws a line per finished trial, the best marked, and a row per trial", () => {
    const m = model();
    view = new SweepView(m, el);
    const lines = el.querySelectorAll("polyline");
    expect([...lines].map((l) => l.dataset.trial)).toEqual(["0", "1"]);
    expect(el.querySelector('polyline[data-trial="1"]').getAttribute("class")).toContain("nnx-sweep-best");
    expect([...el.querySelectorAll("tbody tr")].map((r) => r.dataset.status)).toEqual(["finished", "finished", "pending"]);
    expect(el.querySelector('[data-testid="header"]').textContent).toContain("2 of 3 trials done");
    expect(el.querySelector('[data-testid="header"]').textContent).toContain("best: trial 1");
  });

  it("counts a pruned trial as done and says how many were pruned", () => {
    const m = fakeModel({ axes: AXES, trials: [ROWS[0], { ...ROWS[1], status: "pruned" }, ROWS[2]], best: 0, objective: "val.loss", direction: "min", status: "running", brushes: {}, selected: [], has_builder: true, monitor: null, comparison: null, error: "" });
    view = new SweepView(m, el);
    expect(el.querySelector('[data-testid="header"]').textContent).toContain("2 of 3 trials done, 1 pruned (running)");
  });

  it("brushes an axis and selects lines as page traits; greys the lines outside", () => {
    const m = model();
    view = new SweepView(m, el);
    view.brush("net.hidden_dims", [1, 1]);
    expect(m.get("brushes")).toEqual({ "net.hidden_dims": [1, 1] });
    expect(el.querySelector('polyline[data-trial="0"]').getAttribute("class")).toContain("nnx-sweep-out");
    expect(el.querySelector('polyline[data-trial="1"]').getAttribute("class")).not.toContain("nnx-sweep-out");
    expect(el.querySelector('[data-testid="brush-net.hidden_dims"]')).not.toBe(null);
    el.querySelector('polyline[data-trial="0"]').dispatchEvent(new MouseEvent("click"));
    expect(m.get("selected")).toEqual([0]);
    view.brush("net.hidden_dims", null);
    expect(m.get("brushes")).toEqual({});
  });

  it("a drag ending at an axis end keeps that end exactly (the top choice, the highest trial)", () => {
    const m = model();
    view = new SweepView(m, el);
    const domains = AXES.map((a) => axisDomain(a, ROWS));
    // jsdom has no layout: a y in the event is the SVG's own y (pad 28, height 260)
    view._drag = { axis: 1, y0: 130 };
    view._endDrag(el.querySelector("svg"), { clientY: 29 }, AXES, domains); // a pixel below the top end
    expect(m.get("brushes")["net.hidden_dims"][1]).toBe(1); // the top choice, exactly
    expect(el.querySelector('polyline[data-trial="1"]').getAttribute("class")).not.toContain("nnx-sweep-out");
    view._drag = { axis: 2, y0: 230 }; // from the bottom end of val.loss to its middle
    view._endDrag(el.querySelector("svg"), { clientY: 140 }, AXES, domains);
    expect(m.get("brushes")["val.loss"][0]).toBe(0.3); // the lowest loss, not its float image
  });

  it("sends Compare and Branch from the best (the one selected trial, else the best)", () => {
    const m = model();
    view = new SweepView(m, el);
    expect(el.querySelector('[data-testid="compare"]').disabled).toBe(true);
    el.querySelector('[data-testid="branch"]').click();
    el.querySelector('polyline[data-trial="0"]').dispatchEvent(new MouseEvent("click"));
    el.querySelector('[data-testid="compare"]').click();
    el.querySelector('[data-testid="branch"]').click();
    expect(m.sent.map((s) => s.content)).toEqual([{ kind: "branch", index: -1 }, { kind: "compare" }, { kind: "branch", index: 0 }]);
  });

  it("sends Drift of two only with exactly two trials selected", () => {
    const m = model();
    view = new SweepView(m, el);
    const drift = el.querySelector('[data-testid="drift"]');
    expect(drift.disabled).toBe(true);
    el.querySelector('polyline[data-trial="0"]').dispatchEvent(new MouseEvent("click"));
    expect(drift.disabled).toBe(true);
    el.querySelector('polyline[data-trial="1"]').dispatchEvent(new MouseEvent("click"));
    expect(drift.disabled).toBe(false);
    drift.click();
    expect(m.sent.map((s) => s.content)).toEqual([{ kind: "drift" }]);
  });

  it("is built as one bundle with a render", async () => {
    const w = await builtWidget("sweep");
    expect(typeof w.render).toBe("function");
  });
});
