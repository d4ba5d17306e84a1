// The monitor's race mode: several runs on top of each other, one colour per run.
import { afterEach, describe, expect, it } from "vitest";
import { RACE_COLORS, bestAndLast, raceSummary } from "../../js/monitor/race.js";
import { smoothLoss } from "../../js/monitor/smoothing.js";
import { MonitorView } from "../../js/monitor/view.js";
import { alignColumns, toPlotValues } from "../../js/shared/plot_values.js";
import { byTestId, disposeView, epochColumns, fakeModel, op, settle, snapshot, stepColumns, testHost, update } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => (view = disposeView(view)));

function lane(i, name, extra = {}) {
  return {
    key: `lane${i}`,
    name,
    run_id: `${i}`.repeat(32),
    status: "finished",
    stop_reason: "",
    error: "",
    epoch: 3,
    n_epochs: 3,
    step: 30,
    last_loss: 0.1,
    loss_nonfinite_since: null,
    ...extra,
  };
}

/** A view whose hello is answered with each lane's steps and epochs. */
async function raceShown(model, perLane) {
  view = new MonitorView(model, el);
  const hello = model.lastHello();
  const ops = [];
  perLane.forEach(([from, to, loss], i) => {
    ops.push(op(`lane${i}.steps`, 0, stepColumns(from, to, loss)));
    ops.push(op(`lane${i}.epochs`, 0, epochColumns(1, 3)));
  });
  const s = snapshot(hello.view, hello.req, 1, ops);
  model.custom(s.content, s.buffers);
  await settle();
  return view;
}

describe("aligning runs on one x", () => {
  it("puts each run's values at its own steps and leaves holes elsewhere", () => {
    const a = alignColumns([
      { x: [1, 2, 4], ys: [[10, 20, 40]] },
      { x: [2, 3], ys: [[NaN, 30]] },
    ]);
    expect(a.x).toEqual([1, 2, 3, 4]);
    expect(a.ys[0]).toEqual([10, 20, undefined, 40]);
    expect(a.ys[1]).toEqual([undefined, NaN, 30, undefined]);
    // a hole is drawn across (undefined), a run's own non-finite value is a gap (null)
    expect(toPlotValues(a.ys[1]).data).toEqual([undefined, null, 30, undefined]);
  });

  it("keeps the best and the last finite value", () => {
    expect(bestAndLast([3, NaN, 1, 2], false)).toEqual({ best: 1, last: 2 });
    expect(bestAndLast([0.5, 0.9, 0.7], true)).toEqual({ best: 0.9, last: 0.7 });
  });

  it("sums the runs up by status", () => {
    const lanes = [lane(0, "a"), lane(1, "b", { status: "running" }), lane(2, "c", { status: "queued" })];
    expect(raceSummary(lanes, false)).toBe("race of 3 runs: 1 running, 1 queued, 1 finished");
    expect(raceSummary(lanes.slice(0, 1), true)).toBe("comparing 1 run: 1 finished");
  });
});

