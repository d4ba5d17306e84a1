import { afterEach, describe, expect, it } from "vitest";
import { MonitorView } from "../../js/monitor/view.js";
import { legendsShown } from "../../js/monitor/charts.js";
import { stepParts, termColumns } from "../../js/monitor/terms.js";
import { RunState } from "../../js/lab/run_state.js";
import { runLog } from "./lab_helpers.js";
import { byTestId, disposeView, epochColumns, fakeModel, op, settle, snapshot, stepColumns, testHost, update } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => {
  view = disposeView(view);
});

/** Step columns of a VAE-like run: recon + kl terms, an aux term, two optimizers' lrs. */
function composite(from, to, { lrs = true } = {}) {
  const cols = stepColumns(from, to, (s) => 1 + 1 / s);
  const steps = cols.step[1];
  const mean = (name, f) => {
    const v = steps.map(f);
    cols[name] = ["float32", v];
    cols[`${name}:min`] = ["float32", v];
    cols[`${name}:max`] = ["float32", v];
  };
  mean("term.recon", () => 1);
  mean("term.kl", (s) => (s === 3 ? NaN : 1 / s));
  mean("aux.load_balance", () => 0.5);
  if (lrs) {
    cols["lr.G"] = ["float32", steps.map(() => 0.01)];
    cols["lr.D"] = ["float32", steps.map(() => 0.002)];
  }
  return cols;
}

async function shown(model, steps) {
  view = new MonitorView(model, el);
  const hello = model.lastHello();
  const epochs = epochColumns(1, 2);
  for (const name of ["train.recon", "train.kl"]) for (const suffix of ["", ":min", ":max"]) epochs[name + suffix] = ["float32", [0.5, 0.25]];
  const s = snapshot(hello.view, hello.req, 1, [op("steps", 0, steps), op("epochs", 0, epochs)]);
  model.custom(s.content, s.buffers);
  await settle();
  return view;
}

