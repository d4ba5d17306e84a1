// NLL, Brier, ECE and the reliability bins at a temperature, from the compact buffer of
// logits the kernel sends when they are few enough (CalibrationExplorer's
// compute="browser"): float32 logits already shifted by each row's maximum (so the top
// class is at 0), and the targets. The same arithmetic as the kernel's TemperatureSweep
// on the same float32 values, in float64; tests/python/widgets/test_calibration_explorer.py
// checks the two agree. Bin m holds ((m-1)/bins, m/bins], as the metric registry's ECE.

/**
 * @typedef {{d: Float32Array, dy: Float64Array, correct: Uint8Array, rows: number,
 *   classes: number, accuracy: number}} Prepared
 * @typedef {{count: Int32Array, confidence: Float64Array, correct: Float64Array,
 *   nll: number, brier: number, ece: number, temperature: number}} Measured
 */

/**
 * @param {Float32Array} d  rows x classes shifted logits, row-major
 * @param {Int32Array} y  one class index per row
 * @returns {Prepared}
 */
export function prepare(d, y) {
  const rows = y.length;
  const classes = rows ? d.length / rows : 0;
  if (!rows || !Number.isInteger(classes) || classes < 2) throw new Error(`nnx-lab: ${d.length} logits for ${rows} targets`);
  const dy = new Float64Array(rows);
  const correct = new Uint8Array(rows);
  let right = 0;
  for (let i = 0; i < rows; i++) {
    const o = i * classes;
    let top = 0;
    for (let j = 1; j < classes; j++) if (d[o + j] > d[o + top]) top = j; // the first maximum, as argmax
    dy[i] = d[o + y[i]];
    correct[i] = top === y[i] ? 1 : 0;
    right += correct[i];
  }
  return { d, dy, correct, rows, classes, accuracy: right / rows };
}

/**
 * The bin of a confidence: the number of edges (m / bins, m = 1 .. bins - 1) below it, as
 * the registry's bucketize. conf * bins alone can round across an edge (0.7 * 10 > 7).
 * @param {number} conf @param {number} bins @param {Float64Array} edges
 */
export function binOf(conf, bins, edges) {
  let b = Math.min(bins - 1, Math.max(0, Math.ceil(conf * bins) - 1));
  while (b > 0 && conf <= edges[b - 1]) b -= 1;
  while (b < bins - 1 && conf > edges[b]) b += 1;
  return b;
}

/**
 * @param {Prepared} p @param {number} bins @param {number} t the temperature
 * @returns {Measured}
 */
export function measure(p, bins, t) {
  const { d, dy, correct, rows, classes } = p;
  const beta = 1 / t;
  const count = new Int32Array(bins);
  const confidence = new Float64Array(bins);
  const right = new Float64Array(bins);
  const edges = Float64Array.from({ length: bins - 1 }, (_, i) => (i + 1) / bins);
  let nll = 0;
  let brier = 0;
  for (let i = 0; i < rows; i++) {
    const o = i * classes;
    let s = 0;
    let s2 = 0;
    for (let j = 0; j < classes; j++) {
      const e = Math.exp(d[o + j] * beta);
      s += e;
      s2 += e * e;
    }
    const conf = 1 / s;
    nll += Math.log(s) - dy[i] * beta;
    brier += s2 / (s * s) - (2 * Math.exp(dy[i] * beta)) / s + 1;
    const b = binOf(conf, bins, edges);
    count[b] += 1;
    confidence[b] += conf;
    right[b] += correct[i];
  }
  let gap = 0;
  for (let m = 0; m < bins; m++) gap += Math.abs(confidence[m] - right[m]);
  return { count, confidence, correct: right, nll: nll / rows, brier: brier / rows, ece: gap / rows, temperature: t };
}
