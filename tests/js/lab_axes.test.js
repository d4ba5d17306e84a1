// The compare panel's x axes (js/lab/compare_axes.js): step, relative and wall time from
// the log's clock, epoch, and each run's fraction of itself; and how a run's log gives
// them (RunState.axisInfo).
import { describe, expect, it } from "vitest";
import { AXES, axisFormat, fmtClock, fmtFraction, interpolate, stepsToX } from "../../js/lab/compare_axes.js";
import { CompareView } from "../../js/lab/compare_view.js";
import { RunState } from "../../js/lab/run_state.js";
import { fakeApi, runLog, until } from "./lab_helpers.js";

// 2 epochs of 10 steps, started at 1000; epochs of 4 s and 6 s; ended at 1011
const INFO = {
  startStep: 0,
  startEpoch: 1,
  lastStep: 20,
  totalSteps: 20,
  startedAt: 1000,
  times: [
    [0, 1000],
    [10, 1004],
    [20, 1010],
    [20, 1011],
  ],
  epochs: [
    [10, 1],
    [20, 2],
  ],
};
const at = (axis, steps, info = INFO) => Array.from(stepsToX(axis, steps, info));

describe("interpolate", () => {
  it("follows the broken line, flat past its ends", () => {
    const pts = [
      [0, 0],
      [10, 100],
      [20, 400],
    ];
    expect([interpolate(pts, -5), interpolate(pts, 5), interpolate(pts, 15), interpolate(pts, 99)]).toEqual([0, 50, 250, 400]);
    expect(interpolate([], 3)).toBeNaN();
  });
});

describe("stepsToX", () => {
  it("offers the axes TensorBoard and W&B offer, and each run's fraction", () => {
    expect(AXES.map((a) => a.key)).toEqual(["step", "relative", "wall", "epoch", "fraction"]);
    expect(at("step", [1, 10, 20])).toEqual([1, 10, 20]);
  });

  it("places steps in time by the log's clock: its start, its epochs' ends", () => {
    expect(at("relative", [0, 5, 10, 15, 20])).toEqual([0, 2, 4, 7, 10]); // the end (1011) is no later step
    expect(at("wall", [5, 15])).toEqual([1002, 1007]);
  });

  it("gives the epoch as a fraction within it, and the run's fraction of itself", () => {
    expect(at("epoch", [5, 10, 15, 20])).toEqual([0.5, 1, 1.5, 2]);
    expect(at("fraction", [0, 5, 20])).toEqual([0, 0.25, 1]);
    // a resumed run: its own steps and epochs
    const resumed = { ...INFO, startStep: 20, startEpoch: 3, lastStep: 30, totalSteps: 40, epochs: [[30, 3]] };
    expect(at("fraction", [25, 30], resumed)).toEqual([0.25, 0.5]);
    expect(at("epoch", [25, 30], resumed)).toEqual([2.5, 3]);
  });

  it("says nothing it does not know: NaN without times, epochs or a span", () => {
    const bare = { startStep: 0, startEpoch: 1, lastStep: 0, totalSteps: null, startedAt: null, times: [], epochs: [] };
    expect(at("relative", [1], bare)[0]).toBeNaN();
    expect(at("epoch", [1], bare)[0]).toBeNaN();
    expect(at("fraction", [1], bare)[0]).toBeNaN();
  });

  it("labels and formats each axis", () => {
    expect(axisFormat("relative").format(125)).toBe("2m 05s");
    expect(axisFormat("fraction").label).toBe("fraction of the run");
    expect(fmtFraction(0.351)).toBe("35%");
    expect(fmtClock(new Date(2026, 0, 2, 14, 3, 12).getTime() / 1000)).toBe("14:03:12");
    expect(axisFormat("step").format(20000)).toBe("20k");
  });
});

