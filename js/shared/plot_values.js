// Columns as uPlot takes them: gaps for values it cannot draw, and several series
// with x columns of their own on one shared x.

/**
 * Values as uPlot wants them: an Array where a gap is null. Non-finite values are
 * gaps; on a log scale so are values <= 0 (they have no place on it). `undefined`
 * (a plain Array's hole where another series has a point, see alignColumns) stays
 * undefined: uPlot draws the line on across it.
 * @param {ArrayLike<number|undefined>} values @param {boolean} log
 * @returns {{data: (number|null|undefined)[], gaps: number, dropped: number}}
 */
export function toPlotValues(values, log = false) {
  const n = values.length;
  const data = new Array(n);
  let gaps = 0;
  let dropped = 0;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v === undefined) {
      data[i] = undefined;
    } else if (!Number.isFinite(v)) {
      data[i] = null;
      gaps += 1;
    } else if (log && v <= 0) {
      data[i] = null;
      dropped += 1;
    } else data[i] = v;
  }
  return { data, gaps, dropped };
}

/**
 * Several series with x columns of their own on one shared x: the sorted union of
 * their x values, and per series an Array with its values at its own x and
 * `undefined` elsewhere (drawn across; a NaN of its own stays a gap).
 * @param {{x: ArrayLike<number>, ys: ArrayLike<number>[]}[]} parts  x ascending
 * @returns {{x: number[], ys: (number|undefined)[][]}}
 */
export function alignColumns(parts) {
  const all = [];
  for (const p of parts) for (let i = 0; i < p.x.length; i++) all.push(p.x[i]);
  all.sort((a, b) => a - b);
  const x = [];
  for (const v of all) if (x.length === 0 || x[x.length - 1] !== v) x.push(v);
  const ys = [];
  for (const p of parts) {
    const cols = p.ys.map(() => new Array(x.length).fill(undefined));
    let j = 0;
    for (let i = 0; i < p.x.length; i++) {
      while (x[j] < p.x[i]) j++;
      for (let c = 0; c < cols.length; c++) cols[c][j] = p.ys[c][i];
    }
    ys.push(...cols);
  }
  return { x, ys };
}
