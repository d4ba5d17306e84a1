// The x axes of the compare panel, as TensorBoard and W&B offer them: step, relative
// time (since each run started), wall time (the clock), epoch, and each run's fraction
// of itself (so a 120-step run and a 28,000-step one span the same width).
//
// The times come from the log's own clock (RunState.axisInfo): the run's start, each
// epoch's end (its start plus the epochs' seconds), the run's end, and for a live run
// the server's time at its latest step. A step between two of those points is placed
// in proportion (the steps of an epoch take about equal time). Every transform is
// monotone, so each run's x stays ascending, as alignOnX wants it.
import { fmtDuration, fmtStep, fmtValue } from "../shared/format.js";

/** The axes, in the order the menu offers them. */
export const AXES = [
  { key: "step", label: "step" },
  { key: "relative", label: "relative time" },
  { key: "wall", label: "wall time" },
  { key: "epoch", label: "epoch" },
  { key: "fraction", label: "fraction of the run" },
];

/**
 * What a run's log says about where its steps fall (RunState.axisInfo gives it).
 * @typedef {{startStep: number, startEpoch: number, lastStep: number, totalSteps: number|null,
 *   startedAt: number|null, times: [number, number][], epochs: [number, number][]}} AxisInfo
 *   times: [step, seconds] ascending; epochs: [step, epoch] at each epoch's end
 */

/**
 * y at x on the broken line through `points` ([x, y], x ascending), held flat past
 * its ends; NaN without points.
 * @param {[number, number][]} points
 * @param {number} x
 */
export function interpolate(points, x) {
  const n = points.length;
  if (!n || !Number.isFinite(x)) return NaN;
  if (x <= points[0][0]) return points[0][1];
  if (x >= points[n - 1][0]) return points[n - 1][1];
  let lo = 0;
  let hi = n - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (points[mid][0] <= x) lo = mid;
    else hi = mid;
  }
  const [x0, y0] = points[lo];
  const [x1, y1] = points[hi];
  return x1 === x0 ? y1 : y0 + ((x - x0) / (x1 - x0)) * (y1 - y0);
}

/** The points without the later ones at a step already reached: a step's time is when
 * it was first done (a run's end, written after its last epoch's, is no later step). */
function firstAtEachStep(points) {
  return points.filter((p, i) => i === 0 || p[0] > points[i - 1][0]);
}

/** The epoch a step falls in, as a fraction: 2.5 is half way through epoch 3. */
function epochAt(info, step) {
  return interpolate([[info.startStep, info.startEpoch - 1], ...info.epochs], step);
}

/**
 * The x of each of `steps` on `axis`, for one run (NaN where the log does not say,
 * e.g. a time axis for a run whose log has no times).
 * @param {string} axis  a key of AXES
 * @param {ArrayLike<number>} steps
 * @param {AxisInfo} info
 * @returns {Float64Array}
 */
export function stepsToX(axis, steps, info) {
  const out = new Float64Array(steps.length);
  const times = firstAtEachStep(info.times || []);
  const span = (info.totalSteps ?? info.lastStep) - info.startStep;
  const t0 = times.length ? times[0][1] : NaN;
  for (let i = 0; i < steps.length; i++) {
    const s = steps[i];
    switch (axis) {
      case "relative":
        out[i] = interpolate(times, s) - t0;
        break;
      case "wall":
        out[i] = interpolate(times, s);
        break;
      case "epoch":
        out[i] = info.epochs.length ? epochAt(info, s) : NaN;
        break;
      case "fraction":
        out[i] = span > 0 ? Math.min(1, Math.max(0, (s - info.startStep) / span)) : NaN;
        break;
      default:
        out[i] = s;
    }
  }
  return out;
}

/** A clock time: "14:03:12". */
export function fmtClock(t) {
  if (!Number.isFinite(t)) return "";
  const d = new Date(t * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A fraction as a percentage: "35%". */
export function fmtFraction(v) {
  return Number.isFinite(v) ? `${Math.round(v * 100)}%` : "";
}

/** The axis's label and its number format. */
export function axisFormat(axis) {
  switch (axis) {
    case "relative":
      return { label: "time since the run started", format: fmtDuration };
    case "wall":
      return { label: "wall time", format: fmtClock };
    case "epoch":
      return { label: "epoch", format: (v) => (Number.isFinite(v) ? fmtValue(v) : "") };
    case "fraction":
      return { label: "fraction of the run", format: fmtFraction };
    default:
      return { label: "step", format: fmtStep };
  }
}