describe("TrainingMonitor view with several runs", () => {
  it("draws one line per run in its own colour, with a legend entry and a status each", async () => {
    const model = fakeModel({
      status: "running",
      run_id: "1".repeat(32),
      smoothing: 0, // the lines are the raw losses
      runs: [lane(0, "base"), lane(1, "fast", { status: "running", step: 12 })],
    });
    await raceShown(model, [
      [1, 30, (s) => 1 / s],
      [1, 12, (s) => 2 / s],
    ]);
    expect(el.querySelector(".nnx-monitor").dataset.mode).toBe("race");
    // the loss chart: one series per run (plus x), on the union of the runs' steps
    const u = view.lossChart.plot;
    expect(u.series.slice(1).map((s) => s.label)).toEqual(["base", "fast"]);
    expect(u.data[0]).toHaveLength(30);
    expect(u.data[2][11]).toBeCloseTo(2 / 12, 5);
    expect(u.data[2][12]).toBeUndefined(); // "fast" has no step 13
    expect(q("loss-chart").dataset.runs).toBe("2");
    expect(q("loss-chart").dataset.steps).toBe("42");
    // the stroke colours are the race palette, in order
    const strokes = u.series.slice(1).map((s) => s.stroke());
    expect(strokes).toEqual([RACE_COLORS[0], RACE_COLORS[1]]);
    // the epoch chart: the validation loss of each run per epoch
    expect(view.epochChart.plot.series.slice(1).map((s) => s.label)).toEqual(["base", "fast"]);
    expect(view.epochChart.plot.data[0]).toEqual([1, 2, 3]);
    expect(view.epochChart.plot.data[1]).toEqual([1, 0.5, expect.closeTo(1 / 3, 5)]);
    expect(view.epochChart.plot.axes[1].label).toBe("val loss"); // the metric, not "value"
    q("metric-select").value = "accuracy";
    q("metric-select").dispatchEvent(new Event("change"));
    expect(view.epochChart.plot.axes[1].label).toBe("val accuracy");
    q("metric-select").value = "loss";
    q("metric-select").dispatchEvent(new Event("change"));
    // legend and runs table
    const legendItems = [...q("race-legend").querySelectorAll(".nnx-legend-item")].map((n) => n.textContent);
    expect(legendItems).toEqual(["base", "fast"]);
    const rows = [...q("race-table").querySelectorAll("tbody tr")];
    expect(rows.map((r) => [r.dataset.run, r.dataset.status, r.dataset.color])).toEqual([
      ["base", "finished", RACE_COLORS[0]],
      ["fast", "running", RACE_COLORS[1]],
    ]);
    expect(rows[0].textContent).toContain("0.3333"); // best and last val loss
    expect(q("race-status").textContent).toBe("race of 2 runs: 1 running, 1 finished");
    expect(q("epochs-table").closest(".nnx-paged").hidden).toBe(true);
  });

  it("follows the updates of each run and their statuses", async () => {
    const model = fakeModel({ runs: [lane(0, "a", { status: "running" }), lane(1, "b", { status: "queued" })] });
    await raceShown(model, [
      [1, 5, (s) => 1 / s],
      [1, 0, (s) => 1 / s],
    ]);
    const u1 = update(2, [op("lane1.steps", 0, stepColumns(1, 8, () => 0.5))]);
    model.custom(u1.content, u1.buffers);
    model.set("runs", [lane(0, "a"), lane(1, "b", { status: "running" })]);
    await settle();
    expect(view.lossChart.plot.data[0]).toHaveLength(8);
    expect(view.lossChart.plot.data[2][7]).toBeCloseTo(0.5, 5);
    const statuses = [...q("race-table").querySelectorAll("tbody tr")].map((r) => r.dataset.status);
    expect(statuses).toEqual(["finished", "running"]);
  });

  it("reads out every run's value at the step under the pointer", async () => {
    const model = fakeModel({ runs: [lane(0, "a"), lane(1, "b")] });
    model.set("smoothing", 0);
    await raceShown(model, [
      [1, 4, () => 1],
      [3, 4, () => 2],
    ]);
    view._lossReadout(0);
    expect(view.lossReadout.textContent).toBe("step 1 · a 1");
    view._lossReadout(3);
    expect(view.lossReadout.textContent).toBe("step 4 · a 1 · b 2");
  });

  it("a comparison hides the current-run line; a single run afterwards brings it back", async () => {
    const model = fakeModel({ status: "finished", from_log: true, run_id: "", runs: [lane(0, "a"), lane(1, "b")] });
    await raceShown(model, [
      [1, 3],
      [1, 3],
    ]);
    expect(view.runTitle.hidden).toBe(true);
    expect(q("race-status").textContent).toBe("comparing 2 runs: 2 finished");
    model.set("from_log", false);
    model.set("runs", []);
    await settle();
    expect(el.querySelector(".nnx-monitor").dataset.mode).toBe("run");
    expect(view.lossChart.plot.series.slice(1).map((s) => s.label)).toEqual(["loss", "smoothed", "max", "min"]);
    expect(q("race-table").closest(".nnx-race").hidden).toBe(true);
    expect(q("race-status").hidden).toBe(true);
    // lane stores were dropped; the run's own series are still there
    expect(Object.keys(view.sync.stores).sort()).toEqual(["epochs", "steps"]);
  });

  it("keeps the log scale and the charts' place in their figure when the runs change", async () => {
    const model = fakeModel({ runs: [lane(0, "a")] });
    await raceShown(model, [[1, 10]]);
    view.logToggle.checked = true;
    view._setLog(true);
    model.set("runs", [lane(0, "a"), lane(1, "b")]);
    await settle();
    expect(view.lossChart.opts.logY).toBe(true);
    const fig = q("loss-chart");
    const kids = [...fig.children];
    expect(kids.indexOf(view.lossChart.plot.root)).toBeLessThan(kids.indexOf(view.lossReadout));
  });
});