describe("TrainingMonitor view: composite losses", () => {
  it("reads the terms and optimizers a step series names, each with its own colour", () => {
    const store = { fields: ["step", "loss", "loss:min", "term.recon", "term.recon:min", "aux.load_balance", "lr", "lr.G", "lr.D"] };
    const parts = stepParts(store);
    expect(parts.terms.map((t) => t.label)).toEqual(["recon", "load_balance (aux)"]);
    expect(parts.lrs.map((t) => t.label)).toEqual(["lr G", "lr D"]);
    expect(new Set(parts.terms.map((t) => t.color)).size).toBe(2);
    expect(stepParts({ fields: ["step", "loss", "lr"] })).toEqual({ terms: [], lrs: [] });
  });

  it("stacks the terms as running sums; a missing term adds nothing, all missing is a gap", () => {
    const cols = { a: Float32Array.from([1, NaN, 2]), b: Float32Array.from([0.5, NaN, NaN]) };
    const store = { length: 3, column: (n) => cols[n] };
    const parts = { terms: [{ key: "a" }, { key: "b" }], lrs: [] };
    const [a, b] = termColumns(store, parts, true);
    expect(Array.from(a)).toEqual([1, NaN, 2]);
    expect(Array.from(b)).toEqual([1.5, NaN, 2]);
    const [oa, ob] = termColumns(store, parts, false);
    expect(oa).toBe(cols.a);
    expect(ob).toBe(cols.b);
  });

  it("draws each term beside the total loss, with a legend, and the stack toggle", async () => {
    const model = fakeModel({ status: "running" });
    await shown(model, composite(1, 5));
    const loss = view.lossChart;
    expect(loss.plot.series.slice(5).map((s) => s.label)).toEqual(["recon", "kl", "load_balance (aux)"]);
    expect(q("loss-chart").dataset.terms).toBe("recon,kl,load_balance (aux)");
    // overlaid: each term as logged, a non-finite one is a gap
    expect(loss.plot.data[5]).toEqual([1, 1, 1, 1, 1]);
    expect(loss.plot.data[6][2]).toBeNull();
    expect(loss.plot.data[6][0]).toBeCloseTo(1);
    const legendText = [...q("loss-chart").querySelectorAll(".nnx-legend-item")].map((e) => e.textContent);
    expect(legendText).toEqual(expect.arrayContaining(["loss", "smoothed", "recon", "kl", "load_balance (aux)"]));
    expect(legendsShown(view).loss.map((i) => i.label)).toContain("kl");
    expect(q("stack-toggle").closest("label").hidden).toBe(false);
    // the epoch table has a column per term the epochs carry
    const heads = [...q("epochs-table").querySelectorAll("th")].map((th) => th.textContent);
    expect(heads).toEqual(expect.arrayContaining(["train recon", "train kl"]));
    expect([...q("metric-select").options].map((o) => o.value)).toEqual(expect.arrayContaining(["recon", "kl"]));

    q("stack-toggle").checked = true;
    q("stack-toggle").dispatchEvent(new Event("change"));
    expect(view.lossChart).not.toBe(loss); // rebuilt with the bands between the sums
    expect(q("loss-chart").dataset.stacked).toBe("true");
    const d = view.lossChart.plot.data;
    expect(d[5][0]).toBeCloseTo(1);
    expect(d[6][0]).toBeCloseTo(2); // recon + kl at step 1
    expect(d[7][0]).toBeCloseTo(2.5); // + load_balance
    expect(d[6][2]).toBeCloseTo(1); // kl missing at step 3: recon alone
    expect(view.lossChart.plot.bands.length).toBe(3); // the min-max band and one per term above the first
  });

  it("draws one learning-rate line per optimizer, named in a legend and the readout", async () => {
    const model = fakeModel({ status: "running" });
    await shown(model, composite(1, 4));
    expect(view.lrChart.plot.series.slice(1).map((s) => s.label)).toEqual(["lr G", "lr D"]);
    expect(view.lrChart.plot.data[1][0]).toBeCloseTo(0.01);
    expect(view.lrChart.plot.data[2][0]).toBeCloseTo(0.002);
    expect(q("lr-legend").hidden).toBe(false);
    expect(q("lr-legend").textContent).toBe("lr Glr D");
    view._lossReadout(1);
    expect(view.lossReadout.textContent).toContain("recon 1");
    expect(view.lossReadout.textContent).toContain("kl 0.5");
    expect(view.lrReadout.textContent).toContain("lr G 0.01");
    expect(view.lrReadout.textContent).toContain("lr D 0.002");
  });

  it("adds a term's line when its column arrives later, and a plain run has none", async () => {
    const model = fakeModel({ status: "running" });
    await shown(model, stepColumns(1, 3));
    expect(view.lossChart.plot.series).toHaveLength(5); // x, loss, smoothed, max, min
    expect(view.lrChart.plot.series.map((s) => s.label)).toEqual(["step", "lr"]);
    expect(q("stack-toggle").closest("label").hidden).toBe(true);
    expect(q("lr-legend").hidden).toBe(true);
    // the kernel added the columns: it resends every row with the new schema
    const u = update(2, [op("steps", 0, composite(1, 6, { lrs: false }))]);
    model.custom(u.content, u.buffers);
    await settle();
    expect(view.lossChart.plot.series.slice(5).map((s) => s.label)).toEqual(["recon", "kl", "load_balance (aux)"]);
    expect(view.lossChart.plot.data[0]).toHaveLength(6);
    expect(view.lrChart.plot.series.map((s) => s.label)).toEqual(["step", "lr"]);
  });

  it("the runs panel's state reads the same columns from a log's lines", () => {
    const lines = runLog({ steps: 4, perEpoch: 2 }).map((l) => {
      if (l.event === "step") return { ...l, terms: { recon: 2 / l.step, kl: l.step === 3 ? null : 0.1 }, lrs: { G: 0.01, D: 0.002 } };
      if (l.event === "epoch_ended") return { ...l, train: { ...l.train, terms: { recon: 1.5, loss: 9 }, aux: { load_balance: 0.5 } } };
      return l;
    });
    const s = new RunState();
    s.apply(lines);
    expect(stepParts(s.steps).terms.map((t) => t.label)).toEqual(["recon", "kl"]);
    expect(stepParts(s.steps).lrs.map((t) => t.label)).toEqual(["lr G", "lr D"]);
    expect(Array.from(s.steps.column("term.recon"))).toEqual([2, 1, 2 / 3, 0.5]);
    expect(Number.isNaN(s.steps.column("term.kl")[2])).toBe(true);
    expect(s.steps.has("lr.G:min")).toBe(false);
    expect(Array.from(s.epochs.column("train.recon"))).toEqual([1.5, 1.5]);
    expect(Array.from(s.epochs.column("train.term.loss"))).toEqual([9, 9]);
    expect(Array.from(s.epochs.column("train.loss"))).toEqual([2, 1]);
    expect(Array.from(s.epochs.column("train.load_balance"))).toEqual([0.5, 0.5]);
  });
});
