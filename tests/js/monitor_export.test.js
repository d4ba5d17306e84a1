// The monitor's exports: what the screen shows, at the precision it was computed in.
import { afterEach, describe, expect, it, vi } from "vitest";
import { drawLegend, legendLayout } from "../../js/monitor/export.js";
import { smoothLoss } from "../../js/monitor/smoothing.js";
import { MonitorView } from "../../js/monitor/view.js";
import { float32Text, toCSV } from "../../js/shared/dom.js";
import { byTestId, disposeView, epochColumns, fakeModel, op, settle, snapshot, stepColumns, testHost } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => {
  view = disposeView(view);
  vi.restoreAllMocks();
});

async function shown(model, { steps = [1, 3], epochs = [1, 3], width = 1, lanes = 0 } = {}) {
  view = new MonitorView(model, el);
  const hello = model.lastHello();
  const ops = [];
  if (lanes) {
    for (let i = 0; i < lanes; i++) {
      ops.push(op(`lane${i}.steps`, 0, stepColumns(steps[0], steps[1])));
      ops.push(op(`lane${i}.epochs`, 0, epochColumns(epochs[0], epochs[1])));
    }
  } else {
    ops.push(op("steps", 0, stepColumns(steps[0], steps[1]), { width, total: (steps[1] - steps[0] + 1) * width }));
    ops.push(op("epochs", 0, epochColumns(epochs[0], epochs[1])));
  }
  const s = snapshot(hello.view, hello.req, 1, ops);
  model.custom(s.content, s.buffers);
  await settle();
  return view;
}

/** Click an export button; the text of the file it offers. */
async function saved(testid) {
  const blobs = [];
  vi.spyOn(URL, "createObjectURL").mockImplementation((b) => {
    blobs.push(b);
    return "blob:x";
  });
  vi.spyOn(URL, "revokeObjectURL").mockImplementation(() => {});
  q(testid).click();
  return (await blobs[0].text()).trim().split("\n").map((l) => l.split(","));
}

function lane(i, name) {
  return { key: `lane${i}`, name, run_id: `${i}`.repeat(32), status: "finished", stop_reason: "", error: "", epoch: 3, n_epochs: 3, step: 3, last_loss: 0.1, loss_nonfinite_since: null };
}

describe("float32 numbers in a CSV", () => {
  it("are written in the fewest digits that read back as the same float32", () => {
    expect(float32Text(Math.fround(0.01))).toBe("0.01");
    expect(String(Math.fround(0.01))).toBe("0.009999999776482582"); // what was written before
    expect(float32Text(Math.fround(1 / 3))).toBe("0.33333334");
    expect(float32Text(Math.fround(1e-7))).toBe("1e-7");
    expect(float32Text(3)).toBe("3");
    // every float32 round-trips, and one digit fewer would not
    let seed = 7;
    const rnd = () => ((seed = (seed * 16807) % 2147483647) / 2147483647);
    for (let k = 0; k < 2000; k++) {
      const v = Math.fround((rnd() - 0.5) * 10 ** Math.floor(rnd() * 16 - 8));
      const text = float32Text(v);
      expect(Math.fround(Number(text))).toBe(v);
      const digits = text.replace(/e.*$/, "").replace(/[-.]/g, "").replace(/^0+/, "").replace(/0+$/, "").length;
      if (digits > 1) expect(Math.fround(Number(v.toPrecision(digits - 1)))).not.toBe(v);
    }
  });

  it("only for float32 columns: doubles and integers are written as they are", () => {
    const text = toCSV(["a", "b", "c"], [Float32Array.of(0.1), Float64Array.of(0.1 + 0.2), Int32Array.of(7)]);
    expect(text).toBe("a,b,c\n0.1,0.30000000000000004,7\n");
  });
});