describe("a race draws each run's loss terms", () => {
  /** Step columns with an objective's terms (and their :min / :max once merged). */
  function withTerms(from, to, terms) {
    const cols = stepColumns(from, to, (s) => 1 + 1 / s);
    const steps = cols.step[1];
    for (const [name, f] of Object.entries(terms)) {
      const v = steps.map(f);
      for (const suffix of ["", ":min", ":max"]) cols[`term.${name}${suffix}`] = ["float32", v];
    }
    return cols;
  }

  async function shownWithTerms(model) {
    view = new MonitorView(model, el);
    const hello = model.lastHello();
    const ops = [
      op("lane0.steps", 0, stepColumns(1, 10)),
      op("lane0.epochs", 0, epochColumns(1, 1)),
      op("lane1.steps", 0, withTerms(1, 10, { recon: () => 1, kl: (s) => 1 / s })),
      op("lane1.epochs", 0, epochColumns(1, 1)),
    ];
    const s = snapshot(hello.view, hello.req, 1, ops);
    model.custom(s.content, s.buffers);
    await settle();
    return view;
  }

  it("adds a dashed line per term in its run's colour, after every run's loss", async () => {
    const model = fakeModel({ status: "finished", smoothing: 0, runs: [lane(0, "plain"), lane(1, "vae")] });
    await shownWithTerms(model);
    const u = view.lossChart.plot;
    expect(u.series.slice(1).map((s) => s.label)).toEqual(["plain", "vae", "vae · recon", "vae · kl"]);
    expect(u.series.slice(1).map((s) => s.stroke())).toEqual([RACE_COLORS[0], RACE_COLORS[1], RACE_COLORS[1], RACE_COLORS[1]]);
    expect(u.series[1].dash).toBeUndefined(); // a run's loss is solid
    expect(u.series[3].dash).toEqual([6, 3]);
    expect(u.series[4].dash).toEqual([2, 3]); // another term, another dash
    expect(u.data[3][4]).toBeCloseTo(1, 5);
    expect(u.data[4][4]).toBeCloseTo(1 / 5, 5);
    expect(q("loss-chart").dataset.terms).toBe("vae · recon,vae · kl");
    // the readout still reads each run's loss at its index
    view._lossReadout(0);
    expect(view.lossReadout.textContent).toBe("step 1 · plain 1 · vae 2");
    // the toggle, as for one run: shown, and it stacks a run's terms as running sums
    expect(view.termsControl.hidden).toBe(false);
    q("stack-toggle").checked = true;
    q("stack-toggle").dispatchEvent(new Event("change"));
    const stacked = view.lossChart.plot;
    expect(q("loss-chart").dataset.stacked).toBe("true");
    expect(stacked.data[3][4]).toBeCloseTo(1, 5);
    expect(stacked.data[4][4]).toBeCloseTo(1 + 1 / 5, 5);
  });

  it("smooths each term line as the run's loss is smoothed, and stacks the smoothed terms", async () => {
    const model = fakeModel({ status: "finished", smoothing: 0.9, runs: [lane(0, "plain"), lane(1, "vae")] });
    await shownWithTerms(model);
    const u = view.lossChart.plot;
    const steps = Array.from({ length: 10 }, (_, i) => i + 1);
    const ones = Int32Array.from(steps, () => 1);
    const kl = smoothLoss(Float32Array.from(steps, (s) => 1 / s), ones, 0.9);
    const recon = smoothLoss(Float32Array.from(steps, () => 1), ones, 0.9);
    expect(Array.from(u.data[4])).toEqual(Array.from(kl)); // "vae · kl", every point
    expect(Array.from(u.data[3])).toEqual(Array.from(recon));
    expect(u.data[4][4]).not.toBeCloseTo(1 / 5, 2); // not the raw value
    // the run's loss line is smoothed by the same function
    expect(Array.from(u.data[2])).toEqual(Array.from(smoothLoss(Float32Array.from(steps, (s) => 1 + 1 / s), ones, 0.9)));
    // stacked: the running sums of the smoothed terms
    q("stack-toggle").checked = true;
    q("stack-toggle").dispatchEvent(new Event("change"));
    const stacked = view.lossChart.plot;
    for (let i = 0; i < 10; i++) expect(stacked.data[4][i]).toBeCloseTo(recon[i] + kl[i], 12);
    // another smoothing redraws the terms with it; 0 draws them as logged
    model.set("smoothing", 0);
    await settle();
    expect(Array.from(view.lossChart.plot.data[4]).map((x, i) => x - 1)).toEqual(Array.from(Float32Array.from(steps, (s) => 1 / s)));
  });

  it("draws no term line and hides the toggle when no run has terms", async () => {
    const model = fakeModel({ status: "finished", smoothing: 0, runs: [lane(0, "a"), lane(1, "b")] });
    await raceShown(model, [
      [1, 5, (s) => 1 / s],
      [1, 5, (s) => 2 / s],
    ]);
    expect(view.lossChart.plot.series.slice(1).map((s) => s.label)).toEqual(["a", "b"]);
    expect(view.termsControl.hidden).toBe(true);
    expect(q("loss-chart").dataset.terms).toBe("");
  });
});

