import { describe, expect, it } from "vitest";
import { smoothLoss } from "../../js/monitor/smoothing.js";

const F = (a) => Float64Array.from(a);

describe("smoothLoss", () => {
  it("is the debiased EMA on one row per step", () => {
    const a = 0.6;
    const y = [4, 2, 8, 1, 3];
    const out = smoothLoss(F(y), null, a);
    let raw = 0;
    y.forEach((v, i) => {
      raw = a * raw + (1 - a) * v;
      expect(out[i]).toBeCloseTo(raw / (1 - a ** (i + 1)), 12);
    });
  });

  it("starts at the first value and is the identity with factor 0", () => {
    expect(Array.from(smoothLoss(F([5, 1, 2]), null, 0))).toEqual([5, 1, 2]);
    expect(smoothLoss(F([7, 1]), null, 0.99)[0]).toBe(7);
  });

  it("has a gap at a non-finite row and keeps the average for the rows after it", () => {
    const out = smoothLoss(F([1, NaN, Infinity, 1]), null, 0.5);
    expect(out[0]).toBe(1);
    expect(Number.isNaN(out[1])).toBe(true);
    expect(Number.isNaN(out[2])).toBe(true);
    expect(out[3]).toBeCloseTo(1, 12);
  });

  it("decays once per step a bucket spans, so decimation keeps the weight of the past", () => {
    // 8 steps at loss 2 then 8 steps at loss 1, as 16 rows or as 2 buckets of 8 steps
    const a = 0.9;
    const dense = smoothLoss(F([...Array(8).fill(2), ...Array(8).fill(1)]), null, a);
    const buckets = smoothLoss(F([2, 1]), F([8, 8]), a);
    expect(buckets[0]).toBeCloseTo(dense[7], 12);
    expect(buckets[1]).toBeCloseTo(dense[15], 12);
    // without the decay per step, a bucket would count as one step and the old value would linger
    expect(buckets[1]).toBeLessThan(1.5);
  });
});