describe("the monitor's CSV", () => {
  it("holds the step series without float32 noise nor repeated lowest/highest columns", async () => {
    await shown(fakeModel({ run_id: "abcdef0123" }));
    const rows = await saved("export-csv-steps");
    expect(rows[0]).toEqual(["first", "step", "loss", "lr", "n", "bad", "smoothed"]);
    expect(rows).toHaveLength(4);
    expect(rows[3]).toEqual(["3", "3", "0.33333334", "0.01", "1", "0", expect.stringMatching(/^0\.\d{1,8}$/)]);
  });

  it("keeps each row's lowest and highest value once steps are merged (the band on screen)", async () => {
    await shown(fakeModel({ run_id: "abcdef0123" }), { steps: [1, 4], width: 8 });
    const rows = await saved("export-csv-steps");
    expect(rows[0]).toEqual(["first", "step", "loss", "loss:min", "loss:max", "lr", "n", "bad", "smoothed"]);
  });

  it("holds the epoch series with one column per metric", async () => {
    await shown(fakeModel({ run_id: "abcdef0123" }));
    const rows = await saved("export-csv-epochs");
    expect(rows[0]).toEqual(["first", "epoch", "step", "lr", "seconds", "improved", "n", "train.loss", "val.loss", "val.accuracy"]);
    expect(rows[0].some((f) => f.includes(":"))).toBe(false);
    expect(rows[1]).toEqual(["1", "1", "10", "0.00001", "1.5", "0", "1", "2", "1", "0.501"]);
  });

  it("writes a race in long form, one row per run and step, in the same precision", async () => {
    const model = fakeModel({ runs: [lane(0, "a"), lane(1, "b")] });
    await shown(model, { lanes: 2 });
    const rows = await saved("export-csv-steps");
    expect(rows[0]).toEqual(["run", "run_id", "first", "step", "loss", "lr", "n", "bad", "smoothed"]);
    expect(rows).toHaveLength(7);
    expect(rows[6]).toEqual(["b", "1".repeat(32), "3", "3", "0.33333334", "0.01", "1", "0", expect.stringMatching(/^0\.\d{1,8}$/)]);
  });

  it("gives a race's terms and optimizers' rates their columns, empty where a run has none", async () => {
    const model = fakeModel({ smoothing: 0.5, runs: [lane(0, "plain"), lane(1, "vae"), lane(2, "gan")] });
    view = new MonitorView(model, el);
    const hello = model.lastHello();
    const vae = stepColumns(1, 3, (s) => 1 + 1 / s);
    vae["term.recon"] = ["float32", [1, 1, 1]];
    vae["term.kl"] = ["float32", [1, NaN, 1 / 3]]; // a step without its kl term
    const gan = stepColumns(1, 2, (s) => 2 / s, () => NaN); // a Trainer run: no single lr
    gan["lr.G"] = ["float32", [1e-3, 5e-4]];
    gan["lr.D"] = ["float32", [2e-3, 2e-3]];
    const ops = [
      op("lane0.steps", 0, stepColumns(1, 2)),
      op("lane1.steps", 0, vae),
      op("lane2.steps", 0, gan),
      ...[0, 1].map((i) => op(`lane${i}.epochs`, 0, epochColumns(1, 1))),
      op("lane2.epochs", 0, epochColumns(1, 1, { val: false })), // no validation
    ];
    const s = snapshot(hello.view, hello.req, 1, ops);
    model.custom(s.content, s.buffers);
    await settle();
    const rows = await saved("export-csv-steps");
    const head = ["run", "run_id", "first", "step", "loss", "lr", "n", "bad", "term.recon", "term.kl", "lr.G", "lr.D", "smoothed", "term.recon:smoothed", "term.kl:smoothed"];
    expect(rows[0]).toEqual(head);
    expect(rows).toHaveLength(1 + 2 + 3 + 2);
    const at = (row, name) => row[head.indexOf(name)];
    const [plain1, , vae1, vae2, vae3, gan1, gan2] = rows.slice(1);
    // a run without terms or optimizers: empty cells there, not "nan"
    for (const name of ["term.recon", "term.kl", "lr.G", "lr.D", "term.recon:smoothed", "term.kl:smoothed"]) expect(at(plain1, name)).toBe("");
    expect(at(plain1, "lr")).toBe("0.01");
    // the terms as logged: a step without one is "nan", as the run logged it
    expect([vae1, vae2, vae3].map((r) => at(r, "term.kl"))).toEqual(["1", "nan", "0.33333334"]);
    expect(at(vae1, "lr.G")).toBe("");
    // the smoothed terms are the chart's: the smoothing function of the logged values
    const kl = smoothLoss(Float32Array.of(1, NaN, 1 / 3), null, 0.5);
    expect([vae1, vae2, vae3].map((r) => at(r, "term.kl:smoothed"))).toEqual(["1", "nan", float32Text(Math.fround(kl[2]))]);
    expect(Number(at(vae3, "term.kl:smoothed"))).not.toBeCloseTo(1 / 3, 3);
    const loss = smoothLoss(Float32Array.of(2, 1.5, 4 / 3), null, 0.5);
    expect(at(vae3, "smoothed")).toBe(float32Text(Math.fround(loss[2])));
    // each optimizer's rate of the Trainer run, its single lr "nan" as logged (null)
    expect([gan1, gan2].map((r) => [at(r, "run"), at(r, "lr"), at(r, "lr.G"), at(r, "lr.D"), at(r, "term.kl")])).toEqual([
      ["gan", "nan", "0.001", "0.002", ""],
      ["gan", "nan", "0.0005", "0.002", ""],
    ]);
    vi.restoreAllMocks();
    const epochs = await saved("export-csv-epochs");
    const val = epochs[0].indexOf("val.loss");
    expect(epochs.slice(1).map((r) => [r[0], r[val]])).toEqual([
      ["plain", "1"],
      ["vae", "1"],
      ["gan", ""], // a run without validation: empty, not nan
    ]);
  });
});

