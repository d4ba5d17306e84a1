// The smoothed loss line: an exponential moving average over steps, debiased like
// TensorBoard's. A row can be a bucket of several steps (a decimated history): the
// average then decays by `a` once per step in the bucket, so decimation does not
// change how much the past counts. A non-finite row has no smoothed value (a gap in
// the line) and leaves the average as it was.

/**
 * @param {ArrayLike<number>} values  each row's loss (its mean for a bucket; NaN when non-finite)
 * @param {ArrayLike<number>|null} counts  steps in each row (null: one each)
 * @param {number} a  smoothing factor in [0, 1)
 * @returns {Float64Array}  NaN where there is no smoothed value
 */
export function smoothLoss(values, counts, a) {
  const n = values.length;
  const out = new Float64Array(n);
  let raw = 0;
  let weight = 0;
  for (let i = 0; i < n; i++) {
    const y = values[i];
    if (!Number.isFinite(y)) {
      out[i] = NaN;
      continue;
    }
    const keep = a ** (counts ? Math.max(1, counts[i]) : 1);
    raw = keep * raw + (1 - keep) * y;
    weight = keep * weight + (1 - keep);
    out[i] = weight > 0 ? raw / weight : y;
  }
  return out;
}

/** @typedef {import("./view.js").MonitorView} MonitorView */

/** The smoothing factor drawn: the slider's while it moves, else the kernel's. @param {MonitorView} v */
export function smoothingFactor(v) {
  return v._smoothingOverride ?? (Number(v.model.get("smoothing")) || 0);
}
