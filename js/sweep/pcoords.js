// Parallel coordinates, as data: each axis's scale (log for a log-uniform field, evenly
// spaced choices, linear for metrics over the finished trials' range), a trial's value
// on an axis, the brush filter (the kernel's passes_brushes is the same rule) and the
// polyline of a trial. Pure functions: the view draws what they return.

/** A trial's value on an axis: a choice's index, a number, or null. */
export function axisValue(row, axis) {
  let v;
  if (axis.kind === "value") {
    v = (row.values || {})[axis.key];
    if (axis.scale === "choice") {
      const i = axis.choices.findIndex((c) => JSON.stringify(c) === JSON.stringify(v));
      return i < 0 ? null : i;
    }
  } else {
    v = (row.metrics || {})[axis.key];
  }
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** {lo, hi, log}: the range an axis spans over `rows` (a choice axis: its indices). */
export function axisDomain(axis, rows) {
  if (axis.scale === "choice") return { lo: 0, hi: Math.max(1, axis.choices.length - 1), log: false };
  const log = axis.scale === "log";
  const vs = rows.map((r) => axisValue(r, axis)).filter((v) => v !== null && (!log || v > 0));
  if (!vs.length) return { lo: 0, hi: 1, log };
  let lo = Math.min(...vs);
  let hi = Math.max(...vs);
  if (hi === lo) {
    const pad = log ? lo * 0.5 : Math.abs(lo) * 0.05 || 1;
    lo -= log ? 0 : pad;
    hi += pad;
  }
  return { lo, hi, log };
}

/** 0 (bottom) .. 1 (top) of `v` in `domain`. */
export function toUnit(v, { lo, hi, log }) {
  if (log) return (Math.log(v) - Math.log(lo)) / (Math.log(hi) - Math.log(lo));
  return (v - lo) / (hi - lo);
}

/** The value at `u` (0..1) of `domain`: what a brushed pixel range means. */
export function fromUnit(u, { lo, hi, log }) {
  if (log) return Math.exp(Math.log(lo) + u * (Math.log(hi) - Math.log(lo)));
  return lo + u * (hi - lo);
}

/** Whether `row` lies inside every brushed range; no value on a brushed axis: no. */
export function passes(row, axes, brushes) {
  for (const axis of axes) {
    const span = (brushes || {})[axis.key];
    if (!span) continue;
    const v = axisValue(row, axis);
    if (v === null || v < span[0] || v > span[1]) return false;
  }
  return true;
}

/** The SVG points of a trial's line, or null while it has no value on some axis. */
export function linePoints(row, axes, domains, { width, height, pad }) {
  const step = axes.length > 1 ? (width - 2 * pad) / (axes.length - 1) : 0;
  const pts = [];
  for (let i = 0; i < axes.length; i++) {
    const v = axisValue(row, axes[i]);
    if (v === null) return null;
    const y = pad + (1 - toUnit(v, domains[i])) * (height - 2 * pad);
    pts.push(`${(pad + i * step).toFixed(1)},${y.toFixed(1)}`);
  }
  return pts.join(" ");
}

/** An axis's short label: the field's last part, or the metric ("val.loss"). */
export function axisLabel(axis) {
  return axis.kind === "value" ? axis.key.split(".").slice(-1)[0] : axis.key;
}
