// The compare panel: curves of several runs on one x, one colour per run, and the
// table of the configuration values that differ.
import { describe, expect, it } from "vitest";
import { CompareView, RUN_COLORS, alignOnX, diffRows, epochMetrics } from "../../js/lab/compare_view.js";
import { fakeApi, runLog, until } from "./lab_helpers.js";

describe("alignOnX", () => {
  it("puts series on the union of their x values, NaN where a series has no point", () => {
    const { x, ys } = alignOnX([
      { x: [1, 2, 4], y: [10, 20, 40] },
      { x: [2, 3, 4, 5], y: [2, 3, 4, 5] },
    ]);
    expect(Array.from(x)).toEqual([1, 2, 3, 4, 5]);
    expect(Array.from(ys[0])).toEqual([10, 20, NaN, 40, NaN]);
    expect(Array.from(ys[1])).toEqual([NaN, 2, 3, 4, 5]);
    expect(alignOnX([]).x.length).toBe(0);
  });
});

describe("diffRows and epochMetrics", () => {
  it("shows values as text, absent ones as –, and whether they change the run id", () => {
    const rows = diffRows({
      rows: [
        { what: "train.optim.max_lr", values: [0.01, 0.001], absent: [false, false], changes_run_id: true, action: "a new run" },
        { what: "net.hidden_dims", values: [[32, 16], null], absent: [false, true], changes_run_id: true },
        { what: "data.train", values: ["x", "y"], absent: [false, false], changes_run_id: null },
        { what: "environment.torch", values: ["2.13", "2.12"], absent: [false, false], changes_run_id: false },
      ],
    });
    expect(rows.map((r) => r.values)).toEqual([["0.01", "0.001"], ["[32,16]", "–"], ["x", "y"], ["2.13", "2.12"]]);
    expect(rows.map((r) => r.changesId)).toEqual(["yes", "yes", "depends", "no"]);
  });

  it("lists the validation metrics first", () => {
    const s = (fields) => ({ fields });
    expect(epochMetrics([s(["epoch", "train.loss", "val.loss", "val.loss:min"]), s(["val.error"])])).toEqual(["val.loss", "val.error", "train.loss"]);
  });
});

describe("CompareView", () => {
  it("draws each run's curve in its own colour and lists the differing values", async () => {
    const a = "a".repeat(32);
    const b = "b".repeat(32);
    const api = fakeApi();
    const logs = { [a]: runLog({ runId: a, steps: 30, perEpoch: 10 }), [b]: runLog({ runId: b, steps: 20, perEpoch: 10, loss: (s) => 2 / s }) };
    const apis = Object.fromEntries(Object.entries(logs).map(([id, lines]) => [id, fakeApi({ lines, status: "finished" })]));
    api.log = (folder, runId, ...rest) => apis[runId].log(folder, runId, ...rest);
    api.run = (folder, runId) => apis[runId].run(folder, runId);
    api.compareReport = {
      runs: [],
      rows: [{ what: "train.optim.max_lr", values: [0.01, 0.001], absent: [false, false], changed: true, changes_run_id: true, action: "a new run" }],
      unchanged: 40,
      limits: [],
    };
    const host = document.createElement("div");
    document.body.append(host);
    const view = new CompareView(host, { api, runs: [{ folder: "rA", runId: a }, { folder: "rA", runId: b, label: "exp/runs" }], pollMs: 5 });
    await until(() => view.followers.every((f) => f.done) && host.querySelector('[data-testid="diff-row"]'));
    await until(() => host.querySelector('[data-testid="compare-loss-chart"]').dataset.points === "30");
    const plot = view.lossChart.plot;
    expect(plot.data.length).toBe(3); // x and one series per run
    expect(plot.data[1].filter((v) => v !== null).length).toBe(30);
    expect(plot.data[2].filter((v) => v !== null).length).toBe(20);
    // drawn: the canvas was stroked in both runs' colours
    const ctx = plot.ctx;
    const strokes = new Set(ctx.calls.filter((c) => c.op === "stroke").map((c) => c.strokeStyle));
    expect(strokes.has(RUN_COLORS[0])).toBe(true);
    expect(strokes.has(RUN_COLORS[1])).toBe(true);
    expect(host.querySelector('[data-testid="compare-epoch-chart"]').dataset.metric).toBe("val.loss");
    const row = host.querySelector('[data-testid="diff-row"]');
    expect(row.dataset.what).toBe("train.optim.max_lr");
    expect(row.dataset.changesId).toBe("yes");
    expect(row.textContent).toContain("0.001");
    expect(row.textContent).toContain("★");
    expect(host.querySelector('[data-testid="compare-note"]').textContent).toMatch(/1 values differ \(40 are the same\)/);
    expect(host.querySelector('[data-testid="compare-legend"]').textContent).toContain("bbbbbbbb (exp/runs)");
    expect(api.calls.find((c) => c[0] === "compare")[1].map((r) => r.runId)).toEqual([a, b]);
    view.dispose();
    expect(host.children.length).toBe(0);
    host.remove();
  });

  it("says why the configurations could not be compared", async () => {
    const api = fakeApi({ lines: runLog({ steps: 2 }) });
    api.compare = async () => {
      throw new Error("run bbbb: run.yaml: not valid YAML");
    };
    const host = document.createElement("div");
    const view = new CompareView(host, { api, runs: [{ folder: "r", runId: "a".repeat(32) }, { folder: "r", runId: "b".repeat(32) }], pollMs: 5 });
    await until(() => !host.querySelector('[data-testid="compare-error"]').hidden);
    expect(host.querySelector('[data-testid="compare-error"]').textContent).toMatch(/not valid YAML/);
    view.dispose();
  });
});
