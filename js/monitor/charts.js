// The monitor's three charts: loss per step (raw, smoothed, the min-max band of merged
// steps), the per-epoch metric, the learning rate; in a race, one line per run in its
// colour. How the step series become lines; the epoch marks and the note on merging.
// A run whose records name loss terms or several optimizers gets a line for each
// (terms.js): the charts are rebuilt when the names or the stacked toggle change.
import { Chart } from "../shared/chart.js";
import { h, legend } from "../shared/dom.js";
import { stepTicks, valueTicks } from "../shared/ticks.js";
import { fmtInt, fmtStep, fmtValue } from "../shared/format.js";
import { laneColor, laneSeries, laneSpecs, lanesKey, raceLrLines, raceLrSpecs, raceParts, racePartsKey, raceSteps, raceTermSpecs } from "./race.js";
import { smoothingFactor, smoothLoss } from "./smoothing.js";
import { taskView } from "./task.js";
import { lrColumns, lrSeries, partsKey, stepParts, termColumns, termSeries } from "./terms.js";
import { onZoom, setWindow } from "./toolbar.js";

/** @typedef {import("./view.js").MonitorView} MonitorView */

// steps and epochs are counts: whole-number ticks, one unit per axis; values in one form
const AXES = { xFormat: fmtStep, yFormat: fmtValue, xTicks: stepTicks, yTicks: valueTicks, xInteger: true };
const LOG_LR_SPAN = 20; // the lr axis goes log when the schedule spans more than this factor

/**
 * @typedef {{label: string, color: string, fallback?: string, dashed?: boolean}} LegendItem
 *   color: a CSS variable name or a colour; the same items label the page and the PNG.
 */
/** @type {LegendItem[]} */
export const LOSS_LEGEND = [
  { label: "loss", color: "--nnx-raw" },
  { label: "smoothed", color: "--nnx-accent" },
  { label: "epoch end", color: "--jp-border-color1", fallback: "#bdbdbd", dashed: true },
];
/** @type {LegendItem[]} */
export const EPOCH_LEGEND = [
  { label: "validation", color: "--nnx-accent" },
  { label: "training (epoch)", color: "--nnx-second", dashed: true },
];

/** A legend item as dom.js legend() takes it. @param {LegendItem} it */
function domItem(it) {
  const color = it.color.startsWith("--") ? `var(${it.color}${it.fallback ? `, ${it.fallback}` : ""})` : it.color;
  return [it.label, color, it.dashed ? "nnx-dashed" : ""];
}

/**
 * The legends the page shows under the charts: the run's lines, or one colour per run
 * of a race (under the loss chart, for every chart); under the lr chart, each
 * optimizer's line (a race's: once a run names its optimizers), else none.
 * @param {MonitorView} v @returns {{loss: LegendItem[], epoch: LegendItem[], lr: LegendItem[]}}
 */
export function legendsShown(v) {
  if (v._lanes.length) {
    // the lr chart's legend once a run names its optimizers: "<run> · <optimizer>" each
    const found = v._racePartsFor === lanesKey(v._lanes) ? v._raceParts : null;
    const lines = raceLrLines(v._lanes, found ? found.lrs : null);
    const lr = lines.some((l) => l.key !== "lr") ? lines.map((l) => ({ label: l.label, color: laneColor(l.lane), dashed: Boolean(l.dash) })) : [];
    return { loss: v._lanes.map((l, i) => ({ label: l.name, color: laneColor(i) })), epoch: [], lr };
  }
  const parts = v._parts || { terms: [], lrs: [] };
  const terms = parts.terms.map((t) => ({ label: t.label, color: t.color }));
  return { loss: [...LOSS_LEGEND, ...terms], epoch: EPOCH_LEGEND, lr: parts.lrs.map((t) => ({ label: t.label, color: t.color })) };
}

/** The legend under the lr chart (legendsShown's lr), hidden when it has no item. @param {MonitorView} v */
export function showLrLegend(v) {
  const items = legendsShown(v).lr;
  v.lrLegend.replaceChildren(...legend(items.map(domItem)).childNodes);
  v.lrLegend.hidden = items.length === 0;
}

/**
 * The figures, their captions, readouts and legends, appended to `parent` (in the page:
 * the charts size themselves from their container), then the charts in them.
 * @param {MonitorView} v @param {HTMLElement} parent
 */
