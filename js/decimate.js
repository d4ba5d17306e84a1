// Decimation for drawing: keep, for each pixel column, the first, lowest, highest and
// last value of the points that fall in it (M4). The drawn line then looks exactly
// like the full line, and drawing costs O(width) whatever the number of points.

/**
 * @param {ArrayLike<number>} x  sorted ascending
 * @param {ArrayLike<number>} y
 * @param {number} n      number of points to use
 * @param {number} x0     data value at the left edge
 * @param {number} x1     data value at the right edge
 * @param {number} width  number of pixel columns
 * @returns {{cols: Int32Array, first: Float64Array, min: Float64Array, max: Float64Array,
 *   last: Float64Array, count: number}}  one entry per non-empty column, left to right
 */
export function m4(x, y, n, x0, x1, width) {
  const w = Math.max(1, Math.floor(width));
  const cols = new Int32Array(w);
  const first = new Float64Array(w);
  const min = new Float64Array(w);
  const max = new Float64Array(w);
  const last = new Float64Array(w);
  const span = x1 - x0 || 1;
  let count = 0;
  let current = -1;
  for (let i = 0; i < n; i++) {
    const v = y[i];
    if (!Number.isFinite(v)) continue;
    let c = Math.floor(((x[i] - x0) / span) * w);
    if (c < 0 || c > w) continue;
    if (c === w) c = w - 1;
    if (c !== current) {
      current = c;
      cols[count] = c;
      first[count] = min[count] = max[count] = last[count] = v;
      count++;
    } else {
      const k = count - 1;
      if (v < min[k]) min[k] = v;
      if (v > max[k]) max[k] = v;
      last[k] = v;
    }
  }
  return { cols, first, min, max, last, count };
}
