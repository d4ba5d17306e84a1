// Several runs drawn on top of each other (a race of plans, or TrainingMonitor.compare):
// one colour per run, the same in every chart, in the legend and in the runs table.
// The kernel lists the runs in the synced `runs` trait (what to draw) and sends each
// run's rows as the series `<key>.steps` / `<key>.epochs`.
import { alignColumns } from "../shared/plot_values.js";
import { h } from "../shared/dom.js";
import { fmtInt, fmtValue } from "../shared/format.js";
import { smoothLoss } from "./smoothing.js";
import { stackColumns, stepParts } from "./terms.js";

/**
 * One colour per run (distinct in light and dark themes); the kernel allows 12 runs
 * (MAX_LANES in nnx_lab/widgets/_race.py), so a 12-trial sweep is one race. The last four
 * were chosen so that no pair of the twelve is closer (CIE76 ΔE) than the closest pair of
 * the first eight (ΔE 27.7), each with a lightness readable on a light and a dark theme.
 */
export const RACE_COLORS = [
  "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
  "#bcbd22", "#7f7f7f", "#aec7e8", "#ffbb78",
];

/** @typedef {{key: string, name: string, run_id: string, status: string, stop_reason: string,
 *   error: string, epoch: number, n_epochs: number, step: number, last_loss: number|null,
 *   loss_nonfinite_since: number|null}} Lane */

/** @param {number} i */
export function laneColor(i) {
  return RACE_COLORS[i % RACE_COLORS.length];
}

/** The identity of a list of runs: charts are rebuilt only when it changes. */
export function lanesKey(lanes) {
  return lanes.map((l) => `${l.key}:${l.name}`).join("|");
}

/** Series names of a lane. */
export function laneSeries(lane) {
  return { steps: `${lane.key}.steps`, epochs: `${lane.key}.epochs` };
}

/** Whether a series name belongs to a lane (what ViewSync accepts besides its own). */
export function isLaneSeries(name) {
  return /^lane\d+\.(steps|epochs)$/.test(name);
}

/** Chart series specs: one line per run, in its colour. */
export function laneSpecs(lanes, extra = {}) {
  return lanes.map((l, i) => ({ label: l.name, color: laneColor(i), width: 2, ...extra }));
}

/** Dash patterns told apart at a glance: a run's k-th term takes the k-th. */
export const TERM_DASHES = [[6, 3], [2, 3], [8, 3, 2, 3], [4, 6]];

/**
 * Each run's named parts (terms.js stepParts of its step series), in the order its
 * kernel added them: its loss terms (`term.<name>`, `aux.<name>`), drawn as dashed
 * lines in the run's colour, and its optimizers' rates (`lr.<name>`, a Trainer run's),
 * drawn as one lr line each.
 * @param {Lane[]} lanes @param {Record<string, any>} stores
 * @returns {{terms: {key: string, label: string}[][], lrs: {key: string, label: string}[][]}}
 */
export function raceParts(lanes, stores) {
  const parts = lanes.map((lane) => stepParts(stores[laneSeries(lane).steps] || null));
  return { terms: parts.map((p) => p.terms), lrs: parts.map((p) => p.lrs) };
}

/** What the race's charts are built for: rebuilt when the runs, their parts or the toggle change. */
export function racePartsKey(lanes, parts, stacked) {
  const names = (per) => per.map((t) => t.map((x) => x.key).join(",")).join("|");
  const any = parts.terms.some((t) => t.length);
  return `${lanesKey(lanes)}#${names(parts.terms)}#${names(parts.lrs)}#${any && stacked ? "stacked" : ""}`;
}

/** The loss chart's term lines (after one line per run): "<run> · <term>", dashed, in the run's colour. */
export function raceTermSpecs(lanes, terms) {
  return lanes.flatMap((lane, i) =>
    (terms[i] || []).map((t, k) => ({
      label: `${lane.name} · ${t.label}`,
      color: laneColor(i),
      width: 1.25,
      dash: TERM_DASHES[k % TERM_DASHES.length],
    })),
  );
}

