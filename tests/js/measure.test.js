import { describe, expect, it } from "vitest";
import { binOf, measure, prepare } from "../../js/calibration/measure.js";

describe("measure.js (browser mode's arithmetic)", () => {
  it("gives NLL, Brier, ECE and the bins of a hand-computed example", () => {
    // two rows, two classes; shifted logits: row 0 = [0, -ln 3] (p = 0.75, 0.25), right;
    // row 1 = [-ln(0.85 / 0.15), 0] (p = 0.15, 0.85), target 0: wrong
    const d = Float32Array.from([0, -Math.log(3), -Math.log(0.85 / 0.15), 0]);
    const p = prepare(d, Int32Array.from([0, 0]));
    expect(Array.from(p.correct)).toEqual([1, 0]);
    expect(p.accuracy).toBe(0.5);
    const m = measure(p, 10, 1);
    const p0 = 1 / (1 + Math.fround(1 / 3) ** 1); // float32 logits: tiny rounding
    expect(m.nll).toBeCloseTo((-Math.log(0.75) - Math.log(0.15)) / 2, 6);
    // Brier: (0.25^2 + 0.25^2) and (0.85^2 + 0.85^2)
    expect(m.brier).toBeCloseTo((0.125 + 1.445) / 2, 6);
    // bins: 0.75 in (0.7, 0.8] (bin 7), 0.85 in (0.8, 0.9] (bin 8): |0.75 - 1| + |0.85 - 0|
    expect(Array.from(m.count)).toEqual([0, 0, 0, 0, 0, 0, 0, 1, 1, 0]);
    expect(m.ece).toBeCloseTo((0.25 + 0.85) / 2, 6);
    expect(m.confidence[7]).toBeCloseTo(p0, 6);
  });

  it("puts a confidence on a bin edge in the lower bin, and T spreads the probabilities", () => {
    // p = 0.5 exactly: the edge of (0.4, 0.5] and (0.5, 0.6] with 10 bins
    const p = prepare(Float32Array.from([0, 0]), Int32Array.from([1]));
    expect(Array.from(measure(p, 10, 1).count)).toEqual([0, 0, 0, 0, 1, 0, 0, 0, 0, 0]);
    expect(p.correct[0]).toBe(0); // a tie goes to the first class, as argmax
    const sharp = prepare(Float32Array.from([0, -4]), Int32Array.from([0]));
    const hot = measure(sharp, 10, 4);
    const cold = measure(sharp, 10, 0.5);
    expect(hot.nll).toBeGreaterThan(cold.nll);
    expect(hot.count[7]).toBe(1); // 1 / (1 + e^-1) = 0.731
    expect(cold.count[9]).toBe(1);
  });

  it("bins a confidence by the edges below it, even where conf * bins rounds onto an edge", () => {
    const edges = (bins) => Float64Array.from({ length: bins - 1 }, (_, i) => (i + 1) / bins);
    const up = (x) => {
      const b = new Float64Array([x]);
      new BigInt64Array(b.buffer)[0] += 1n; // the next double above x
      return b[0];
    };
    expect(binOf(0.7, 10, edges(10))).toBe(6); // on the edge: the lower bin, (0.6, 0.7]
    expect(binOf(up(0.7), 10, edges(10))).toBe(7);
    // just above 11/15, yet times 15 it rounds to exactly 11: ceil alone says bin 10
    const above = up(11 / 15);
    expect(above * 15).toBe(11);
    expect(binOf(above, 15, edges(15))).toBe(11);
    // on the edge 7/25 = 0.28, yet times 25 it rounds above 7: ceil alone says bin 7
    expect(0.28 * 25).toBeGreaterThan(7);
    expect(binOf(7 / 25, 25, edges(25))).toBe(6);
    expect(binOf(0, 10, edges(10))).toBe(0);
    expect(binOf(1, 10, edges(10))).toBe(9);
  });

  it("refuses a buffer that does not fit the targets", () => {
    expect(() => prepare(new Float32Array(5), new Int32Array(2))).toThrow(/5 logits for 2 targets/);
  });
});