export function buildCharts(v, parent) {
  const readout = () => h("div", { class: "nnx-readout", "data-testid": "readout", "aria-live": "off" });
  v.lossFig = h("figure", { class: "nnx-chart nnx-chart-wide", "data-testid": "loss-chart", "data-points": "0" });
  v.lossCaption = h("figcaption", { text: "Training loss per step" });
  v.lossFig.append(v.lossCaption);
  v.epochFig = h("figure", { class: "nnx-chart", "data-testid": "epoch-chart" });
  v.lrFig = h("figure", { class: "nnx-chart", "data-testid": "lr-chart" });
  parent.append(h("div", { class: "nnx-charts" }, [v.lossFig, v.epochFig, v.lrFig]));
  v._syncKey = `nnx-steps-${Math.random().toString(36).slice(2)}`;
  v.lossReadout = readout();
  v.lossLegend = legend(LOSS_LEGEND.map(domItem));
  v.raceLegend = h("div", { class: "nnx-legend", "data-testid": "race-legend" });
  v.raceLegend.hidden = true;
  v.metricSelect = h("select", { class: "nnx-input", "data-testid": "metric-select", "aria-label": "Per-epoch metric" });
  v.metricSelect.addEventListener("change", () => {
    v._metricChosen = true;
    v._renderEpochs();
  });
  v.epochCaption = h("label", { text: "Per epoch: " }, [v.metricSelect]);
  v.epochFig.append(h("figcaption", {}, [v.epochCaption]));
  v.epochReadout = readout();
  v.epochEmpty = h("p", { class: "nnx-epoch-empty", "data-testid": "epoch-empty", role: "status" });
  v.epochEmpty.hidden = true;
  v.epochLegend = legend(EPOCH_LEGEND.map(domItem));
  v.lrFig.append(h("figcaption", { text: "Learning rate" }));
  v.lrReadout = readout();
  v.lrLegend = h("div", { class: "nnx-legend", "data-testid": "lr-legend" });
  v.lrLegend.hidden = true;
  // stacked: each term's share of the sum under the line; overlaid: each term on its own
  v.stackToggle = h("input", { type: "checkbox", "data-testid": "stack-toggle" });
  v.stackToggle.addEventListener("change", () => renderSteps(v));
  v.termsControl = h("label", { class: "nnx-check", title: "Stack the loss terms (each band is one term's share)" }, [v.stackToggle, "stack terms"]);
  v.termsControl.hidden = true;
  v._parts = { terms: [], lrs: [] };
  v._partsKey = partsKey(v._parts, false);
  makeCharts(v, []);
  v.lossFig.append(v.lossReadout, v.lossLegend, v.raceLegend, v.termsControl);
  v.epochFig.append(v.epochEmpty, v.epochReadout, v.epochLegend);
  v.lrFig.append(v.lrReadout, v.lrLegend);
}

/**
 * The three charts: one run (raw and smoothed loss, validation and training per
 * epoch, lr) or, with `lanes`, one line per run of a race in its colour. A rebuild
 * keeps each chart where it was in its figure, and the toolbar's log scale and window.
 * @param {MonitorView} v @param {import("./race.js").Lane[]} lanes
 */