/**
 * The lr chart's lines: a run's one `lr`, or, for a run whose records name each
 * optimizer's rate (a Trainer run, whose `lr` is empty), one line per optimizer,
 * "<run> · <optimizer>" in the run's colour: the first solid, the next ones dashed.
 * @param {Lane[]} lanes @param {{key: string}[][]} lrs  raceParts' lrs
 * @returns {{lane: number, key: string, label: string, dash?: number[]}[]}
 */
export function raceLrLines(lanes, lrs) {
  return lanes.flatMap((lane, i) => {
    const named = (lrs && lrs[i]) || [];
    if (!named.length) return [{ lane: i, key: "lr", label: lane.name }];
    return named.map((t, k) => ({
      lane: i,
      key: t.key,
      label: `${lane.name} · ${t.key.slice(3)}`,
      ...(k ? { dash: TERM_DASHES[(k - 1) % TERM_DASHES.length] } : {}),
    }));
  });
}

/** The lr chart's series specs of raceLrLines. */
export function raceLrSpecs(lines) {
  return lines.map((l) => ({ label: l.label, color: laneColor(l.lane), width: 1.5, ...(l.dash ? { dash: l.dash } : {}) }));
}

/**
 * The step chart's data: each run's smoothed loss on one shared x of steps; with
 * `parts` (raceParts), each run's terms after every run's loss, smoothed as its loss is
 * (as they are, or stacked as running sums per run), so `loss.ys[i]` stays run i's loss;
 * and the lr chart's lines (raceLrLines: each optimizer's rate where a run names them).
 * @param {Lane[]} lanes @param {Record<string, import("../shared/store.js").ColumnStore>} stores
 * @param {number} smoothing @param {{terms: {key: string}[][], lrs: {key: string}[][]} | null} parts
 * @param {boolean} stacked
 */
export function raceSteps(lanes, stores, smoothing, parts = null, stacked = false) {
  const loss = [];
  const lr = [];
  const termParts = [];
  const lines = raceLrLines(lanes, parts ? parts.lrs : null);
  lanes.forEach((lane, i) => {
    const s = stores[laneSeries(lane).steps];
    const mine = (parts && parts.terms[i]) || [];
    const myLines = lines.filter((l) => l.lane === i);
    if (!s || !s.length) {
      loss.push({ x: [], ys: [[]] });
      lr.push({ x: [], ys: myLines.map(() => []) });
      if (mine.length) termParts.push({ x: [], ys: mine.map(() => []) });
      return;
    }
    const x = s.column("step");
    const n = s.column("n");
    loss.push({ x, ys: [smoothLoss(s.column("loss"), n, smoothing)] });
    lr.push({ x, ys: myLines.map((l) => s.column(l.key)) });
    if (mine.length) {
      // the terms beside the smoothed loss are smoothed the same way (0: as logged)
      const smoothed = mine.map((t) => smoothLoss(s.column(t.key), n, smoothing));
      termParts.push({ x, ys: stacked ? stackColumns(smoothed, s.length) : smoothed });
    }
  });
  return { loss: alignColumns([...loss, ...termParts]), lr: { ...alignColumns(lr), lines } };
}

/** Metric names of every run's epoch series: validation ones first. */
export function raceMetrics(lanes, stores) {
  const val = new Set();
  const train = new Set();
  for (const lane of lanes) {
    const e = stores[laneSeries(lane).epochs];
    if (!e) continue;
    for (const f of e.fields) {
      if (f.includes(":")) continue;
      if (f.startsWith("val.")) val.add(f.slice(4));
      else if (f.startsWith("train.")) train.add(f.slice(6));
    }
  }
  return { val: [...val], all: [...new Set([...val, ...train])] };
}

/**
 * The epoch chart's data: each run's validation value of `metric` per epoch (its
 * training value when no run has a validation one).
 */
