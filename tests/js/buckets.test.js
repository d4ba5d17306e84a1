// The browser-side bucket series (js/shared/buckets.js): bounded, decimated, the same
// merge rules as the kernel's, and ops a view's ColumnStore applies.
import { describe, expect, it } from "vitest";
import { BucketSeries, Reduce } from "../../js/shared/buckets.js";
import { ColumnStore } from "../../js/shared/store.js";

const steps = (capacity) =>
  new BucketSeries(
    [
      { name: "first", dtype: "int32", reduce: Reduce.FIRST },
      { name: "step", dtype: "int32", reduce: Reduce.LAST },
      { name: "loss", dtype: "float32", reduce: Reduce.MEAN },
      { name: "n", dtype: "int32", reduce: Reduce.SUM },
      { name: "bad", dtype: "int32", reduce: Reduce.SUM },
    ],
    { capacity, bad: "bad" },
  );

const range = (a, b) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

/** Apply every change the series reports to a store, as a view would. */
function sync(series, store) {
  const change = series.takeChange();
  if (!change) return false;
  const o = series.op("steps", change.at, change.count, 0);
  expect(store.apply(o.op, o.buffers)).toBe(true);
  return true;
}

describe("BucketSeries", () => {
  it("keeps a flag column (Reduce.MAX) beside value columns, merged as any of its points", () => {
    // a flag's tag ("max") once matched the :max partners' and the flag stayed 0
    const s = new BucketSeries(
      [
        { name: "first", dtype: "int32", reduce: Reduce.FIRST },
        { name: "seconds", dtype: "float32", reduce: Reduce.MEAN },
        { name: "improved", dtype: "int32", reduce: Reduce.MAX },
        { name: "n", dtype: "int32", reduce: Reduce.SUM },
      ],
      { capacity: 4 },
    );
    s.extend({ first: [1, 2, 3, 4], seconds: [1, 1, 1, 1], improved: [1, 0, 0, 1] });
    expect(Array.from(s.column("improved"))).toEqual([1, 0, 0, 1]);
    s.extend({ first: [5], seconds: [1], improved: [0] }); // merges pairs
    expect(Array.from(s.column("improved"))).toEqual([1, 1, 0]);
    expect(Array.from(s.column("seconds:max"))).toEqual([1, 1, 1]);
  });

  it("holds one row per point until full, then merges pairs and doubles the width", () => {
    const s = steps(8);
    const xs = range(1, 8);
    s.extend({ first: xs, step: xs, loss: xs.map((x) => x * 10) });
    expect([s.length, s.width, s.total]).toEqual([8, 1, 8]);
    s.extend({ first: [9], step: [9], loss: [90] });
    expect(s.width).toBe(2);
    expect(s.length).toBe(5); // 4 pairs, then the new point opens a bucket
    expect(Array.from(s.column("first"))).toEqual([1, 3, 5, 7, 9]);
    expect(Array.from(s.column("step"))).toEqual([2, 4, 6, 8, 9]);
    expect(Array.from(s.column("loss"))).toEqual([15, 35, 55, 75, 90]);
    expect(Array.from(s.column("n"))).toEqual([2, 2, 2, 2, 1]);
    s.extend({ first: [10], step: [10], loss: [100] });
    expect(Array.from(s.column("loss"))).toEqual([15, 35, 55, 75, 95]); // the open bucket fills
    expect(s.total).toBe(10);
  });

  it("keeps a one-step spike in the min/max columns through any merging", () => {
    const s = steps(16);
    const n = 5000;
    const xs = range(1, n);
    s.extend({ first: xs, step: xs, loss: xs.map((x) => (x === 2345 ? 1000 : 1)) });
    expect(s.length).toBeLessThanOrEqual(16);
    expect(s.width).toBeGreaterThan(256);
    expect(Math.max(...s.column("loss:max"))).toBe(1000);
    expect(Math.min(...s.column("loss:min"))).toBe(1);
    const sum = Array.from(s.column("n")).reduce((a, b) => a + b, 0);
    expect(sum).toBe(n); // every point is in exactly one bucket
  });

  it("leaves non-finite values out of means, minima and maxima and counts them", () => {
    const s = steps(4);
    s.extend({ first: [1, 2, 3, 4, 5, 6], step: [1, 2, 3, 4, 5, 6], loss: [1, NaN, 3, Infinity, NaN, NaN] });
    // widths: 1,2 | 3,4 | 5,6
    expect(Array.from(s.column("loss"))).toEqual([1, 3, NaN]);
    expect(Array.from(s.column("loss:max"))).toEqual([1, 3, NaN]);
    expect(Array.from(s.column("bad"))).toEqual([1, 1, 2]);
  });

  it("reports changes as splices a view's store applies, compactions from row 0", () => {
    const s = steps(8);
    const store = new ColumnStore();
    s.extend({ first: [1, 2, 3], step: [1, 2, 3], loss: [3, 2, 1] });
    expect(sync(s, store)).toBe(true);
    expect(sync(s, store)).toBe(false); // nothing new
    s.extend({ first: [4], step: [4], loss: [0.5] });
    const change = s.takeChange();
    expect(change).toEqual({ at: 3, count: 1 });
    const o = s.op("steps", change.at, change.count, 0);
    expect(o.op.fields).toEqual(["first", "step", "loss", "loss:min", "loss:max", "n", "bad"]);
    expect(o.op.dtypes).toEqual(["int32", "int32", "float32", "float32", "float32", "int32", "int32"]);
    expect(store.apply(o.op, o.buffers)).toBe(true);
    const xs = range(5, 20);
    s.extend({ first: xs, step: xs, loss: xs.map(() => 1) });
    const c2 = s.takeChange();
    expect(c2.at).toBe(0); // merged from the start
    const o2 = s.op("steps", c2.at, c2.count, 0);
    expect(store.apply(o2.op, o2.buffers)).toBe(true);
    expect(Array.from(store.column("step"))).toEqual(Array.from(s.column("step")));
    expect(store.width).toBe(s.width);
    expect(store.total).toBe(20);
  });

  it("resends every row when a value column is added", () => {
    const s = new BucketSeries(
      [
        { name: "epoch", dtype: "int32", reduce: Reduce.LAST },
        { name: "n", dtype: "int32", reduce: Reduce.SUM },
      ],
      { capacity: 8 },
    );
    s.extend({ epoch: [1, 2] });
    s.takeChange();
    s.addValue("val.loss");
    s.extend({ epoch: [3], "val.loss": [0.3] });
    expect(s.takeChange()).toEqual({ at: 0, count: 3 });
    expect(Array.from(s.column("val.loss"))).toEqual([NaN, NaN, Float64Array.of(0.3)[0]]);
  });

  it("refuses a capacity it cannot halve", () => {
    expect(() => steps(5)).toThrow(/even number/);
  });
});
