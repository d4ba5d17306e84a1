// The named parts of a run's step series: an objective's loss terms (term.<name>), a
// network's auxiliary terms (aux.<name>), each optimizer's learning rate (lr.<name>).
// The loss chart draws each term beside the total, overlaid or stacked (the toggle);
// the lr chart draws one line per optimizer. Colours come from one fixed palette, in
// the order the terms first appeared, so a term keeps its colour through a run.

/** Readable on a light and a dark theme; the total loss keeps the theme's own colours. */
export const TERM_COLORS = ["#e6862a", "#2ca02c", "#9467bd", "#d62728", "#17becf", "#8c564b", "#e377c2", "#7f7f7f"];

/** A colour of the palette with an alpha, for the stacked bands. */
function withAlpha(hex, alpha) {
  const n = Number.parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${alpha})`;
}

/**
 * The parts a step store holds, in the order the kernel added their columns.
 * @param {{fields: string[]} | null} store
 * @returns {{terms: {key: string, label: string, color: string}[], lrs: {key: string, label: string, color: string}[]}}
 */
export function stepParts(store) {
  const terms = [];
  const lrs = [];
  for (const f of store ? store.fields : []) {
    if (f.includes(":")) continue;
    if (f.startsWith("term.")) terms.push({ key: f, label: f.slice(5) });
    else if (f.startsWith("aux.")) terms.push({ key: f, label: `${f.slice(4)} (aux)` });
    else if (f.startsWith("lr.")) lrs.push({ key: f, label: `lr ${f.slice(3)}` });
  }
  terms.forEach((t, i) => (t.color = TERM_COLORS[i % TERM_COLORS.length]));
  lrs.forEach((t, i) => (t.color = TERM_COLORS[i % TERM_COLORS.length]));
  return { terms, lrs };
}

/** What the charts are built for: a rebuild when it changes. */
export function partsKey(parts, stacked) {
  return `${parts.terms.map((t) => t.key).join("|")}#${parts.lrs.map((t) => t.key).join("|")}#${stacked && parts.terms.length ? "stacked" : "overlaid"}`;
}

/** The loss chart's series of the terms (after its four own) and, stacked, the bands between them. */
export function termSeries(parts, stacked) {
  const series = parts.terms.map((t) => ({ label: t.label, color: t.color, width: stacked ? 1 : 1.25 }));
  // stacked: series k is the sum of terms 0..k; the band under it is term k's share
  const bands = stacked ? parts.terms.slice(1).map((t, i) => ({ upper: 5 + i, lower: 4 + i, fill: withAlpha(t.color, 0.25) })) : [];
  return { series, bands };
}

/**
 * The terms' columns as drawn: as they are (overlaid) or as running sums (stacked: a
 * missing value counts as 0 above it, so one gap does not hide the terms stacked on it;
 * a row where every term is missing stays a gap).
 * @param {{column: (name: string) => ArrayLike<number>, length: number}} store
 */
export function termColumns(store, parts, stacked) {
  const cols = parts.terms.map((t) => store.column(t.key));
  return stacked ? stackColumns(cols, store.length) : cols;
}

/**
 * Columns as running sums, as termColumns stacks them (a race stacks its smoothed terms).
 * @param {ArrayLike<number>[]} cols @param {number} n  rows
 */
export function stackColumns(cols, n) {
  const out = [];
  let below = null;
  let seen = null;
  for (const col of cols) {
    const sum = new Float64Array(n);
    const any = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      const x = col[i];
      const ok = Number.isFinite(x);
      any[i] = (seen ? seen[i] : 0) | (ok ? 1 : 0);
      sum[i] = (below ? below[i] : 0) + (ok ? x : 0);
    }
    below = sum;
    seen = any;
    const drawn = Float64Array.from(sum, (x, i) => (any[i] ? x : NaN));
    out.push(drawn);
  }
  return out;
}

/** The lr chart's lines: one per optimizer when the records name them, else the one lr. */
export function lrSeries(parts) {
  if (!parts.lrs.length) return [{ label: "lr", color: "--nnx-second", width: 1.5 }];
  return parts.lrs.map((t) => ({ label: t.label, color: t.color, width: 1.5 }));
}

/** @param {{column: (name: string) => ArrayLike<number>}} store */
export function lrColumns(store, parts) {
  return parts.lrs.length ? parts.lrs.map((t) => store.column(t.key)) : [store.column("lr")];
}