export function makeCharts(v, lanes) {
  const old = v.lossChart ? v._charts() : null;
  const anchors = old ? old.map((c) => (c.plot ? c.plot.root.nextSibling : null)) : [null, null, null];
  if (old) for (const c of old) c.destroy();
  const race = lanes.length > 0;
  const parts = race ? { terms: [], lrs: [] } : v._parts;
  const terms = termSeries(parts, v.stackToggle.checked);
  // a race's terms and optimizers: what renderRaceSteps found for these runs (none before it looked)
  const found = race && v._racePartsFor === lanesKey(lanes) ? v._raceParts : null;
  const laneTerms = found ? found.terms : lanes.map(() => []);
  const lossSeries = race
    ? [...laneSpecs(lanes), ...raceTermSpecs(lanes, laneTerms)]
    : [
        { label: "loss", color: "--nnx-raw", width: 1 },
        { label: "smoothed", color: "--nnx-accent", width: 2 },
        { label: "max", color: "--nnx-raw", hidden: true, show: false },
        { label: "min", color: "--nnx-raw", hidden: true, show: false },
        ...terms.series,
      ];
  v.lossChart = new Chart(v.lossFig, {
    title: race ? "Training loss per step of each run, smoothed" : "Training loss per step, raw and smoothed",
    xLabel: "step",
    // a rebuilt chart keeps the task's loss title (_onTask sets it on a live one)
    yLabel: race ? "loss" : taskView(v.model.get("task_kind") || "").loss,
    height: 220,
    series: lossSeries,
    bands: race ? [] : [{ upper: 2, lower: 3, fill: "--nnx-band" }, ...terms.bands],
    ...AXES,
    sync: v._syncKey,
    onCursor: (idx) => v._lossReadout(idx),
    onZoom: (range) => onZoom(v, v.lossChart, range),
    // for browser tests and for anyone inspecting the page: what the axes show
    onDraw: (r) => {
      v.lossFig.dataset.xRange = r.x.map((x) => Number(x).toPrecision(6)).join(",");
      v.lossFig.dataset.yRange = r.y.map((y) => Number(y).toPrecision(6)).join(",");
    },
  });
  v.epochChart = new Chart(v.epochFig, {
    title: race ? "Per-epoch metric of each run" : "Per-epoch metric, validation and training",
    xLabel: "epoch",
    yLabel: "value",
    height: 180,
    series: race
      ? laneSpecs(lanes, { points: true })
      : [
          { label: "validation", color: "--nnx-accent", width: 2, points: true },
          { label: "training", color: "--nnx-second", width: 1.5, dash: [5, 4], points: true },
          { label: "val max", color: "--nnx-accent", hidden: true, show: false },
          { label: "val min", color: "--nnx-accent", hidden: true, show: false },
        ],
    bands: race ? [] : [{ upper: 2, lower: 3, fill: "--nnx-band" }],
    ...AXES,
    onCursor: (idx) => v._epochReadout(idx),
  });
  v.lrChart = new Chart(v.lrFig, {
    title: race ? "Learning rate per step of each run" : "Learning rate per step",
    xLabel: "step",
    yLabel: "lr",
    height: 180,
    series: race ? raceLrSpecs(raceLrLines(lanes, found ? found.lrs : null)) : lrSeries(parts),
    ...AXES,
    sync: v._syncKey,
    onCursor: (idx) => v._lossReadout(idx),
    onZoom: (range) => onZoom(v, v.lrChart, range),
  });
  const figs = [v.lossFig, v.epochFig, v.lrFig];
  v._charts().forEach((c, i) => {
    if (anchors[i] && anchors[i].parentNode === figs[i]) figs[i].insertBefore(c.plot.root, anchors[i]);
  });
  if (old) {
    v.lossChart.setLogY(v.logToggle.checked);
    if (v.windowSelect.value !== "all") setWindow(v, v.windowSelect.value);
  }
  v._markerKey = undefined; // markers go onto the new loss chart at the next header
}

/** Whether the positive values of these columns span more than LOG_LR_SPAN. */
function spansDecades(columns) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const col of columns) {
    for (let i = 0; i < col.length; i++) {
      const x = col[i];
      if (Number.isFinite(x) && x > 0) {
        if (x < lo) lo = x;
        if (x > hi) hi = x;
      }
    }
  }
  return lo > 0 && hi / lo > LOG_LR_SPAN;
}

/** The step series into the loss and lr charts (one run, or each run of a race). @param {MonitorView} v */
export function renderSteps(v) {
  if (v._lanes.length) {
    renderRaceSteps(v);
    return;
  }
  const s = v._stepsStore();
  if (!s) return;
  renderParts(v, s);
  const stacked = v.stackToggle.checked;
  const step = s.column("step");
  const loss = s.column("loss");
  v._smoothed = smoothLoss(loss, s.column("n"), smoothingFactor(v));
  // the min-max band only means something once steps are merged into buckets
  v.lossChart.showSeries([2, 3], s.width > 1);
  const terms = termColumns(s, v._parts, stacked);
  v.lossChart.setData(step, [loss, v._smoothed, s.column("loss:max"), s.column("loss:min"), ...terms]);
  const lrs = lrColumns(s, v._parts);
  v.lrChart.setData(step, lrs);
  v.lrChart.setLogY(spansDecades(lrs));
  v.lossFig.dataset.terms = v._parts.terms.map((t) => t.label).join(",");
  v.lossFig.dataset.stacked = stacked && v._parts.terms.length ? "true" : "";
  v.lrFig.dataset.lines = v._parts.lrs.map((t) => t.label).join(",");
  v.lossFig.dataset.points = String(s.length);
  v.lossFig.dataset.steps = String(s.total);
  v.lossFig.dataset.first = s.length ? String(s.column("first")[0]) : "";
  v.lossFig.dataset.width = String(s.width);
  renderMarks(v);
  renderNote(v);
}

