import { afterEach, describe, expect, it } from "vitest";
import { Chart } from "../../js/shared/chart.js";
import { thinMarks } from "../../js/shared/chart_overlay.js";
import { toPlotValues } from "../../js/shared/plot_values.js";
import { settle } from "./helpers.js";

let charts = [];
function chart(opts = {}) {
  const host = document.createElement("div");
  document.body.append(host);
  const c = new Chart(host, {
    title: "test chart",
    xLabel: "step",
    yLabel: "loss",
    series: [{ label: "a", color: "#ff0000" }],
    ...opts,
  });
  charts.push(c);
  return c;
}

afterEach(() => {
  for (const c of charts) {
    c.destroy();
    c.host.remove();
  }
  charts = [];
});

const F = (a) => Float64Array.from(a);

/** Path2D ops of the stroke that drew series `i` (1-based, as uPlot counts). */
function strokeOps(c, i) {
  const paths = c.plot.series[i]._paths;
  return paths && paths.stroke ? paths.stroke.ops : [];
}

describe("toPlotValues", () => {
  it("turns non-finite values into gaps, and non-positive ones too on a log scale", () => {
    expect(toPlotValues(F([1, NaN, Infinity, -Infinity, 0, -2, 3]))).toEqual({
      data: [1, null, null, null, 0, -2, 3],
      gaps: 3,
      dropped: 0,
    });
    expect(toPlotValues(F([1, NaN, 0, -2, 3]), true)).toEqual({ data: [1, null, null, null, 3], gaps: 1, dropped: 2 });
  });
});

describe("thinMarks", () => {
  it("keeps every mark that has room, and thins dense ones to the minimum gap", () => {
    expect(thinMarks([0, 10, 20, 30], 8)).toEqual([0, 1, 2, 3]);
    const dense = Array.from({ length: 1000 }, (_, i) => i * 0.5); // 0.5 px apart
    const kept = thinMarks(dense, 8);
    expect(kept.length).toBeGreaterThan(50);
    expect(kept.length).toBeLessThanOrEqual(dense[999] / 8 + 1);
    for (let k = 1; k < kept.length; k++) expect(dense[kept[k]] - dense[kept[k - 1]]).toBeGreaterThanOrEqual(8);
  });
});

