// The LRFinderWidget view on the real modules (uPlot included): the curve on a log-x
// axis as the points arrive, the marks, the hover readout, picking by click and by drag,
// typed rates, the buttons; and the chart options it relies on (dragPick, yRange).
import { afterEach, describe, expect, it } from "vitest";
import { LRFinderView, fmtLr, marksOf, notFound, yClamp } from "../../js/lr_finder/view.js";
import { labelsOverlap } from "../../js/shared/marker_labels.js";
import { Chart } from "../../js/shared/chart.js";
import { builtWidget, fakeModel, op, settle, snapshot, update } from "./helpers.js";

const f32 = (v) => Math.fround(v);
const N = 30;
const LRS = Array.from({ length: N }, (_, i) => 1e-5 * 10 ** (i / 6)); // 1e-5 .. ~5e-1
const LOSS = LRS.map((lr, i) => 1.1 - 0.02 * i + (i > 24 ? (i - 24) ** 2 * 0.3 : 0));
const SMOOTH = LOSS.map((v, i) => (i ? (v + LOSS[i - 1]) / 2 : v));

/** Sweep columns of points [a, b). */
function sweepColumns(a, b) {
  const idx = Array.from({ length: b - a }, (_, k) => a + k);
  const pick = (arr) => idx.map((i) => arr[i]);
  return {
    step: ["int32", idx.map((i) => i + 1)],
    lr: ["float32", pick(LRS)],
    loss: ["float32", pick(LOSS)],
    "loss:min": ["float32", pick(LOSS)],
    "loss:max": ["float32", pick(LOSS)],
    smoothed: ["float32", pick(SMOOTH)],
    "smoothed:min": ["float32", pick(SMOOTH)],
    "smoothed:max": ["float32", pick(SMOOTH)],
    n: ["int32", idx.map(() => 1)],
    bad: ["int32", idx.map(() => 0)],
  };
}

const BASE = {
  status: "running",
  source: "plan",
  num_iter: N,
  start_lr: 1e-5,
  end_lr: 1.0,
  mode: "exp",
  points: 0,
  suggested_lr: null,
  rule: "",
  suggestions: {},
  stopped_early: false,
  reason: "",
  chosen_lr: null,
  input_error: "",
  can_stop: true,
  can_use: false,
  linked: false,
  plan_lr: 1e-3,
  applied_lr: null,
  applied_note: "",
};

let views = [];
function render(state = {}) {
  const el = document.createElement("div");
  el.style.width = "640px";
  document.body.append(el);
  const model = fakeModel({ ...BASE, ...state });
  const view = new LRFinderView(model, el);
  views.push({ view, el });
  return { model, view, el, q: (id) => el.querySelector(`[data-testid="${id}"]`) };
}

/** The kernel's answer to the view's hello: the points [0, n). */
async function feed(model, n, seq = 1) {
  const hello = model.lastHello();
  const m = snapshot(hello.view, hello.req, seq, [op("sweep", 0, sweepColumns(0, n))]);
  model.custom(m.content, m.buffers);
  await settle();
}

afterEach(() => {
  for (const { view, el } of views) {
    view.dispose();
    el.remove();
  }
  views = [];
});

const mouse = (target, type, x, extra = {}) => target.dispatchEvent(new MouseEvent(type, { clientX: x, clientY: 40, bubbles: true, ...extra }));