/**
 * The terms and optimizers the store names: when they (or the stacked toggle) changed,
 * the charts are rebuilt with a line for each, and the legends say which is which.
 * @param {MonitorView} v
 */
function renderParts(v, store) {
  const parts = stepParts(store);
  const key = partsKey(parts, v.stackToggle.checked);
  if (key === v._partsKey) return;
  v._parts = parts;
  v._partsKey = key;
  makeCharts(v, []);
  v.lossLegend.replaceChildren(...legend(legendsShown(v).loss.map(domItem)).childNodes);
  showLrLegend(v);
  v.termsControl.hidden = parts.terms.length === 0;
}

function renderRaceSteps(v) {
  const stores = v._raceStores();
  const parts = raceParts(v._lanes, stores);
  const stacked = v.stackToggle.checked;
  const key = racePartsKey(v._lanes, parts, stacked);
  if (key !== v._racePartsKey) {
    // a run's first terms or optimizers (or the toggle): a dashed line per term in the
    // run's colour, an lr line per optimizer
    v._raceParts = parts;
    v._racePartsFor = lanesKey(v._lanes);
    v._racePartsKey = key;
    makeCharts(v, v._lanes);
    showLrLegend(v);
  }
  const named = parts.terms.flatMap((t, i) => t.map((x) => `${v._lanes[i].name} · ${x.label}`));
  v.termsControl.hidden = named.length === 0;
  v.lossFig.dataset.terms = named.join(",");
  v.lossFig.dataset.stacked = stacked && named.length ? "true" : "";
  const { loss, lr } = raceSteps(v._lanes, stores, smoothingFactor(v), parts, stacked);
  v._race = { loss, lr };
  v.lossChart.setData(loss.x, loss.ys);
  v.lrChart.setData(lr.x, lr.ys);
  v.lrChart.setLogY(spansDecades(lr.ys));
  v.lrFig.dataset.lines = lr.lines.map((l) => l.label).join(",");
  let total = 0;
  for (const lane of v._lanes) {
    const s = stores[laneSeries(lane).steps];
    if (s) total += s.total;
  }
  v.lossFig.dataset.runs = String(v._lanes.length);
  v.lossFig.dataset.points = String(loss.x.length);
  v.lossFig.dataset.steps = String(total);
  v.lossFig.dataset.first = loss.x.length ? String(loss.x[0]) : "";
  v.lossChart.setMarks([]);
  v.lrChart.setMarks([]);
  v.note.hidden = true;
}

/** A dashed mark at the step of each epoch's end, on the loss and lr charts. @param {MonitorView} v */
export function renderMarks(v) {
  const e = v.sync ? v.sync.stores.epochs : null;
  const marks = e ? Array.from(e.column("step")) : [];
  v.lossChart.setMarks(marks);
  v.lrChart.setMarks(marks);
}

/** What merging steps into buckets (and epochs into rows) did to what is drawn. */
function renderNote(v) {
  const s = v._stepsStore();
  const e = v.sync.stores.epochs;
  const parts = [];
  if (s.width > 1) {
    parts.push(
      `The ${fmtInt(s.total)} steps are shown in ${fmtInt(s.length)} buckets of up to ${fmtInt(s.width)} steps ` +
        "(line: mean; band: lowest to highest).",
    );
  }
  if (e.width > 1) parts.push(`The ${fmtInt(e.total)} epochs are merged in rows of up to ${fmtInt(e.width)}.`);
  if (parts.length) parts.push("The run's metrics.jsonl keeps every step and epoch.");
  v.note.textContent = parts.join(" ");
  v.note.hidden = parts.length === 0;
}