describe("a race draws each optimizer's learning rate of a Trainer run", () => {
  /** A Trainer run's step columns: no single lr (NaN), each optimizer's rate. */
  function trainerColumns(from, to) {
    const cols = stepColumns(from, to, (s) => 1 / s, () => NaN);
    const steps = cols.step[1];
    cols["lr.G"] = ["float32", steps.map((s) => (s <= 5 ? 1e-3 : 5e-4))];
    cols["lr.D"] = ["float32", steps.map(() => 2e-3)];
    return cols;
  }

  async function shownWithOptimizers(model) {
    view = new MonitorView(model, el);
    const hello = model.lastHello();
    const ops = [
      op("lane0.steps", 0, stepColumns(1, 10, (s) => 1 / s, () => 0.01)),
      op("lane0.epochs", 0, epochColumns(1, 1)),
      op("lane1.steps", 0, trainerColumns(1, 10)),
      op("lane1.epochs", 0, epochColumns(1, 1)),
    ];
    const s = snapshot(hello.view, hello.req, 1, ops);
    model.custom(s.content, s.buffers);
    await settle();
    return view;
  }

  it("draws one line per optimizer in the run's colour, named in the legend and the readout", async () => {
    const model = fakeModel({ status: "finished", smoothing: 0, runs: [lane(0, "plain"), lane(1, "gan")] });
    await shownWithOptimizers(model);
    const u = view.lrChart.plot;
    expect(u.series.slice(1).map((s) => s.label)).toEqual(["plain", "gan · G", "gan · D"]);
    expect(u.series.slice(1).map((s) => s.stroke())).toEqual([RACE_COLORS[0], RACE_COLORS[1], RACE_COLORS[1]]);
    expect(u.series[2].dash).toBeUndefined(); // the run's first optimizer solid
    expect(u.series[3].dash).toEqual([6, 3]); // the next one dashed
    expect(u.data[1][0]).toBeCloseTo(0.01, 6);
    expect(u.data[2][0]).toBeCloseTo(1e-3, 6);
    expect(u.data[2][9]).toBeCloseTo(5e-4, 6); // G's rate halved after step 5
    expect(u.data[3][9]).toBeCloseTo(2e-3, 6);
    expect(q("lr-chart").dataset.lines).toBe("plain,gan · G,gan · D");
    const legendItems = [...q("lr-legend").querySelectorAll(".nnx-legend-item")];
    expect(q("lr-legend").hidden).toBe(false);
    expect(legendItems.map((n) => n.textContent)).toEqual(["plain", "gan · G", "gan · D"]);
    expect(legendItems.map((n) => n.querySelector(".nnx-swatch").classList.contains("nnx-dashed"))).toEqual([false, false, true]);
    view._lossReadout(9);
    expect(view.lrReadout.textContent).toBe("step 10 · plain 0.01 · gan · G 5.00e-4 · gan · D 0.002");
    // the loss chart is one line per run as before
    expect(view.lossChart.plot.series.slice(1).map((s) => s.label)).toEqual(["plain", "gan"]);
  });

  it("keeps one lr line per run, and no lr legend, when no run names its optimizers", async () => {
    const model = fakeModel({ status: "finished", smoothing: 0, runs: [lane(0, "a"), lane(1, "b")] });
    await raceShown(model, [
      [1, 5, (s) => 1 / s],
      [1, 5, (s) => 2 / s],
    ]);
    expect(view.lrChart.plot.series.slice(1).map((s) => s.label)).toEqual(["a", "b"]);
    expect(view.lrChart.plot.series.slice(1).map((s) => s.dash)).toEqual([undefined, undefined]);
    expect(q("lr-legend").hidden).toBe(true);
    view._lossReadout(0);
    expect(view.lrReadout.textContent).toBe("step 1 · a 0.01 · b 0.01");
  });

  it("a single run after the race gets its own lr legend back", async () => {
    const model = fakeModel({ status: "finished", smoothing: 0, runs: [lane(0, "plain"), lane(1, "gan")] });
    await shownWithOptimizers(model);
    model.set("runs", []);
    await settle();
    expect(view.lrChart.plot.series.slice(1).map((s) => s.label)).toEqual(["lr"]);
    expect(q("lr-legend").hidden).toBe(true);
    expect(q("lr-legend").textContent).toBe("");
  });
});

describe("the race palette", () => {
  it("has one distinct colour for each of the kernel's 12 lanes", async () => {
    // MAX_LANES in nnx_lab/widgets/_race.py: a 12-trial sweep is one race
    expect(RACE_COLORS).toHaveLength(12);
    expect(new Set(RACE_COLORS.map((c) => c.toLowerCase())).size).toBe(12);
    const { laneColor } = await import("../../js/monitor/race.js");
    expect(Array.from({ length: 12 }, (_, i) => laneColor(i))).toEqual(RACE_COLORS);
  });
});