describe("helpers", () => {
  it("formats learning rates in three significant digits", () => {
    expect(fmtLr(0.0031622776)).toBe("3.16e-3");
    expect(fmtLr(0.01)).toBe("1e-2");
    expect(fmtLr(2.5)).toBe("2.5e0");
    expect(fmtLr(null)).toBe("–");
    expect(fmtLr(NaN)).toBe("–");
  });

  it("keeps a diverging tail of raw losses from setting the top of the y axis", () => {
    const [lo, hi] = yClamp([1, 0.8, 0.5, 40, NaN], [1, 0.9, 0.7, 2, NaN]);
    expect(lo).toBeLessThan(0.5);
    expect(hi).toBeGreaterThan(2);
    expect(hi).toBeLessThan(3); // 40 is off the chart
    expect(yClamp([NaN], [NaN])).toBeNull();
    // negative losses work too
    const [nlo, nhi] = yClamp([-1, -2, -3], [-1, -1.5, -2.5]);
    expect(nlo).toBeLessThan(-3);
    expect(nhi).toBeGreaterThan(-1);
  });

  it("marks the suggestion and the choice, the other rules faintly", () => {
    const suggestions = { valley: 3e-3, min_div_10: 1e-2, steepest: 0.1, linear_slope: null };
    const { markers, marks } = marksOf({ suggestions, rule: "valley", suggested: 3e-3, chosen: 5e-4 });
    expect(markers).toEqual([
      { x: 3e-3, label: "valley 3e-3", color: "--nnx-suggest" },
      { x: 5e-4, label: "chosen 5e-4", color: "--nnx-chosen" },
    ]);
    expect(marks).toEqual([1e-2, 0.1]);
    // the choice is the suggestion: one marker says both
    const same = marksOf({ suggestions, rule: "valley", suggested: 3e-3, chosen: 3e-3 });
    expect(same.markers).toEqual([{ x: 3e-3, label: "valley 3e-3 · chosen", color: "--nnx-suggest" }]);
  });
});

