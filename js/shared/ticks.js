// The axes' ticks (shared/chart.js): where they go and how they read. An axis has one
// format for all its labels ("9k 10k", never "9,000 10k"; "1e-4 1e-3", never "1.00e-4
// 0.001"); an axis of counts (steps, epochs) has whole-number ticks only; a log axis
// spans the data, not the whole decades around it.

/** Tick spacings of a count axis: 1, 2, 5, 10, 20, 50, ... (never 0.5: no step 1.5). */
export const INTEGER_INCRS = Array.from({ length: 16 }, (_, e) => [1, 2, 5].map((m) => m * 10 ** e)).flat();

/** The spacing of evenly spaced ticks (the smallest gap between neighbours); 0 for one tick. */
function spacing(values) {
  let gap = Infinity;
  for (let i = 1; i < values.length; i++) gap = Math.min(gap, Math.abs(values[i] - values[i - 1]));
  return Number.isFinite(gap) ? gap : 0;
}

/** Decimals that tell ticks `gap` apart (0 for whole numbers), at most 6. */
function decimalsFor(gap) {
  if (!(gap > 0)) return 0;
  return Math.min(6, Math.max(0, Math.ceil(-Math.log10(gap) - 1e-9)));
}

/**
 * Labels of a step (or epoch) axis in one unit for the whole axis, chosen by its largest
 * tick: "950 1,000", "9k 9.5k 10k", "1M 1.5M". Null ticks (hidden by the chart) are "".
 * @param {(number|null)[]} splits
 */
export function stepTicks(splits) {
  const shown = splits.filter((v) => v !== null && Number.isFinite(v));
  const top = Math.max(0, ...shown.map(Math.abs));
  const [unit, suffix] = top >= 1e6 ? [1e6, "M"] : top >= 1e4 ? [1e3, "k"] : [1, ""];
  const digits = decimalsFor(spacing(shown) / unit);
  return splits.map((v) => {
    if (v === null || !Number.isFinite(v)) return "";
    if (v === 0) return "0";
    const x = Number((v / unit).toFixed(digits));
    return `${suffix ? String(x) : x.toLocaleString("en-US", { maximumFractionDigits: digits })}${suffix}`;
  });
}

/**
 * Labels of a value axis in one form for the whole axis: exponent form for every tick
 * when one of them is very small or large ("1e-4 5e-4 1e-3"), else decimals; on a
 * linear axis every label has the same decimals ("0.0 0.5 1.0", "0.10 0.15 0.20").
 * @param {(number|null)[]} splits @param {{log?: boolean}} [opts]
 */
export function valueTicks(splits, { log = false } = {}) {
  const shown = splits.filter((v) => v !== null && Number.isFinite(v));
  const exp = shown.some((v) => v !== 0 && (Math.abs(v) < 1e-3 || Math.abs(v) >= 1e5));
  const digits = decimalsFor(spacing(shown));
  return splits.map((v) => {
    if (v === null || !Number.isFinite(v)) return "";
    if (exp) return v === 0 ? "0" : Number(v.toPrecision(3)).toExponential().replace("e+", "e");
    return log ? String(Number(v.toPrecision(6))) : v.toFixed(digits);
  });
}

/** `v` rounded to one significant digit, down or up ("0.0734" -> 0.07 down, 2.3 -> 3 up). */
function oneDigit(v, up) {
  const p = 10 ** Math.floor(Math.log10(v));
  const m = up ? Math.ceil(v / p - 1e-9) : Math.floor(v / p + 1e-9);
  return Number((m * p).toPrecision(12));
}

/**
 * The range of a log axis for positive data in [min, max]: the data rounded out to one
 * significant digit (0.073..2.3 -> [0.07, 3]), not to whole decades ([0.01, 10] wastes
 * most of the axis). A single value gets a factor of two each way.
 * @returns {[number, number]}
 */
export function logRange(min, max) {
  if (!(min > 0) || !(max > 0)) return [0.1, 1];
  if (min === max) return [min / 2, max * 2];
  return [oneDigit(min, false), oneDigit(max, true)];
}