describe("Chart (uPlot)", () => {
  it("passes the data to uPlot with gaps where values are non-finite, and draws no line across them", async () => {
    const c = chart();
    c.setData(F([1, 2, 3, 4, 5, 6]), [F([1, 2, NaN, NaN, 5, 6])]);
    await settle();
    expect(c.plot.data[1]).toEqual([1, 2, null, null, 5, 6]);
    expect(c.info.gaps).toBe(2);
    // uPlot clips the gap out of the stroke: one clipped x range between points 2 and 5
    const gaps = c.plot.series[1]._paths.gaps;
    expect(gaps).toHaveLength(1);
    const [from, to] = gaps[0];
    const px = (x) => Math.round(c.plot.valToPos(x, "x", true));
    expect(from).toBeGreaterThanOrEqual(px(2) - 1);
    expect(to).toBeLessThanOrEqual(px(5) + 1);
    expect(c.plot.series[1]._paths.clip).not.toBeNull();
  });

  it("a finite series has no gap clip", async () => {
    const c = chart();
    c.setData(F([1, 2, 3]), [F([3, 2, 1])]);
    await settle();
    expect(c.plot.series[1]._paths.gaps ?? []).toEqual([]);
    expect(strokeOps(c, 1).filter(([o]) => o === "lineTo").length).toBe(3);
  });

  it("builds the y range from the data it shows, maxima included", async () => {
    const c = chart();
    c.setData(F([1, 2, 3, 4]), [F([0.5, 9, 0.4, 0.3])]);
    await settle();
    const { y } = c.ranges();
    expect(y[0]).toBeLessThanOrEqual(0.3);
    expect(y[1]).toBeGreaterThanOrEqual(9);
  });

  it("switches the y axis to log and back; values <= 0 leave the log axis", async () => {
    const c = chart();
    c.setData(F([1, 2, 3, 4]), [F([1e-4, 1e-2, 1, 0])]);
    await settle();
    expect(c.ranges().logY).toBe(false);
    expect(c.plot.data[1]).toEqual([1e-4, 1e-2, 1, 0]);
    c.setLogY(true);
    await settle();
    expect(c.ranges().logY).toBe(true);
    expect(c.plot.scales.y.distr).toBe(3);
    expect(c.plot.data[1]).toEqual([1e-4, 1e-2, 1, null]);
    expect(c.info.dropped).toBe(1);
    const { y } = c.ranges();
    expect(y[0]).toBeLessThanOrEqual(1e-4);
    expect(y[0]).toBeGreaterThan(0);
    // equal ratios are equal distances on a log axis
    const pos = (v) => c.plot.valToPos(v, "y");
    expect(pos(1e-4) - pos(1e-2)).toBeCloseTo(pos(1e-2) - pos(1), 6);
    c.setLogY(false);
    await settle();
    expect(c.ranges().logY).toBe(false);
  });

  it("has a log x scale for sweeps", async () => {
    const c = chart({ logX: true, xLabel: "learning rate" });
    c.setData(F([1e-5, 1e-4, 1e-3, 1e-2]), [F([3, 2, 1, 5])]);
    await settle();
    expect(c.ranges().logX).toBe(true);
    expect(c.plot.axes[0].label).toBe("learning rate");
  });

  it("carries axis titles", () => {
    const c = chart({ xLabel: "epoch", yLabel: "accuracy" });
    expect(c.plot.axes[0].label).toBe("epoch");
    expect(c.plot.axes[1].label).toBe("accuracy");
  });

  it("zooms to a range, follows the newest window, and resets the zoom only", async () => {
    const zooms = [];
    const c = chart({ onZoom: (r) => zooms.push(r) });
    const x = F(Array.from({ length: 1000 }, (_, i) => i + 1));
    c.setData(x, [F(Array.from(x, (v) => 1 / v))]);
    await settle();
    c.setXRange(100, 200);
    await settle();
    expect(c.ranges().x).toEqual([100, 200]);
    // new data keeps a zoom
    const x2 = F(Array.from({ length: 1100 }, (_, i) => i + 1));
    c.setData(x2, [F(Array.from(x2, (v) => 1 / v))]);
    await settle();
    expect(c.ranges().x).toEqual([100, 200]);
    c.setXWindow(50);
    await settle();
    expect(c.ranges().x).toEqual([1050, 1100]);
    const x3 = F(Array.from({ length: 1200 }, (_, i) => i + 1));
    c.setData(x3, [F(Array.from(x3, (v) => 1 / v))]);
    await settle();
    expect(c.ranges().x).toEqual([1150, 1200]); // the window follows
    // a zoom lies over the window; resetting it goes back to the window, not to all
    c.setXRange(1160, 1170);
    await settle();
    expect(c.ranges().x).toEqual([1160, 1170]);
    c.resetZoom();
    await settle();
    expect(c.ranges().x).toEqual([1150, 1200]);
    expect(zooms.at(-1)).toBeNull();
    expect(zooms[0]).toEqual([100, 200]);
    c.setXWindow(null);
    await settle();
    expect(c.ranges().x).toEqual([1, 1200]);
  });

  it("zooms to the x range a drag selects, and shift-drag pans", async () => {
    const zooms = [];
    const c = chart({ onZoom: (r) => zooms.push(r) });
    const x = F(Array.from({ length: 100 }, (_, i) => i + 1));
    c.setData(x, [F(Array.from(x, (v) => v * v))]);
    await settle();
    const over = c.plot.over;
    // movementX: uPlot ignores a motionless mousemove during a drag
    const mouse = (type, px, shiftKey = false) =>
      over.dispatchEvent(new MouseEvent(type, { clientX: px, clientY: 20, movementX: 1, bubbles: true, shiftKey }));
    const a = c.plot.valToPos(20, "x");
    const b = c.plot.valToPos(60, "x");
    over.dispatchEvent(new MouseEvent("mousemove", { clientX: a, clientY: 20, bubbles: true }));
    mouse("mousedown", a);
    mouse("mousemove", b);
    mouse("mouseup", b);
    await settle();
    expect(zooms).toHaveLength(1);
    expect(zooms[0][0]).toBeCloseTo(20, 0);
    expect(zooms[0][1]).toBeCloseTo(60, 0);
    expect(c.ranges().x[0]).toBeCloseTo(20, 0);
    const [lo, hi] = c.ranges().x;
    // pan: shift-drag half the plot's width to the left shows later steps
    const width = c.plot.over.clientWidth || c.plot.bbox.width;
    mouse("mousedown", 200, true);
    mouse("mousemove", 200 - width / 2, true);
    mouse("mouseup", 200 - width / 2, true);
    await settle();
    expect(c.ranges().x[0]).toBeCloseTo(lo + (hi - lo) / 2, 0);
    expect(c.ranges().x[1] - c.ranges().x[0]).toBeCloseTo(hi - lo, 6);
  });

  it("fills a band between two series (min/max of decimated buckets)", async () => {
    const c = chart({
      series: [
        { label: "mean", color: "#000" },
        { label: "max", color: "#000", hidden: true },
        { label: "min", color: "#000", hidden: true },
      ],
      bands: [{ upper: 1, lower: 2, fill: "rgba(0,0,0,0.2)" }],
    });
    c.setData(F([1, 2, 3]), [F([1, 2, 3]), F([2, 4, 5]), F([0.5, 1, 2])]);
    await settle();
    expect(c.plot.bands).toHaveLength(1);
    expect(c.plot.bands[0].series).toEqual([2, 3]);
    expect(c.plot.series[2].width).toBe(0); // the edges draw no line
    const fills = c.plot.ctx.calls.filter((k) => k.op === "fill" && k.fillStyle === "rgba(0,0,0,0.2)");
    expect(fills.length).toBeGreaterThan(0);
  });

  it("draws bars", async () => {
    const c = chart({ series: [{ label: "count", color: "#0000ff", bars: true }] });
    c.setData(F([0.1, 0.2, 0.3]), [F([5, 9, 2])]);
    await settle();
    const ops = c.plot.series[1]._paths.fill.ops;
    expect(ops.filter(([o]) => o === "rect").length).toBe(3);
  });

  it("reports the hovered index and picks a point on click (not after a drag)", async () => {
    const hovered = [];
    const picks = [];
    const c = chart({ onCursor: (i) => hovered.push(i), onPick: (p) => picks.push(p) });
    c.setData(F([10, 20, 30]), [F([1, 2, 3])]);
    await settle();
    const over = c.plot.over;
    const at = c.plot.valToPos(20, "x"); // the over layer sits at 0,0 in happy-dom
    const mouse = (type, x) => over.dispatchEvent(new MouseEvent(type, { clientX: x, clientY: 20, bubbles: true }));
    mouse("mousemove", at);
    expect(hovered.at(-1)).toBe(1);
    mouse("mousedown", at);
    mouse("mouseup", at);
    mouse("click", at);
    expect(picks).toEqual([{ idx: 1, x: 20, values: [2] }]);
    // a drag (zoom) ends with a click event too: that is no pick
    mouse("mousedown", at);
    mouse("mousemove", at + 60);
    mouse("mouseup", at + 60);
    mouse("click", at + 60);
    expect(picks).toHaveLength(1);
  });

  it("thins dense epoch marks and draws labelled markers", async () => {
    const c = chart();
    const x = F(Array.from({ length: 20000 }, (_, i) => i + 1));
    c.setData(x, [F(Array.from(x, () => 1))]);
    c.setMarks(Array.from({ length: 2000 }, (_, i) => (i + 1) * 10)); // 2,000 epochs on ~500 px
    c.setMarkers([{ x: 15000, label: "loss non-finite since step 15,000", color: "#d32f2f" }]);
    await settle();
    expect(c.info.marksDrawn).toBeGreaterThan(10);
    expect(c.info.marksDrawn).toBeLessThanOrEqual(c.plot.bbox.width / 8 + 1);
    const texts = c.plot.ctx.calls.filter((k) => k.op === "fillText").map((k) => k.args[0]);
    expect(texts).toContain("loss non-finite since step 15,000");
    c.setMarks([5000, 15000]); // far apart: both drawn
    await settle();
    expect(c.info.marksDrawn).toBe(2);
  });

  it("removes its DOM on destroy", () => {
    const c = chart();
    expect(c.host.querySelector(".uplot")).not.toBeNull();
    c.destroy();
    expect(c.host.querySelector(".uplot")).toBeNull();
  });
});