describe("LRFinderView", () => {
  it("says hello and draws the curve on a log-x axis spanning the sweep, growing with each update", async () => {
    const { model, view, q } = render();
    expect(model.lastHello()).toMatchObject({ kind: "hello", version: 2 });
    await feed(model, 12);
    const u = view.chart.plot;
    expect(u.data[0]).toEqual(LRS.slice(0, 12).map(f32));
    expect(u.data[1]).toEqual(LOSS.slice(0, 12).map(f32));
    expect(u.data[2]).toEqual(SMOOTH.slice(0, 12).map(f32));
    expect(q("lr-chart").dataset.points).toBe("12");
    const r = view.chart.ranges();
    expect(r.logX).toBe(true);
    expect(r.x[0]).toBeCloseTo(1e-5, 12); // the whole sweep's range from the start
    expect(r.x[1]).toBeCloseTo(1.0, 9);
    // a live update appends the next points
    const m = update(2, [op("sweep", 12, sweepColumns(12, 20))]);
    model.custom(m.content, m.buffers);
    await settle();
    expect(u.data[0]).toEqual(LRS.slice(0, 20).map(f32));
    expect(q("lr-chart").dataset.points).toBe("20");
    model.set("points", 20);
    expect(q("progress").textContent).toBe("20 / 30 steps");
    expect(q("status").textContent).toBe("running");
  });

  it("a linear sweep is drawn on a linear x axis", async () => {
    const { view } = render({ mode: "linear" });
    expect(view.chart.ranges().logX).toBe(false);
  });

  it("keeps the diverging tail off the top of the y axis", async () => {
    const { model, view } = render();
    await feed(model, N);
    const [, top] = view.chart.ranges().y;
    const rawMax = Math.max(...LOSS);
    const smoothMax = Math.max(...SMOOTH);
    expect(top).toBeLessThan(rawMax);
    expect(top).toBeGreaterThanOrEqual(smoothMax);
  });

  it("marks the suggestion and the choice (labelled) and the other rules (faint), and lists every rule", async () => {
    const { model, view, q } = render();
    await feed(model, N);
    model.set("suggestions", { valley: LRS[10], min_div_10: LRS[20] / 10, steepest: LRS[15], linear_slope: null });
    model.set("rule", "valley");
    model.set("suggested_lr", LRS[10]);
    model.set("chosen_lr", LRS[14]);
    await settle();
    expect(view.chart.markers.map((m) => m.label)).toEqual([`valley ${fmtLr(LRS[10])}`, `chosen ${fmtLr(LRS[14])}`]);
    expect(view.chart.marks).toEqual([LRS[20] / 10, LRS[15]].sort((a, b) => a - b));
    const texts = view.chart.plot.ctx.calls.filter((c) => c.op === "fillText").map((c) => c.args[0]);
    expect(texts).toContain(`valley ${fmtLr(LRS[10])}`);
    expect(texts).toContain(`chosen ${fmtLr(LRS[14])}`);
    expect(view.chart.info.marksDrawn).toBe(2);
    const rules = [...q("rules").querySelectorAll("li")];
    expect(rules.map((li) => li.textContent)).toEqual([
      `valley ${fmtLr(LRS[10])}`,
      `min ÷ 10 ${fmtLr(LRS[20] / 10)}`,
      `steepest ${fmtLr(LRS[15])}`,
      "linear slope no slope found",
    ]);
    expect(rules[0].dataset.suggested).toBe("true");
    expect(rules[3].querySelector("button").disabled).toBe(true);
    expect(rules[3].querySelector("button").title).toMatch(/warm-up/);
    // a rule's chip chooses its rate
    rules[2].querySelector("button").click();
    expect(model.get("chosen_lr")).toBe(LRS[15]);
    expect(model.saves).toBe(1);
    expect(q("chosen-lr").value).toBe(fmtLr(LRS[15]));
  });

  it("draws the suggestion's and the choice's labels apart when their rates are close", async () => {
    const { model, view } = render();
    await feed(model, N);
    model.set("suggestions", { valley: LRS[10], min_div_10: LRS[20] / 10, steepest: null, linear_slope: null });
    model.set("rule", "valley");
    model.set("suggested_lr", LRS[10]);
    model.set("chosen_lr", LRS[10] * 1.05); // a pick a few pixels right of the suggestion
    await settle();
    view.chart.plot.redraw(false, false);
    const labels = view.chart.info.labels;
    expect(labels.map((l) => l.label)).toEqual([`valley ${fmtLr(LRS[10])}`, `chosen ${fmtLr(LRS[10] * 1.05)}`]);
    expect(labelsOverlap(labels[0], labels[1])).toBe(false);
    // what was drawn: each label at its placed x, two separate boxes
    const drawn = view.chart.plot.ctx.calls.filter((c) => c.op === "fillText" && labels.some((l) => l.label === c.args[0]));
    const last = new Map(drawn.map((c) => [c.args[0], c.args.slice(1)]));
    for (const l of labels) expect(last.get(l.label)[0]).toBe(l.x0);
    expect(notFound("steepest")[0]).toBe("no slope found");
    expect(notFound("min_div_10")[0]).toBe("none");
  });

  it("hover shows (LR, loss) of the point under the mouse", async () => {
    const { model, view, q } = render();
    await feed(model, N);
    const u = view.chart.plot;
    mouse(u.over, "mousemove", u.valToPos(f32(LRS[7]), "x"));
    expect(q("readout").textContent).toBe(`LR ${fmtLr(f32(LRS[7]))} · loss ${Number(f32(LOSS[7]).toPrecision(4))} · smoothed ${Number(f32(SMOOTH[7]).toPrecision(4))}`);
  });

  it("a click on the curve sets chosen_lr to that point's rate", async () => {
    const { model, view, q } = render();
    await feed(model, N);
    const u = view.chart.plot;
    const at = u.valToPos(f32(LRS[9]), "x");
    mouse(u.over, "mousemove", at);
    mouse(u.over, "mousedown", at);
    mouse(u.over, "mouseup", at);
    mouse(u.over, "click", at);
    expect(model.get("chosen_lr")).toBe(f32(LRS[9]));
    expect(model.saves).toBe(1); // one change sent to the kernel, not one per event
    expect(q("chosen-lr").value).toBe(fmtLr(LRS[9]));
    expect(q("lr-chart").dataset.chosen).toBe(String(f32(LRS[9])));
    expect(view.chart.markers.at(-1).label).toBe(`chosen ${fmtLr(LRS[9])}`);
    // a click does not zoom
    expect(view.chart.ranges().x[0]).toBeCloseTo(1e-5, 12);
  });

  it("a drag moves the choice with the mouse and sends it once, when released", async () => {
    const { model, view, q } = render({ chosen_lr: LRS[3] });
    await feed(model, N);
    const u = view.chart.plot;
    const px = (i) => u.valToPos(f32(LRS[i]), "x");
    mouse(u.over, "mousemove", px(5));
    mouse(u.over, "mousedown", px(5));
    mouse(u.over, "mousemove", px(12));
    // while dragging: the mark and the field follow, the kernel is not told yet
    expect(view.chart.markers.at(-1).label).toBe(`chosen ${fmtLr(LRS[12])}`);
    expect(q("chosen-lr").value).toBe(fmtLr(LRS[12]));
    expect(model.get("chosen_lr")).toBe(LRS[3]);
    expect(model.saves).toBe(0);
    mouse(u.over, "mousemove", px(18));
    mouse(u.over, "mouseup", px(18));
    mouse(u.over, "click", px(18));
    expect(model.get("chosen_lr")).toBe(f32(LRS[18]));
    expect(model.saves).toBe(1);
    // a drag picks; it does not zoom
    expect(view.chart.xRange[0]).toBeCloseTo(1e-5, 12);
    expect(view.chart.xRange[1]).toBeCloseTo(1.0, 9);
  });

  it("a typed rate goes to the kernel; a refused one stays in the field with its message", async () => {
    const { model, q } = render({ chosen_lr: 1e-3 });
    const input = q("chosen-lr");
    expect(input.value).toBe("1e-3");
    input.value = "-1";
    input.dispatchEvent(new Event("change"));
    expect(model.sent.at(-1).content).toEqual({ kind: "choose", text: "-1" });
    model.set("input_error", "chosen_lr=-1.0: pass a learning rate > 0 (the sweep covers 1e-05 to 1); click the curve or type one");
    expect(q("input-error").hidden).toBe(false);
    expect(q("input-error").textContent).toMatch(/^chosen_lr=-1\.0: pass a learning rate > 0/);
    expect(input.getAttribute("aria-invalid")).toBe("true");
    expect(input.value).toBe("-1"); // what was typed stays
    model.set("chosen_lr", 1e-3); // the kernel sends its kept value back
    expect(input.value).toBe("-1");
    model.set("input_error", "");
    expect(q("input-error").hidden).toBe(true);
    expect(input.value).toBe("1e-3");
  });

  it("Use this LR is enabled with a choice and a plan, and asks the kernel", async () => {
    const { model, q } = render();
    const use = q("use");
    expect(use.disabled).toBe(true);
    expect(use.title).toMatch(/Choose a rate first/);
    model.set("chosen_lr", 2e-3);
    model.set("can_use", false);
    expect(use.title).toMatch(/link a PlanBuilder/);
    model.set("can_use", true);
    model.set("linked", true);
    expect(use.disabled).toBe(false);
    expect(use.title).toMatch(/PlanBuilder's learning-rate field/);
    use.click();
    expect(model.sent.at(-1).content).toEqual({ kind: "use" });
    model.set("applied_note", "train.optim.max_lr = 0.002 in the PlanBuilder");
    model.set("plan_lr", 2e-3);
    expect(q("applied").textContent).toBe("train.optim.max_lr = 0.002 in the PlanBuilder");
    expect(q("plan-lr").textContent).toBe("builder max_lr 2e-3");
  });

  it("Stop asks the kernel once; Sweep again only after the end; errors show under the widget", async () => {
    const { model, q } = render();
    const stop = q("stop");
    expect(stop.disabled).toBe(false);
    expect(q("restart").disabled).toBe(true);
    stop.click();
    expect(model.sent.at(-1).content).toEqual({ kind: "stop" });
    expect(stop.disabled).toBe(true);
    model.set("status", "stopping");
    expect(stop.textContent).toBe("Stopping…");
    model.set("can_stop", false);
    model.set("status", "stopped");
    model.set("reason", "stopped from the LR finder");
    expect(q("status").textContent).toBe("stopped");
    expect(q("reason").textContent).toBe("stopped from the LR finder");
    expect(q("restart").disabled).toBe(false);
    q("restart").click();
    expect(model.sent.at(-1).content).toEqual({ kind: "restart" });
    expect(q("error").hidden).toBe(true);
    model.set("error", "RuntimeError: boom at batch 7\n\nTraceback ...");
    expect(q("error").hidden).toBe(false);
    expect(q("error").textContent).toMatch(/^RuntimeError: boom at batch 7/);
  });

  it("a reload's view gets the whole curve from its snapshot", async () => {
    const first = render();
    await feed(first.model, 20);
    // a second view (the page reloaded) on the same model state
    const second = render();
    await feed(second.model, 20, 3);
    expect(second.view.chart.plot.data[0]).toEqual(first.view.chart.plot.data[0]);
    expect(second.q("lr-chart").dataset.points).toBe("20");
  });

  it("dispose removes the DOM and every listener", () => {
    const { model, view, el } = render();
    view.dispose();
    expect(el.querySelector(".nnx-lr-finder")).toBeNull();
    expect(model.listenerCount()).toBe(0);
    views = views.filter((v) => v.view !== view);
  });
});

describe("Chart options the LR finder uses", () => {
  let host;
  afterEach(() => host && host.remove());
  function chart(opts) {
    host = document.createElement("div");
    document.body.append(host);
    return new Chart(host, { title: "t", xLabel: "x", yLabel: "y", series: [{ label: "a", color: "#f00" }], ...opts });
  }

  it("dragPick: a drag reports picks as the mouse moves and a final one on release, and never zooms", async () => {
    const picks = [];
    const c = chart({ dragPick: true, onPick: (p) => picks.push(p) });
    c.setData(Float64Array.from([10, 20, 30, 40]), [Float64Array.from([1, 2, 3, 4])]);
    await settle();
    const over = c.plot.over;
    const px = (x) => c.plot.valToPos(x, "x");
    mouse(over, "mousedown", px(10));
    mouse(over, "mousemove", px(30));
    mouse(over, "mouseup", px(40));
    mouse(over, "click", px(40));
    expect(picks).toEqual([
      { idx: 2, x: 30, values: [3], dragging: true },
      { idx: 3, x: 40, values: [4], dragging: false },
    ]);
    expect(c.xRange).toBeNull();
    expect(c.plot.cursor.drag.x).toBe(false);
    // a plain click: one final pick
    mouse(over, "mousedown", px(20));
    mouse(over, "mouseup", px(20));
    mouse(over, "click", px(20));
    expect(picks.at(-1)).toEqual({ idx: 1, x: 20, values: [2], dragging: false });
    expect(picks).toHaveLength(3);
    c.destroy();
  });

  it("without dragPick a drag still zooms (the monitor's charts)", () => {
    const c = chart({ onPick: () => {} });
    expect(c.plot.cursor.drag.x).toBe(true);
    expect(c.plot.cursor.drag.setScale).toBe(true);
    c.destroy();
  });

  it("yRange replaces the data's y range", async () => {
    const c = chart({ yRange: () => [0, 5] });
    c.setData(Float64Array.from([1, 2, 3]), [Float64Array.from([1, 100, 2])]);
    await settle();
    expect(c.ranges().y).toEqual([0, 5]);
    c.destroy();
  });
});

describe("built lr_finder bundle", () => {
  it("exports only a default widget object whose render draws the view and cleans up", async () => {
    const widget = await builtWidget("lr_finder");
    const el = document.createElement("div");
    document.body.append(el);
    const model = fakeModel({ ...BASE, status: "finished" });
    const cleanup = widget.render({ model, el });
    await settle();
    expect(el.querySelector('[data-testid="status"]').textContent).toBe("finished");
    expect(el.querySelector(".uplot")).not.toBeNull();
    expect(model.sent[0].content).toMatchObject({ kind: "hello", version: 2 });
    cleanup();
    expect(el.querySelector(".nnx-lr-finder")).toBeNull();
    expect(model.listenerCount()).toBe(0);
    el.remove();
  });
});