export function raceEpochs(lanes, stores, metric) {
  const { val } = raceMetrics(lanes, stores);
  const split = val.includes(metric) ? "val" : "train";
  const parts = lanes.map((lane) => {
    const e = stores[laneSeries(lane).epochs];
    if (!e || !e.length) return { x: [], ys: [[]] };
    const name = `${split}.${metric}`;
    return { x: e.column("epoch"), ys: [e.has(name) ? e.column(name) : new Float32Array(e.length).fill(NaN)] };
  });
  return { split, ...alignColumns(parts) };
}

/** The best (lowest, or highest for accuracy-like metrics) and last value of a column. */
export function bestAndLast(values, higherIsBetter) {
  let best = NaN;
  let last = NaN;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isFinite(v)) continue;
    last = v;
    if (!Number.isFinite(best) || (higherIsBetter ? v > best : v < best)) best = v;
  }
  return { best, last };
}

/** Metrics where more is better (the rest, losses and errors, are better low). */
export function higherIsBetter(metric) {
  return /acc|auc|f1|precision|recall|r2|coverage/i.test(metric);
}

const STATUS_WORDS = ["running", "queued", "finished", "stopped", "failed", "skipped", "interrupted", "stopping"];

/** "race of 3 runs: 1 finished, 1 running, 1 queued" */
export function raceSummary(lanes, comparing) {
  const counts = new Map();
  for (const l of lanes) counts.set(l.status, (counts.get(l.status) || 0) + 1);
  const parts = STATUS_WORDS.filter((s) => counts.has(s)).map((s) => `${counts.get(s)} ${s}`);
  const what = comparing ? "comparing" : "race of";
  return `${what} ${lanes.length} run${lanes.length === 1 ? "" : "s"}: ${parts.join(", ")}`;
}

/** The runs table: colour, name, run id, status, epoch, step, last loss, metric. */
export class RaceTable {
  constructor() {
    this.table = h("table", { class: "nnx-table nnx-race-table", "data-testid": "race-table" });
    this.thead = h("thead");
    this.tbody = h("tbody");
    this.table.append(this.thead, this.tbody);
    this.root = h("div", { class: "nnx-table-box nnx-race", role: "region", "aria-label": "Runs" }, [this.table]);
  }

  /**
   * @param {Lane[]} lanes @param {Record<string, any>} stores
   * @param {string} metric  the per-epoch metric the chart shows
   * @param {string} split   "val" or "train"
   */
  render(lanes, stores, metric, split) {
    const mLabel = metric ? `${split} ${metric}` : "metric";
    this.thead.replaceChildren(
      h("tr", {}, ["", "run", "id", "status", "epoch", "step", "loss", `best ${mLabel}`, `last ${mLabel}`].map((t) => h("th", { scope: "col", text: t }))),
    );
    const hib = higherIsBetter(metric);
    const rows = lanes.map((lane, i) => {
      const e = stores[laneSeries(lane).epochs];
      const col = e && metric && e.has(`${split}.${metric}`) ? e.column(`${split}.${metric}`) : new Float32Array(0);
      const { best, last } = bestAndLast(col, hib);
      const swatch = h("span", { class: "nnx-swatch nnx-race-swatch" });
      swatch.style.borderColor = laneColor(i);
      const status = h("span", { class: "nnx-status", "data-status": lane.status, text: lane.status });
      const reason = lane.error || lane.stop_reason;
      if (reason) status.title = reason;
      const since = lane.loss_nonfinite_since;
      const loss = since !== null && since !== undefined ? `non-finite since step ${fmtInt(since)}` : fmtValue(lane.last_loss);
      const epoch = lane.n_epochs ? `${fmtInt(lane.epoch)} / ${fmtInt(lane.n_epochs)}` : fmtInt(lane.epoch);
      const id = h("code", { class: "nnx-run-id", text: lane.run_id ? lane.run_id.slice(0, 8) : "–" });
      if (lane.run_id) id.title = lane.run_id;
      const cells = [swatch, lane.name, id, status, epoch, fmtInt(lane.step), loss, fmtValue(best), fmtValue(last)];
      return h(
        "tr",
        { "data-run": lane.name, "data-status": lane.status, "data-color": laneColor(i) },
        cells.map((c) => h("td", {}, [c])),
      );
    });
    this.tbody.replaceChildren(...rows);
  }
}