describe("Chart fixed domains and dots (the explorers)", () => {
  it("keeps a fixed x and y domain whatever the data, and follows the data again without one", async () => {
    const c = chart({ xDomain: [0, 1], yDomain: [0, 1] });
    c.setData(F([0.2, 0.4, 0.6]), [F([0.1, 0.5, 0.3])]);
    await settle();
    expect(c.ranges().x).toEqual([0, 1]);
    expect(c.ranges().y).toEqual([0, 1]);
    c.setYDomain([0, 0.25]);
    await settle();
    expect(c.ranges().y).toEqual([0, 0.25]);
    c.setYDomain(null);
    await settle();
    const [lo, hi] = c.ranges().y;
    expect(lo).toBeLessThanOrEqual(0.1);
    expect(hi).toBeGreaterThanOrEqual(0.5);
    expect(hi).toBeLessThan(1); // from the data now, not the old domain
  });

  it("draws dots at data coordinates on top of the series, skipping those out of range", async () => {
    const c = chart({ xDomain: [0, 1], yDomain: [0, 1] });
    c.setData(F([0, 0.5, 1]), [F([0.1, 0.2, 0.3])]);
    const ctx = c.plot.ctx;
    ctx.calls.length = 0;
    c.setDots([
      { x: 0.5, y: 0.2, color: "#00ff00" },
      { x: 2, y: 0.2, color: "#0000ff" },
      { x: NaN, y: 0.2, color: "#0000ff" },
    ]);
    await settle();
    expect(c.info.dotsDrawn).toBe(1);
    const arcs = ctx.calls.filter((k) => k.op === "arc");
    expect(arcs).toHaveLength(1);
    const [x, y] = arcs[0].args;
    expect(x).toBeCloseTo(c.plot.valToPos(0.5, "x", true), 6);
    expect(y).toBeCloseTo(c.plot.valToPos(0.2, "y", true), 6);
    const fill = ctx.calls.find((k) => k.op === "fill" && k.fillStyle === "#00ff00");
    expect(fill).toBeDefined();
  });
});