describe("RunState.axisInfo", () => {
  it("reads the timeline from the log: start, epoch ends, the end; a live run's now", () => {
    const lines = runLog({ steps: 20, perEpoch: 10 }); // started 1000, epochs of 1.5 s, ended 1012
    const s = new RunState();
    s.apply(lines);
    const info = s.axisInfo();
    expect(info.times).toEqual([
      [0, 1000],
      [10, 1001.5],
      [20, 1003],
      [20, 1012],
    ]);
    expect(info.epochs).toEqual([
      [10, 1],
      [20, 2],
    ]);
    expect([info.startStep, info.lastStep, info.totalSteps]).toEqual([0, 20, 20]);
    const live = new RunState();
    const running = runLog({ steps: 15, perEpoch: 10, finished: null });
    running[0].n_epochs = 4;
    live.apply(running);
    live.tick(1010, true);
    const now = live.axisInfo();
    expect(now.times[now.times.length - 1]).toEqual([15, 1010]); // its latest step is now
    expect(now.totalSteps).toBe(40); // a live run's fraction is of its plan
    expect(Array.from(stepsToX("fraction", [20], now))).toEqual([0.5]);
  });
});

describe("CompareView's x axis", () => {
  it("redraws both charts on the chosen axis, a short and a long run side by side", async () => {
    const a = "a".repeat(32);
    const b = "b".repeat(32);
    const logs = { [a]: runLog({ runId: a, steps: 120, perEpoch: 60 }), [b]: runLog({ runId: b, steps: 400, perEpoch: 100 }) };
    const apis = Object.fromEntries(Object.entries(logs).map(([id, lines]) => [id, fakeApi({ lines, status: "finished" })]));
    const api = fakeApi();
    api.log = (folder, runId, ...rest) => apis[runId].log(folder, runId, ...rest);
    api.run = (folder, runId) => apis[runId].run(folder, runId);
    const host = document.createElement("div");
    document.body.append(host);
    const view = new CompareView(host, { api, runs: [{ folder: "r", runId: a, name: "short" }, { folder: "r", runId: b }], pollMs: 5 });
    await until(() => view.followers.every((f) => f.done));
    await until(() => host.querySelector('[data-testid="compare-loss-chart"]').dataset.points === "400");
    const x = host.querySelector('[data-testid="compare-x"]');
    expect([...x.options].map((o) => o.textContent)).toEqual(["step", "relative time", "wall time", "epoch", "fraction of the run"]);
    const xs = () => view.lossChart.plot.data[0];
    expect(xs()[xs().length - 1]).toBe(400);
    // whole steps on a step axis, one label format; the epoch axis names its metric
    expect(view.lossChart.opts.xInteger).toBe(true);
    expect(view.lossChart.opts.xTicks([9000, 9500, 10000])).toEqual(["9k", "9.5k", "10k"]);
    expect(view.epochChart.opts.yLabel).toBe(view.epochFig.dataset.metric.replaceAll("_", " "));
    expect(view.epochChart.opts.yLabel).not.toBe("value");
    x.value = "fraction";
    x.dispatchEvent(new Event("change"));
    expect(host.querySelector('[data-testid="compare-loss-chart"]').dataset.axis).toBe("fraction");
    // both runs span 0..1: the 120-step run is no sliver beside the 400-step one
    const last = (series) => {
      const d = view.lossChart.plot.data;
      let k = -1;
      for (let i = 0; i < d[0].length; i++) if (d[series][i] != null) k = i;
      return d[0][k];
    };
    expect(xs()[xs().length - 1]).toBe(1);
    expect(last(1)).toBe(1);
    expect(last(2)).toBe(1);
    expect(view.epochChart.plot.data[0]).toContain(0.5); // the epochs on the same axis
    expect(view.lossChart.opts.xInteger).toBeFalsy(); // a fraction is no count
    x.value = "relative";
    x.dispatchEvent(new Event("change"));
    expect(view.lossChart.opts.xLabel).toBe("time since the run started");
    // the last step of each: at its last epoch's end (epochs of 1.5 s)
    expect(last(1)).toBeCloseTo(3, 6);
    expect(last(2)).toBeCloseTo(6, 6);
    expect(host.querySelector('[data-testid="compare-legend"]').textContent).toContain("short");
    expect(host.querySelector('[data-testid="compare-diff-scroll"]').contains(host.querySelector('[data-testid="compare-diff"]'))).toBe(true);
    view.dispose();
    host.remove();
  });
});
