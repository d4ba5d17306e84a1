import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import widget, { render } from "../../js/monitor.js";
import { fakeModel, range, recordingContext, seriesMessage } from "./helpers.js";

let el;
let cleanup;

beforeEach(() => {
  el = document.createElement("div");
  document.body.append(el);
});

afterEach(() => {
  if (cleanup) cleanup();
  cleanup = undefined;
  el.remove();
  vi.restoreAllMocks();
});

const q = (id) => el.querySelector(`[data-testid="${id}"]`);

function epochRow(epoch, step, val = { loss: 1 / epoch, accuracy: 0.5 + epoch / 100 }) {
  const withCount = val && { ...val, samples: 64 }; // the engine adds sample counts
  return { epoch, step, lr: 0.01, seconds: 1.5, improved: epoch === 2, train: { loss: 2 / epoch, samples: 256 }, val: withCount };
}

describe("TrainingMonitor view", () => {
  it("exports an anywidget render function", () => {
    expect(typeof widget.render).toBe("function");
  });

  it("renders the DOM hooks and asks the kernel for the history", () => {
    const model = fakeModel({ run_id: "abc123", status: "running", can_stop: true });
    cleanup = render({ model, el });
    expect(el.querySelector(".nnx-monitor")).not.toBeNull();
    expect(q("status").textContent).toBe("running");
    expect(q("run-id").textContent).toBe("abc123");
    const stop = q("stop");
    expect(stop.tagName).toBe("BUTTON");
    expect(stop.getAttribute("type")).toBe("button");
    expect(stop.textContent).toBe("Stop");
    expect(stop.disabled).toBe(false);
    expect(q("loss-chart").getAttribute("data-points")).toBe("0");
    expect(q("error").hidden).toBe(true);
    expect(model.sent).toEqual([{ content: { kind: "hello", version: 1 }, buffers: undefined }]);
  });

  it("shows exactly the status word and follows status changes", () => {
    const model = fakeModel();
    cleanup = render({ model, el });
    for (const st of ["created", "running", "stopping", "stopped", "finished", "failed"]) {
      model.set("status", st);
      expect(q("status").textContent).toBe(st);
      expect(el.querySelector(".nnx-monitor").dataset.status).toBe(st);
    }
  });

  it("formats the counters", () => {
    const model = fakeModel({ status: "running" });
    cleanup = render({ model, el });
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
    model.set("status", "finished");
    expect(q("eta").textContent).toBe("–");
  });

  it("applies a reset and then increments", () => {
    const model = fakeModel();
    cleanup = render({ model, el });
    const r = seriesMessage("reset", 0, range(1, 101), range(1, 101).map((s) => 1 / s));
    model.custom(r.content, r.buffers);
    expect(q("loss-chart").dataset.points).toBe("100");
    const a = seriesMessage("append", 100, range(101, 151), range(101, 151).map((s) => 1 / s));
    model.custom(a.content, a.buffers);
    expect(q("loss-chart").dataset.points).toBe("150");
    expect(q("loss").textContent).toMatch(/^0\.006667/);
    // a reset replaces everything (a new run)
    const empty = seriesMessage("reset", 0, [], []);
    model.custom(empty.content, empty.buffers);
    expect(q("loss-chart").dataset.points).toBe("0");
    expect(q("loss").textContent).toBe("–");
  });

  it("never duplicates points when a hello reply overlaps an append", () => {
    const model = fakeModel();
    cleanup = render({ model, el });
    const a = seriesMessage("append", 0, range(1, 11), range(1, 11));
    model.custom(a.content, a.buffers);
    const b = seriesMessage("append", 5, range(6, 21), range(6, 21)); // 6..10 already held
    model.custom(b.content, b.buffers);
    expect(q("loss-chart").dataset.points).toBe("20");
  });

  it("asks for the whole history again after missing points", () => {
    const model = fakeModel();
    cleanup = render({ model, el });
    const reset = seriesMessage("reset", 0, range(1, 11), range(1, 11));
    model.custom(reset.content, reset.buffers);
    model.sent.length = 0;
    const later = seriesMessage("append", 20, range(21, 31), range(21, 31)); // 11..20 missed
    model.custom(later.content, later.buffers);
    expect(model.sent.map((m) => m.content.kind)).toEqual(["hello"]);
    expect(q("loss-chart").dataset.points).toBe("20");
  });

  it("sends a stop message when Stop is clicked, and disables the button", () => {
    const model = fakeModel({ status: "running", can_stop: true });
    cleanup = render({ model, el });
    model.sent.length = 0;
    q("stop").click();
    expect(model.sent).toEqual([{ content: { kind: "stop" }, buffers: undefined }]);
    expect(q("stop").disabled).toBe(true);
    model.set("status", "stopping");
    expect(q("stop").textContent).toBe("Stopping…");
    expect(q("stop").getAttribute("aria-busy")).toBe("true");
  });

  it("keeps Stop disabled when the run cannot be stopped from here", () => {
    const model = fakeModel({ status: "running", can_stop: false });
    cleanup = render({ model, el });
    expect(q("stop").disabled).toBe(true);
    expect(q("stop").title).toMatch(/monitor\.fit/);
    model.set("can_stop", true);
    expect(q("stop").disabled).toBe(false);
    model.set("status", "finished");
    expect(q("stop").disabled).toBe(true);
  });

  it("shows the error with its traceback under the widget", () => {
    const model = fakeModel();
    cleanup = render({ model, el });
    model.set("error", "RuntimeError: boom\n\nTraceback (most recent call last):\n  ...");
    expect(q("error").hidden).toBe(false);
    expect(q("error").textContent).toContain("RuntimeError: boom");
    expect(q("error").textContent).toContain("Traceback");
    model.set("error", "");
    expect(q("error").hidden).toBe(true);
  });

  it("fills the per-epoch table and the metric choice", () => {
    const model = fakeModel();
    cleanup = render({ model, el });
    const m = seriesMessage("append", 0, range(1, 21), range(1, 21), undefined, [epochRow(1, 10), epochRow(2, 20)]);
    model.custom(m.content, m.buffers);
    const rows = q("epochs-table").querySelectorAll("tbody tr");
    expect(rows.length).toBe(2);
    expect(rows[1].textContent).toContain("★");
    const heads = [...q("epochs-table").querySelectorAll("th")].map((th) => th.textContent);
    expect(heads).toEqual(["epoch", "step", "train loss", "val loss", "val accuracy", "lr", "time"]);
    const options = [...q("metric-select").options].map((o) => o.value);
    expect(options).toEqual(["loss", "accuracy"]);
    expect(q("metric-select").value).toBe("loss");
    // an overlapping append repeats no epoch row
    const again = seriesMessage("append", 20, [], [], undefined, [epochRow(2, 20), epochRow(3, 30)], 1);
    model.custom(again.content, again.buffers);
    expect(q("epochs-table").querySelectorAll("tbody tr").length).toBe(3);
  });

  it("handles runs without validation", () => {
    const model = fakeModel();
    cleanup = render({ model, el });
    const m = seriesMessage("append", 0, [1], [0.5], undefined, [epochRow(1, 1, null)]);
    model.custom(m.content, m.buffers);
    const heads = [...q("epochs-table").querySelectorAll("th")].map((th) => th.textContent);
    expect(heads).toEqual(["epoch", "step", "train loss", "lr", "time"]);
    expect([...q("metric-select").options].map((o) => o.value)).toEqual(["loss"]);
  });

  it("shows a clear error for a protocol mismatch instead of throwing", () => {
    const model = fakeModel();
    cleanup = render({ model, el });
    const m = seriesMessage("append", 0, [1], [0.5]);
    m.content.version = 99;
    model.custom(m.content, m.buffers);
    expect(q("error").hidden).toBe(false);
    expect(q("error").textContent).toMatch(/protocol 99/);
  });

  it("recomputes the smoothed loss when smoothing changes", () => {
    const model = fakeModel({ smoothing: 0 });
    cleanup = render({ model, el });
    const m = seriesMessage("append", 0, [1, 2], [1, 3]);
    model.custom(m.content, m.buffers);
    expect(q("loss").textContent).toBe("3 (EMA 3)");
    model.set("smoothing", 0.5);
    // debiased EMA with a=0.5 over [1, 3]: (0.5*0.5 + 0.5*3) / (1 - 0.25) = 2.333
    expect(q("loss").textContent).toBe("3 (EMA 2.333)");
  });

  it("removes every listener and its DOM on teardown", () => {
    const model = fakeModel({ status: "running", can_stop: true });
    const teardown = render({ model, el });
    expect(model.listenerCount()).toBeGreaterThan(0);
    const stop = q("stop");
    teardown();
    expect(model.listenerCount()).toBe(0);
    expect(el.querySelector(".nnx-monitor")).toBeNull();
    // events after teardown are harmless and send nothing
    model.sent.length = 0;
    model.set("status", "finished");
    const m = seriesMessage("append", 0, [1], [0.5]);
    model.custom(m.content, m.buffers);
    stop.click();
    expect(model.sent).toEqual([]);
  });

  it("draws 100,000 points with a bounded number of segments", () => {
    const ctx = recordingContext();
    vi.spyOn(HTMLCanvasElement.prototype, "getContext").mockReturnValue(ctx);
    const model = fakeModel();
    cleanup = render({ model, el });
    const n = 100_000;
    const steps = range(1, n + 1);
    const m = seriesMessage("reset", 0, steps, steps.map((s) => Math.exp(-s / 20000) + (s % 7) / 100));
    const t0 = performance.now();
    model.custom(m.content, m.buffers);
    const lossChart = q("loss-chart").querySelector("canvas");
    expect(lossChart).not.toBeNull();
    expect(q("loss-chart").dataset.points).toBe(String(n));
    // flush the animation frame
    return new Promise((resolve) => {
      setTimeout(() => {
        const elapsed = performance.now() - t0;
        // two series (raw + EMA) on the loss chart, one on the LR chart, 4 segments per column
        const width = 600; // happy-dom has no layout: the chart's fallback width
        expect(ctx.calls.lineTo).toBeLessThan(3 * 4 * width + 200);
        expect(ctx.calls.lineTo).toBeGreaterThan(100);
        expect(elapsed).toBeLessThan(2000);
        resolve();
      }, 50);
    });
  });
});
