import { afterEach, describe, expect, it, vi } from "vitest";
import { MonitorView } from "../../js/monitor/view.js";
import { byTestId, disposeView, epochColumns, fakeModel, op, settle, snapshot, stepColumns, testHost, update } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => {
  view = disposeView(view);
  vi.restoreAllMocks();
});

/** Render a view and answer its hello with a snapshot of these steps and epochs. */
async function shown(model, { steps = [1, 0], epochs = [1, 0], width = 1, total } = {}) {
  view = new MonitorView(model, el);
  const hello = model.lastHello();
  const ops = [];
  if (steps[1] >= steps[0]) ops.push(op("steps", 0, stepColumns(steps[0], steps[1]), { width, total }));
  if (epochs[1] >= epochs[0]) ops.push(op("epochs", 0, epochColumns(epochs[0], epochs[1])));
  const s = snapshot(hello.view, hello.req, 1, ops);
  model.custom(s.content, s.buffers);
  await settle();
  return view;
}

describe("TrainingMonitor view", () => {
  it("renders its parts and asks the kernel for the history", () => {
    const model = fakeModel({ run_id: "abc123", status: "running", can_stop: true });
    view = new MonitorView(model, el);
    for (const id of ["run-id", "status", "stop", "loss-chart", "epoch-chart", "lr-chart", "log-toggle", "window", "smoothing", "export-png", "export-csv-steps", "export-csv-epochs", "epochs-table"]) {
      expect(q(id), id).not.toBeNull();
    }
    expect(q("status").textContent).toBe("running");
    expect(q("run-id").textContent).toBe("abc123");
    expect(q("stop").disabled).toBe(false);
    expect(q("loss-chart").dataset.points).toBe("0");
    const hello = model.sent[0].content;
    expect(hello).toMatchObject({ kind: "hello", version: 2, req: 1 });
    expect(hello.view).toMatch(/^v\d+-/);
  });

  it("draws what the snapshot and the updates bring", async () => {
    const model = fakeModel({ status: "running", last_loss: 0.01 });
    await shown(model, { steps: [1, 100], epochs: [1, 3] });
    expect(q("loss-chart").dataset.points).toBe("100");
    expect(view.lossChart.plot.data[0]).toHaveLength(100);
    expect(view.lossChart.plot.series[3].show).toBe(false); // no band for single steps
    const u = update(2, [op("steps", 100, stepColumns(101, 150))]);
    model.custom(u.content, u.buffers);
    await settle();
    expect(q("loss-chart").dataset.points).toBe("150");
    expect(view.lossChart.plot.data[0].at(-1)).toBe(150);
    // the epoch chart's x is the epoch, not the step
    expect(view.epochChart.plot.data[0]).toEqual([1, 2, 3]);
    expect(view.epochChart.plot.axes[0].label).toBe("epoch");
    expect(view.lossChart.marks).toEqual([10, 20, 30]);
  });

  it("shows the status, the reason a run stopped, and formats the counters", () => {
    const model = fakeModel({ status: "running" });
    view = new MonitorView(model, el);
    model.set("epoch", 2);
    model.set("n_epochs", 10);
    model.set("step", 1234);
    model.set("total_steps", 5000);
    model.set("samples_per_sec", 4321.7);
    model.set("elapsed", 125);
    model.set("eta", 30.04);
    expect(q("epoch").textContent).toBe("2 / 10");
    expect(q("step").textContent).toBe("1,234 / 5,000");
    expect(q("throughput").textContent).toBe("4,322");
    expect(q("elapsed").textContent).toBe("2m 05s");
    expect(q("eta").textContent).toBe("30.0s");
    expect(q("reason").hidden).toBe(true);
    model.set("stop_reason", "early stopping: no improvement of validation error for 5 epochs");
    model.set("status", "finished");
    expect(q("reason").hidden).toBe(false);
    expect(q("reason").textContent).toBe("early stopping: no improvement of validation error for 5 epochs");
    expect(q("eta").textContent).toBe("–");
    for (const st of ["created", "running", "stopping", "stopped", "finished", "failed"]) {
      model.set("status", st);
      expect(q("status").textContent).toBe(st);
      expect(q("status").dataset.status).toBe(st);
    }
  });

  it("says loudly that the loss went non-finite: header, marker, gap and the end of the smoothed line", async () => {
    const model = fakeModel({ status: "finished", run_id: "r" });
    view = new MonitorView(model, el);
    const hello = model.lastHello();
    const losses = (s) => (s >= 31 ? NaN : 1 / s);
    const s = snapshot(hello.view, hello.req, 1, [op("steps", 0, stepColumns(1, 40, losses))]);
    model.custom(s.content, s.buffers);
    model.set("last_finite_loss", 1 / 30);
    model.set("last_finite_step", 30);
    model.set("loss_nonfinite_steps", 10);
    model.set("loss_nonfinite_since", 31);
    await settle();
    expect(q("nonfinite").hidden).toBe(false);
    expect(q("nonfinite").textContent).toBe("⚠ loss non-finite since step 31");
    expect(q("loss").textContent).toBe("non-finite (last finite 0.03333 at step 30)");
    expect(el.querySelector(".nnx-monitor").dataset.health).toBe("nonfinite");
    expect(q("loss-chart").dataset.nonfiniteSince).toBe("31");
    const [, raw, smoothed] = view.lossChart.plot.data;
    expect(raw.slice(30)).toEqual(Array(10).fill(null)); // a gap, not a line to the last finite value
    expect(smoothed[29]).not.toBeNull();
    expect(smoothed.slice(30)).toEqual(Array(10).fill(null)); // the smoothed line stops there
    const texts = view.lossChart.plot.ctx.calls.filter((k) => k.op === "fillText").map((k) => k.args[0]);
    expect(texts).toContain("loss non-finite since step 31");
  });

  it("sends stop when Stop is clicked, and says why Stop is off when it is", () => {
    const model = fakeModel({ status: "running", can_stop: true });
    view = new MonitorView(model, el);
    model.sent.length = 0;
    q("stop").click();
    expect(model.sent).toEqual([{ content: { kind: "stop" }, buffers: undefined }]);
    expect(q("stop").disabled).toBe(true);
    model.set("status", "stopping");
    expect(q("stop").textContent).toBe("Stopping…");
    model.set("status", "stopped");
    expect(q("stop").disabled).toBe(true);
    expect(q("stop").title).toBe("The run has ended (stopped)");
    model.set("can_stop", false);
    model.set("status", "running");
    expect(q("stop").title).toMatch(/only runs started with monitor\.fit/);
    model.set("from_log", true);
    expect(q("stop").disabled).toBe(true);
    expect(q("stop").title).toMatch(/read from its log/);
    expect(q("stop").title).not.toMatch(/Stop training after the current step/);
  });

  it("switches the loss axis to log", async () => {
    const model = fakeModel();
    await shown(model, { steps: [1, 500] });
    expect(view.lossChart.ranges().logY).toBe(false);
    q("log-toggle").checked = true;
    q("log-toggle").dispatchEvent(new Event("change"));
    await settle();
    expect(view.lossChart.ranges().logY).toBe(true);
    expect(q("loss-chart").dataset.log).toBe("y");
    const [lo, hi] = view.lossChart.ranges().y;
    expect(hi / lo).toBeGreaterThan(100); // 1/500 .. 1 spans decades
  });

  it("shows the last N steps and follows new ones; Reset zoom undoes a zoom and keeps the window", async () => {
    const model = fakeModel();
    await shown(model, { steps: [1, 5000] });
    q("window").value = "1000";
    q("window").dispatchEvent(new Event("change"));
    await settle();
    expect(view.lossChart.ranges().x).toEqual([4000, 5000]);
    expect(view.lrChart.ranges().x).toEqual([4000, 5000]);
    const u = update(2, [op("steps", 5000, stepColumns(5001, 5500))]);
    model.custom(u.content, u.buffers);
    await settle();
    expect(view.lossChart.ranges().x).toEqual([4500, 5500]);
    expect(q("reset-zoom").disabled).toBe(true); // a window is not a zoom
    view.lossChart.setXRange(4600, 4700); // a drag on the chart
    await settle();
    expect(view.lrChart.ranges().x).toEqual([4600, 4700]);
    expect(q("reset-zoom").disabled).toBe(false);
    q("reset-zoom").click();
    await settle();
    expect(view.lossChart.ranges().x).toEqual([4500, 5500]); // back to the window, not to every step
    expect(view.lrChart.ranges().x).toEqual([4500, 5500]);
    expect(q("window").value).toBe("1000");
    expect(q("reset-zoom").disabled).toBe(true);
    q("window").value = "all";
    q("window").dispatchEvent(new Event("change"));
    await settle();
    expect(view.lossChart.ranges().x).toEqual([1, 5500]);
  });

  it("smooths with the slider at once and writes the trait once it rests", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const model = fakeModel({ smoothing: 0.9 });
      view = new MonitorView(model, el);
      const hello = model.lastHello();
      const s = snapshot(hello.view, hello.req, 1, [op("steps", 0, stepColumns(1, 3, (st) => [1, 3, 5][st - 1]))]);
      model.custom(s.content, s.buffers);
      const slider = q("smoothing");
      expect(slider.value).toBe("0.9");
      slider.value = "0";
      slider.dispatchEvent(new Event("input"));
      expect(q("smoothing-value").textContent).toBe("0.00");
      expect(Array.from(view._smoothed)).toEqual([1, 3, 5]); // factor 0: the raw loss
      expect(model.get("smoothing")).toBe(0.9);
      vi.advanceTimersByTime(300);
      expect(model.get("smoothing")).toBe(0);
      expect(model.saves).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it("pages the epoch table, follows the newest epoch and keeps lr on one line", async () => {
    const model = fakeModel();
    await shown(model, { steps: [1, 10], epochs: [1, 5000] });
    const rows = q("epochs-table").querySelectorAll("tbody tr");
    expect(rows.length).toBe(20);
    expect(rows[19].firstChild.textContent).toBe("5,000");
    const heads = [...q("epochs-table").querySelectorAll("th")].map((th) => th.textContent);
    expect(heads).toEqual(["epoch", "step", "train loss", "val loss", "val accuracy", "lr", "time"]);
    const lr = rows[0].children[heads.indexOf("lr")];
    expect(lr.textContent).toBe("1.00e-5");
    expect(lr.className).toBe("nnx-nowrap");
    const u = update(2, [op("epochs", 5000, epochColumns(5001, 5001))]);
    model.custom(u.content, u.buffers);
    await settle();
    const last = [...q("epochs-table").querySelectorAll("tbody tr")].at(-1);
    expect(last.firstChild.textContent).toBe("5,001");
    expect(q("page-status").textContent).toBe("4,982–5,001 of 5,001");
    expect(el.querySelectorAll("*").length).toBeLessThan(1500);
  });

  it("marks the BEST epoch and shows merged epochs as ranges", async () => {
    const model = fakeModel();
    view = new MonitorView(model, el);
    const hello = model.lastHello();
    const cols = epochColumns(1, 3);
    cols.first = ["int32", [1, 3, 5]];
    cols.epoch = ["int32", [2, 4, 6]];
    const s = snapshot(hello.view, hello.req, 1, [op("epochs", 0, cols, { width: 2, total: 6 })]);
    model.custom(s.content, s.buffers);
    await settle();
    const cells = [...q("epochs-table").querySelectorAll("tbody tr")].map((tr) => tr.firstChild.textContent);
    expect(cells).toEqual(["1–2", "3–4 ★", "5–6"]);
    expect(q("note").textContent).toMatch(/6 epochs are merged in rows of up to 2/);
  });

  it("reads out the hovered step and epoch", async () => {
    const model = fakeModel();
    await shown(model, { steps: [1, 100], epochs: [1, 4] });
    view.lossChart.plot.setCursor({ left: view.lossChart.plot.valToPos(50, "x"), top: 5 });
    const text = view.lossReadout.textContent;
    expect(text).toMatch(/^step 50 · loss 0\.02 · smoothed [\d.]+ · lr 0\.01$/);
    view.epochChart.plot.setCursor({ left: view.epochChart.plot.valToPos(2, "x"), top: 5 });
    expect(view.epochReadout.textContent).toBe("epoch 2 · val loss 0.5 · val accuracy 0.502 · train loss 1");
  });

  it("says no epoch has ended instead of an empty chart and a blank picker", async () => {
    const model = fakeModel({ status: "running" });
    await shown(model, { steps: [1, 7], epochs: [1, 0] });
    expect(q("epoch-empty").hidden).toBe(false);
    expect(q("epoch-empty").textContent).toMatch(/^No epoch has ended yet/);
    expect(q("metric-select").disabled).toBe(true);
    expect([...q("metric-select").options].map((o) => o.textContent)).toEqual(["no epoch yet"]);
    model.set("status", "failed"); // at step 7
    expect(q("epoch-empty").textContent).toBe("No epoch ended: the run failed before the end of its first epoch.");
    const u = update(2, [op("epochs", 0, epochColumns(1, 1))]);
    model.custom(u.content, u.buffers);
    await settle();
    expect(q("epoch-empty").hidden).toBe(true);
    expect(q("metric-select").disabled).toBe(false);
    expect(q("metric-select").value).toBe("loss");
  });

  it("ticks its axes in whole steps and epochs, in one format per axis", async () => {
    const model = fakeModel();
    await shown(model, { steps: [1, 3], epochs: [1, 3] });
    for (const c of [view.lossChart, view.epochChart, view.lrChart]) {
      for (const v of c.plot.axes[0]._splits) expect(Number.isInteger(v), `${c.opts.title}: ${v}`).toBe(true);
    }
    const u = update(2, [op("steps", 3, stepColumns(4, 12000))]);
    model.custom(u.content, u.buffers);
    await settle();
    const labels = view.lossChart.plot.axes[0]._values.filter(Boolean);
    expect(labels.length).toBeGreaterThan(1);
    for (const t of labels) expect(t).toMatch(/^(0|\d+(\.\d+)?k)$/);
  });

  it("exports the step series as CSV", async () => {
    const model = fakeModel({ run_id: "abcdef0123" });
    await shown(model, { steps: [1, 3] });
    const blobs = [];
    vi.spyOn(URL, "createObjectURL").mockImplementation((b) => {
      blobs.push(b);
      return "blob:x";
    });
    vi.spyOn(URL, "revokeObjectURL").mockImplementation(() => {});
    q("export-csv-steps").click();
    const text = await blobs[0].text();
    const lines = text.trim().split("\n");
    expect(lines[0]).toBe("first,step,loss,lr,n,bad,smoothed");
    expect(lines).toHaveLength(4);
    expect(lines[2].split(",").slice(0, 2)).toEqual(["2", "2"]);
    expect(Number(lines[2].split(",")[2])).toBeCloseTo(0.5);
  });

  it("sends a picture of the charts once the run has ended, for the notebook's fallback", async () => {
    const model = fakeModel({ run_id: "r1", status: "running" });
    await shown(model, { steps: [1, 50] });
    model.sent.length = 0;
    model.set("status", "finished");
    await settle(80);
    const pics = model.sent.filter((m) => m.content.kind === "snapshot_png");
    expect(pics).toHaveLength(1);
    expect(pics[0].content).toMatchObject({ run_id: "r1", status: "finished", view: view.sync.view });
    const bytes = new Uint8Array(pics[0].buffers[0]);
    expect([...bytes.slice(0, 4)]).toEqual([0x89, 0x50, 0x4e, 0x47]);
    // the picture: the three charts, the run's line and how to bring the monitor back
    const calls = view.composePng().getContext("2d").calls;
    expect(calls.filter((k) => k.op === "drawImage")).toHaveLength(3);
    const texts = calls.filter((k) => k.op === "fillText").map((k) => k.args[0]);
    expect(texts[0]).toMatch(/^Run r1 · finished · epoch/);
    expect(texts.at(-1)).toBe('nnx-lab TrainingMonitor · TrainingMonitor.from_run("r1") shows it live');
    // the kernel has it: no second picture
    model.set("snapshot_of", "r1:finished");
    model.set("elapsed", 3);
    await settle(80);
    expect(model.sent.filter((m) => m.content.kind === "snapshot_png")).toHaveLength(1);
  });

  it("sends a picture a minute while the run goes on", async () => {
    const model = fakeModel({ run_id: "r2", status: "running" });
    await shown(model, { steps: [1, 50] });
    model.set("elapsed", 1);
    await settle(60);
    expect(model.sent.filter((m) => m.content.kind === "snapshot_png")).toHaveLength(0);
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.now() + 61_000);
      model.set("elapsed", 61);
    } finally {
      vi.useRealTimers();
    }
    await settle(60);
    const pics = model.sent.filter((m) => m.content.kind === "snapshot_png");
    expect(pics).toHaveLength(1);
    expect(pics[0].content.status).toBe("running");
  });

  it("notes when the history is decimated", async () => {
    const model = fakeModel();
    await shown(model, { steps: [1, 100], width: 32, total: 3200 });
    expect(q("note").hidden).toBe(false);
    expect(q("note").textContent).toMatch(/The 3,200 steps are shown in 100 buckets of up to 32 steps/);
    expect(q("loss-chart").dataset.width).toBe("32");
    // the lowest-to-highest band of each bucket is drawn (it is not, for single steps)
    expect(view.lossChart.plot.series[3].show).toBe(true);
    expect(view.lossChart.plot.series[4].show).toBe(true);
  });

  it("says when the kernel cannot be reached, and clears it once the history arrives", async () => {
    const model = fakeModel();
    const send = model.send;
    let fail = true;
    model.send = (...a) => {
      if (fail) throw new Error("Comm is closed");
      send(...a);
    };
    view = new MonitorView(model, el);
    expect(q("error").hidden).toBe(false);
    expect(q("error").textContent).toMatch(/cannot reach the kernel/);
    fail = false;
    view.sync.hello();
    const hello = model.lastHello();
    const s = snapshot(hello.view, hello.req, 1, [op("steps", 0, stepColumns(1, 5))]);
    model.custom(s.content, s.buffers);
    expect(q("error").hidden).toBe(true);
  });

  it("shows the error with its traceback under the widget", () => {
    const model = fakeModel();
    view = new MonitorView(model, el);
    model.set("error", "RuntimeError: boom\n\nTraceback (most recent call last):\n  ...");
    expect(q("error").hidden).toBe(false);
    expect(q("error").textContent).toContain("Traceback");
    model.set("error", "");
    expect(q("error").hidden).toBe(true);
  });

  it("removes every listener and its DOM on teardown", async () => {
    const model = fakeModel({ status: "running", can_stop: true });
    view = new MonitorView(model, el);
    expect(model.listenerCount()).toBeGreaterThan(0);
    const stop = q("stop");
    view.dispose();
    expect(model.listenerCount()).toBe(0);
    expect(el.querySelector(".nnx-monitor")).toBeNull();
    model.sent.length = 0;
    model.set("status", "finished");
    stop.click();
    await settle();
    expect(model.sent.filter((m) => m.content.kind !== "stop")).toEqual([]);
  });
});
