// Formatting the runs panel adds to js/shared/format.js.

/** Bytes as "512 bytes", "3.2 KiB", "1.0 GiB". */
export function shownBytes(n) {
  if (typeof n !== "number" || !Number.isFinite(n) || n < 0) return "–";
  for (const [unit, scale] of [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]]) {
    if (n >= scale) return `${(n / scale).toFixed(1)} ${unit}`;
  }
  return `${n} bytes`;
}

/** A configuration value as short text: JSON for lists and mappings, "–" when absent. */
export function shownValue(v, absent = false, width = 60) {
  if (absent) return "–";
  const text = typeof v === "string" ? v : JSON.stringify(v);
  if (text === undefined) return String(v);
  return text.length <= width ? text : `${text.slice(0, width - 1)}…`;
}
