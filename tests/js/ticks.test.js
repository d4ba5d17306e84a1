import { afterEach, describe, expect, it } from "vitest";
import { Chart } from "../../js/shared/chart.js";
import { INTEGER_INCRS, logRange, stepTicks, valueTicks } from "../../js/shared/ticks.js";
import { settle } from "./helpers.js";

const F = (a) => Float64Array.from(a);
let charts = [];
afterEach(() => {
  for (const c of charts) {
    c.destroy();
    c.host.remove();
  }
  charts = [];
});

/** A chart `width` px wide (happy-dom lays nothing out) holding these points. */
async function drawn(opts, x, ys, width = 600) {
  const host = document.createElement("div");
  Object.defineProperty(host, "clientWidth", { get: () => width });
  document.body.append(host);
  const c = new Chart(host, { title: "t", xLabel: "step", yLabel: "loss", series: [{ label: "a", color: "#f00" }], ...opts });
  charts.push(c);
  c.setData(F(x), ys.map(F));
  await settle();
  return c;
}

/** The labels an axis drew (uPlot keeps them on the axis). */
const labelsOf = (c, i) => c.plot.axes[i]._values.filter((t) => t !== "" && t !== null);
const splitsOf = (c, i) => c.plot.axes[i]._splits;

describe("step axis ticks", () => {
  it("read in one unit for the whole axis, chosen by its largest tick", () => {
    expect(stepTicks([9000, 9500, 10000, 10500])).toEqual(["9k", "9.5k", "10k", "10.5k"]);
    expect(stepTicks([0, 2000, 4000, 6000, 8000])).toEqual(["0", "2,000", "4,000", "6,000", "8,000"]);
    expect(stepTicks([0, 500000, 1000000, 1500000])).toEqual(["0", "0.5M", "1M", "1.5M"]);
    expect(stepTicks([10010, 10020, 10030])).toEqual(["10.01k", "10.02k", "10.03k"]); // told apart
    expect(stepTicks([1, null, 3])).toEqual(["1", "", "3"]);
  });

  it("are whole numbers on a count axis, however few steps there are", async () => {
    expect(INTEGER_INCRS.slice(0, 6)).toEqual([1, 2, 5, 10, 20, 50]);
    // a run that failed at step 3: uPlot alone would put ticks at 1.5 and 2.5
    const counted = await drawn({ xInteger: true, xTicks: stepTicks }, [1, 2, 3], [[3, 2, 1]], 900);
    expect(splitsOf(counted, 0).length).toBeGreaterThan(1);
    for (const v of splitsOf(counted, 0)) expect(Number.isInteger(v), String(v)).toBe(true);
    expect(labelsOf(counted, 0)).toEqual(["1", "2", "3"]);
    const free = await drawn({ xTicks: stepTicks }, [1, 2, 3], [[3, 2, 1]], 900);
    expect(splitsOf(free, 0).some((v) => !Number.isInteger(v))).toBe(true); // what the option prevents
  });

  it("never mix 9,000 and 10k on one drawn axis", async () => {
    const x = Array.from({ length: 120 }, (_, i) => 8000 + i * 25);
    const c = await drawn({ xInteger: true, xTicks: stepTicks }, x, [x.map(() => 1)]);
    const labels = labelsOf(c, 0);
    expect(labels.length).toBeGreaterThan(2);
    for (const t of labels) expect(t).toMatch(/^\d+(\.\d+)?k$/);
  });
});

describe("value axis ticks", () => {
  it("use exponent form for every tick once one needs it, else the same decimals", () => {
    expect(valueTicks([0.0005, 0.001, 0.0015])).toEqual(["5e-4", "1e-3", "1.5e-3"]);
    expect(valueTicks([0.1, 0.15, 0.2, 0.25])).toEqual(["0.10", "0.15", "0.20", "0.25"]);
    expect(valueTicks([0, 0.5, 1, 1.5])).toEqual(["0.0", "0.5", "1.0", "1.5"]);
    expect(valueTicks([0.07, 0.1, 0.2, 1, 2], { log: true })).toEqual(["0.07", "0.1", "0.2", "1", "2"]);
    expect(valueTicks([1e-7, 1e-5, 1e-3, null], { log: true })).toEqual(["1e-7", "1e-5", "1e-3", ""]);
  });
});

describe("log axis domain", () => {
  it("fits the data rounded to one digit, not the decades around it", () => {
    expect(logRange(0.0734, 2.3)).toEqual([0.07, 3]);
    expect(logRange(0.12, 0.9)).toEqual([0.1, 0.9]);
    expect(logRange(1.2, 1.9)).toEqual([1, 2]);
    expect(logRange(3, 3)).toEqual([1.5, 6]);
  });

  it("is what a chart's log axis spans", async () => {
    const c = await drawn({ logY: true, yTicks: valueTicks }, [1, 2, 3, 4], [[2.3, 1.1, 0.5, 0.12]]);
    const [lo, hi] = c.ranges().y;
    expect(lo).toBeCloseTo(0.1, 9);
    expect(hi).toBeCloseTo(3, 9); // whole decades would give 10: most of a decade empty
    for (const t of labelsOf(c, 1)) expect(t).not.toMatch(/e/);
  });
});
