import { describe, expect, it } from "vitest";
import { Chart, niceTicks } from "../../js/chart.js";
import { m4 } from "../../js/decimate.js";
import { fmtDuration, fmtInt, fmtRate, fmtStep, fmtValue } from "../../js/format.js";
import { decodeColumns, STEP_FIELDS, toTypedArray } from "../../js/protocol.js";
import { StepStore } from "../../js/series.js";
import { range, recordingContext, seriesMessage } from "./helpers.js";

describe("protocol", () => {
  it("lists the step fields in buffer order", () => {
    expect(STEP_FIELDS.map(([n]) => n)).toEqual(["step", "loss", "lr"]);
  });

  it("decodes buffers at unaligned offsets", () => {
    const { content, buffers } = seriesMessage("append", 0, [1, 2, 3], [0.5, 0.25, 0.125], [1e-3, 1e-3, 5e-4]);
    const cols = decodeColumns(content, buffers);
    expect([...cols.step]).toEqual([1, 2, 3]);
    expect([...cols.loss]).toEqual([0.5, 0.25, 0.125]);
    expect(cols.lr[2]).toBeCloseTo(5e-4, 8);
  });

  it("refuses an unknown dtype with a clear message", () => {
    expect(() => toTypedArray(new ArrayBuffer(4), "int8")).toThrow(/unknown buffer dtype int8/);
  });
});

describe("StepStore", () => {
  it("computes a debiased EMA incrementally, skipping NaN", () => {
    const s = new StepStore(0.5);
    const a = seriesMessage("append", 0, [1, 2], [2, NaN]);
    s.apply(a.content, a.buffers);
    const b = seriesMessage("append", 2, [3], [4]);
    s.apply(b.content, b.buffers);
    expect(s.ema[0]).toBeCloseTo(2);
    expect(s.ema[1]).toBeCloseTo(2); // NaN carries the previous value
    // raw = 0.5*(0.5*2) + 0.5*4 = 2.5, debias 1 - 0.25 = 0.75
    expect(s.ema[2]).toBeCloseTo(2.5 / 0.75);
    expect(s.lastLoss()).toBe(4);
  });

  it("grows past its initial capacity", () => {
    const s = new StepStore();
    for (let k = 0; k < 5; k++) {
      const m = seriesMessage("append", k * 1000, range(k * 1000, (k + 1) * 1000), range(0, 1000));
      s.apply(m.content, m.buffers);
    }
    expect(s.length).toBe(5000);
    expect(s.step[4999]).toBe(4999);
  });
});

describe("m4 decimation", () => {
  it("keeps first, min, max and last of each pixel column", () => {
    const n = 100_000;
    const x = Float64Array.from({ length: n }, (_, i) => i);
    const y = Float64Array.from({ length: n }, (_, i) => Math.sin(i / 100));
    y[50_000] = 10; // a spike must survive
    const d = m4(x, y, n, 0, n - 1, 400);
    expect(d.count).toBe(400);
    let maxSeen = -Infinity;
    for (let k = 0; k < d.count; k++) maxSeen = Math.max(maxSeen, d.max[k]);
    expect(maxSeen).toBe(10);
    expect(d.first[0]).toBe(y[0]);
    expect(d.last[d.count - 1]).toBe(y[n - 1]);
  });

  it("skips non-finite values and uses only the first n points", () => {
    const d = m4([0, 1, 2, 3], [NaN, 1, Infinity, 5], 3, 0, 3, 4);
    expect(d.count).toBe(1);
    expect(d.min[0]).toBe(1);
  });
});

describe("chart", () => {
  it("picks round ticks", () => {
    expect(niceTicks(0, 1, 5)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(1, 9, 4, true)).toEqual([2, 4, 6, 8]);
    expect(niceTicks(3, 3)).toEqual([3]);
  });

  it("switches to a log axis for a wide positive range when asked to", () => {
    const host = document.createElement("div");
    document.body.append(host);
    const chart = new Chart(host, { label: "lr", logY: "auto" });
    const ctx = recordingContext();
    chart.canvas.getContext = () => ctx;
    const x = Float64Array.from([1, 2, 3, 4]);
    chart.setData({ series: [{ x, y: Float64Array.from([1e-1, 1e-2, 1e-3, 1e-4]), n: 4, color: "red" }] });
    chart.draw();
    expect(chart.stats.logY).toBe(true);
    expect(ctx.calls.fillText).toContain("1e-2");
    chart.setData({ series: [{ x, y: Float64Array.from([1, 2, 3, 4]), n: 4, color: "red" }] });
    chart.draw();
    expect(chart.stats.logY).toBe(false);
    chart.destroy();
    expect(host.querySelector("canvas")).toBeNull();
  });

  it("says there is no data yet", () => {
    const host = document.createElement("div");
    const chart = new Chart(host, { label: "empty" });
    const ctx = recordingContext();
    chart.canvas.getContext = () => ctx;
    chart.draw();
    expect(ctx.calls.fillText).toEqual(["no data yet"]);
    chart.destroy();
  });
});

describe("format", () => {
  it("formats values, counts, rates and durations", () => {
    expect(fmtValue(0.123456)).toBe("0.1235");
    expect(fmtValue(1e-5)).toBe("1.00e-5");
    expect(fmtValue(null)).toBe("–");
    expect(fmtInt(1234567)).toBe("1,234,567");
    expect(fmtRate(12.34)).toBe("12.3");
    expect(fmtDuration(5.25)).toBe("5.3s");
    expect(fmtDuration(3725)).toBe("1h 02m");
    expect(fmtDuration(undefined)).toBe("–");
    expect(fmtStep(950)).toBe("950");
    expect(fmtStep(2500)).toBe("2,500");
    expect(fmtStep(20000)).toBe("20k");
    expect(fmtStep(100000)).toBe("100k");
    expect(fmtStep(1500000)).toBe("1.5M");
  });
});