describe("Chart and a theme switch", () => {
  /** Make the host `w` px wide as the chart reads it (happy-dom lays nothing out). */
  const widthOf = (c, w) => Object.defineProperty(c.host, "clientWidth", { configurable: true, get: () => w });

  it("rebuilds with the new colours once the page is laid out again, at its container's width", async () => {
    const c = chart({ series: [{ label: "a", color: "--test-line" }] });
    widthOf(c, 800);
    c.host.style.setProperty("--test-line", "#111111");
    c.refreshTheme();
    c.setData(F([1, 2, 3]), [F([3, 2, 1])]);
    await settle();
    expect(c.plot.width).toBe(800);
    const before = c.plot;
    // JupyterLab's switch: the attributes change, the shell is hidden (0 px) in the same
    // task and shown again at the next frame
    widthOf(c, 0);
    c.host.style.setProperty("--test-line", "#eeeeee");
    document.body.dataset.jpThemeLight = "false";
    document.body.dataset.jpThemeName = "JupyterLab Dark";
    await Promise.resolve();
    requestAnimationFrame(() => widthOf(c, 640));
    await settle(80);
    expect(c.plot).not.toBe(before); // rebuilt: new fonts and colours
    expect(c.plot.width).toBe(640); // the container's, not a made-up 600 nor the old 800
    expect(c.plot.series[1].stroke()).toBe("#eeeeee");
    expect(c.plot.data[0]).toEqual([1, 2, 3]); // the data stays
    delete document.body.dataset.jpThemeLight;
    delete document.body.dataset.jpThemeName;
  });

  it("keeps its width while its host has none (a hidden tab), and stops listening once destroyed", async () => {
    const c = chart();
    widthOf(c, 500);
    c.refreshTheme();
    widthOf(c, 0);
    c.refreshTheme();
    expect(c.plot.width).toBe(500);
    c.destroy();
    charts = charts.filter((x) => x !== c);
    document.body.dataset.jpThemeName = "JupyterLab Light";
    await settle(80);
    expect(c.plot).toBeNull();
    delete document.body.dataset.jpThemeName;
    c.host.remove();
  });
});