describe("the monitor's PNG", () => {
  it("carries the legends the page shows under its charts", async () => {
    await shown(fakeModel({ run_id: "r1", status: "finished" }));
    const calls = view.composePng().getContext("2d").calls;
    const texts = calls.filter((k) => k.op === "fillText").map((k) => k.args[0]);
    for (const label of ["loss", "smoothed", "epoch end", "validation", "training (epoch)"]) expect(texts).toContain(label);
    // a swatch per item: a stroke of its line's dash
    const dashes = calls.filter((k) => k.op === "setLineDash").map((k) => k.args[0].length);
    expect(dashes.filter((n) => n > 0)).toHaveLength(2); // epoch end, training (epoch)
  });

  it("labels each run of a race in its colour", async () => {
    const model = fakeModel({ runs: [lane(0, "low lr"), lane(1, "high lr")] });
    await shown(model, { lanes: 2 });
    const calls = view.composePng().getContext("2d").calls;
    const texts = calls.filter((k) => k.op === "fillText").map((k) => k.args[0]);
    expect(texts).toContain("low lr");
    expect(texts).toContain("high lr");
    const strokes = calls.filter((k) => k.op === "stroke").map((k) => k.strokeStyle);
    expect(strokes).toContain("#1f77b4");
    expect(strokes).toContain("#ff7f0e");
  });

  it("lays a legend out in rows that fit the chart's width", () => {
    const ctx = document.createElement("canvas").getContext("2d");
    const items = ["alpha", "beta", "gamma", "delta"].map((label) => ({ label, color: "#123456" }));
    // 6 px a character (the test canvas): 16 + 4 + 30 = 50 px an item, 12 px apart
    expect(legendLayout(ctx, items, 1000).rows).toBe(1);
    const narrow = legendLayout(ctx, items, 120);
    expect(narrow.rows).toBe(2);
    expect(narrow.places.map((p) => p.row)).toEqual([0, 0, 1, 1]);
    const used = drawLegend(ctx, items, 10, 100, 120, 18, (it) => it.color);
    expect(used).toBe(36);
    const drawn = ctx.calls.filter((k) => k.op === "fillText");
    expect(drawn.map((k) => k.args[0])).toEqual(["alpha", "beta", "gamma", "delta"]);
    expect(drawn[2].args[2]).toBeGreaterThan(drawn[0].args[2] + 17); // the second row lower
    expect(ctx.calls.filter((k) => k.op === "stroke").every((k) => k.strokeStyle === "#123456")).toBe(true);
  });
});
