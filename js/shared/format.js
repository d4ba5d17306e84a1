// Number and duration formatting for the header and the table.

/** @param {number|null|undefined} v */
export function fmtInt(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  return Math.round(v).toLocaleString("en-US");
}

/** Four significant digits; exponent form for very small or large values. */
export function fmtValue(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e5)) return v.toExponential(2);
  return Number(v.toPrecision(4)).toString();
}

/** Seconds as "35ms", "12.3s", "4m 05s", "2h 03m". */
export function fmtDuration(s) {
  if (s === null || s === undefined || !Number.isFinite(s) || s < 0) return "–";
  if (s < 1) return `${Math.round(s * 1000)}ms`;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(Math.floor(s % 60)).padStart(2, "0")}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${String(m % 60).padStart(2, "0")}m`;
}

/** Samples per second: "1,234" or "12.5". */
export function fmtRate(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  return v >= 100 ? fmtInt(v) : v.toFixed(1);
}

/** Compact axis label for a step count: 950, 2,500, 20k, 1.5M. */
export function fmtStep(v) {
  if (!Number.isFinite(v)) return "";
  const a = Math.abs(v);
  if (a >= 1e6) return `${Number((v / 1e6).toPrecision(3))}M`;
  if (a >= 1e4) return `${Number((v / 1e3).toPrecision(3))}k`;
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  return fmtValue(v);
}
