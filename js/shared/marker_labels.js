// Where a chart's marker labels go ("valley 2.6e-3", "chosen 3.1e-3"): beside their
// line, never on top of one another. Two markers close together put their labels on
// either side of their lines; when that does not fit either, a label drops a row.

const PAD = 4; // px between a marker's line and its label
const GAP = 6; // px kept free between two labels of one row

/**
 * Place each label beside its marker so that no two labels overlap.
 *
 * Markers are taken left to right. Each tries, row by row from the top: the right of its
 * line, then the left (the left first when the next marker's line is close enough that a
 * label on the right would cross it). A place must lie inside [left, right] and clear
 * every label already in that row by `gap`. A label wider than the plot gets a row of
 * its own, starting at the plot's left edge.
 *
 * @param {{px: number, width: number}[]} items  marker positions and label widths (px)
 * @param {{left: number, right: number, pad?: number, gap?: number}} box  the plot's x span
 * @returns {{x0: number, x1: number, row: number, align: "left"|"right"}[]} per item, in
 *   the input order: the label's span, its row (0 = top) and which side of the line it is on
 */
export function placeLabels(items, { left, right, pad = PAD, gap = GAP }) {
  const order = items.map((_, i) => i).sort((a, b) => items[a].px - items[b].px);
  /** @type {Array<Array<[number, number]>>} the spans taken in each row */
  const rows = [];
  const out = new Array(items.length);
  order.forEach((i, k) => {
    const { px, width } = items[i];
    const next = k + 1 < order.length ? items[order[k + 1]].px : Infinity;
    const onRight = { x0: px + pad, x1: px + pad + width, align: "left" };
    const onLeft = { x0: px - pad - width, x1: px - pad, align: "right" };
    const sides = next - px < pad + width + gap ? [onLeft, onRight] : [onRight, onLeft];
    const fits = (s) => s.x0 >= left && s.x1 <= right;
    const free = (row, s) => row.every(([a, b]) => s.x1 + gap <= a || s.x0 >= b + gap);
    for (let row = 0; ; row++) {
      if (row === rows.length) rows.push([]);
      const taken = rows[row];
      let place = sides.find((s) => fits(s) && free(taken, s));
      if (!place && taken.length === 0) {
        // too wide for the plot on either side: alone in its row, from the left edge
        place = { x0: left, x1: left + width, align: "left" };
      }
      if (place) {
        taken.push([place.x0, place.x1]);
        out[i] = { x0: place.x0, x1: place.x1, row, align: place.align };
        return;
      }
    }
  });
  return out;
}

/** Whether two placed labels overlap (same row, spans intersecting). */
export function labelsOverlap(a, b) {
  return a.row === b.row && a.x0 < b.x1 && b.x0 < a.x1;
}
