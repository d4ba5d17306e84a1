// The monitor's epochs: the metric picker, the per-epoch chart (validation against
// training) and the paged table of every epoch's metrics; in a race, one line and one
// runs-table row per run.
import { h } from "../shared/dom.js";
import { fmtDuration, fmtInt, fmtValue } from "../shared/format.js";
import { raceEpochs, raceMetrics } from "./race.js";
import { firstMetric, metricTitle, monitorColumn, setYTitle, trainColumns } from "./task.js";
import { renderMarks } from "./charts.js";
import { TERMINAL } from "./header.js";

/** @typedef {import("./view.js").MonitorView} MonitorView */

/** "1.234" for one step, "1,201–1,232" for a bucket of steps. */
export function fmtRange(first, last) {
  return first === last ? fmtInt(last) : `${fmtInt(first)}–${fmtInt(last)}`;
}

/** Whether a column holds any finite value. */
function hasValue(store, name) {
  const c = store.column(name);
  for (let i = 0; i < c.length; i++) if (Number.isFinite(c[i])) return true;
  return false;
}

/**
 * Metric names in the epoch series: validation ones first, then training ones. A metric
 * the run's task does not compute (a regression's accuracy: every value missing) is
 * left out; the loss and the monitored metric stay, a missing value there says something.
 * @param {MonitorView} v
 */
export function epochMetrics(v) {
  const e = v.sync.stores.epochs;
  const monitored = v.model.get("monitor_metric") || "";
  const kept = (f) => f.endsWith(".loss") || f === monitored || hasValue(e, f);
  const val = [];
  const train = [];
  for (const f of e.fields) {
    if (f.includes(":") || !kept(f)) continue;
    if (f.startsWith("val.")) val.push(f.slice(4));
    else if (f.startsWith("train.")) train.push(f.slice(6));
  }
  return { val, train, all: [...new Set([...val, ...train])] };
}

/** The picker offers `all`; it keeps `current` where it can; with none, it says so. */
function offerMetrics(select, all, current) {
  const have = [...select.options].map((o) => o.value).join("|");
  if (!all.length) {
    if (select.options.length !== 1 || have !== "") select.replaceChildren(h("option", { value: "", text: "no epoch yet" }));
    select.disabled = true;
    return;
  }
  select.disabled = false;
  if (have !== all.join("|")) select.replaceChildren(...all.map((n) => h("option", { value: n, text: n })));
  if (all.includes(current)) select.value = current;
}

/**
 * No epoch has ended (a run that failed at step 7, or one in its first epoch): the
 * epoch chart says so over its empty axes.
 * @param {MonitorView} v @param {number} epochs rows held
 */
function renderEmpty(v, epochs) {
  const st = v.model.get("status") || "";
  const ended = TERMINAL.has(st);
  v.epochEmpty.textContent = ended
    ? `No epoch ended: the run ${st === "interrupted" ? "was interrupted" : st} before the end of its first epoch.`
    : "No epoch has ended yet: the metrics of each epoch appear here as it ends.";
  v.epochEmpty.hidden = epochs > 0;
  v.epochFig.dataset.empty = epochs > 0 ? "" : "true";
}

/** The epoch series into the chart and the table (one run, or each run of a race). @param {MonitorView} v */
export function renderEpochs(v) {
  if (!v.sync) return;
  if (v._lanes.length) {
    renderRaceEpochs(v);
    return;
  }
  const { val, all } = epochMetrics(v);
  const m = v.model;
  const opening = firstMetric(m.get("task_kind") || "", m.get("monitor_metric") || "", all);
  offerMetrics(v.metricSelect, all, (v._metricChosen && v.metricSelect.value) || opening);
  renderEmpty(v, v.sync.stores.epochs.length);
  renderEpochChart(v);
  renderTable(v, val);
  renderMarks(v);
}

function renderRaceEpochs(v) {
  const stores = v._raceStores();
  const { all } = raceMetrics(v._lanes, stores);
  offerMetrics(v.metricSelect, all, v.metricSelect.value || (all.includes("loss") ? "loss" : all[0] || ""));
  const metric = all.length ? v.metricSelect.value : "";
  const data = raceEpochs(v._lanes, stores, metric);
  v._raceEpochData = data;
  renderEmpty(v, data.x.length);
  // one split per run is drawn: the axis names it ("val loss")
  setYTitle(v.epochChart, metric ? `${data.split} ${metricTitle(metric)}` : "value");
  v.epochChart.setData(data.x, data.ys);
  v.epochFig.dataset.split = data.split;
  v.raceTable.render(v._lanes, stores, metric, data.split);
  v.table.root.hidden = true;
}

function renderEpochChart(v) {
  const e = v.sync.stores.epochs;
  const metric = v.metricSelect.value;
  const col = (name) => (e.has(name) ? e.column(name) : new Float32Array(e.length).fill(NaN));
  const x = e.column("epoch");
  setYTitle(v.epochChart, metricTitle(metric));
  v.epochChart.showSeries([2, 3], e.width > 1);
  v.epochChart.setData(x, [col(`val.${metric}`), col(`train.${metric}`), col(`val.${metric}:max`), col(`val.${metric}:min`)]);
}

/** The loss terms' epoch columns (train.<term>, or train.term.<term> when the name is a
 * field's), in the order the step series names them. */
function termColumns(v, e, value, spread) {
  const parts = v._parts ? v._parts.terms : [];
  const names = parts.map((t) => t.key.slice(t.key.indexOf(".") + 1));
  return names
    .map((n) => (e.has(`train.term.${n}`) ? `train.term.${n}` : `train.${n}`))
    .filter((key, i, all) => e.has(key) && all.indexOf(key) === i)
    .map((key) => ({ key, label: `train ${key.slice(6)}`, cell: value(key), title: spread(key) }));
}

function renderTable(v, valNames) {
  const e = v.sync.stores.epochs;
  const first = e.column("first");
  const epoch = e.column("epoch");
  const step = e.column("step");
  const lr = e.column("lr");
  const seconds = e.column("seconds");
  const improved = e.column("improved");
  const value = (name) => {
    const c = e.has(name) ? e.column(name) : null;
    return (i) => (c ? fmtValue(c[i]) : "–");
  };
  const spread = (name) => {
    const lo = e.has(`${name}:min`) ? e.column(`${name}:min`) : null;
    const hi = e.has(`${name}:max`) ? e.column(`${name}:max`) : null;
    return (i) => (lo && hi && first[i] !== epoch[i] ? `mean of epochs ${fmtRange(first[i], epoch[i])}; ${fmtValue(lo[i])} to ${fmtValue(hi[i])}` : null);
  };
  const m = v.model;
  /** @type {import("../shared/table.js").Column[]} */
  const columns = [
    // the epoch stays in view when the table scrolls sideways (monitor.css .nnx-sticky)
    { key: "epoch", label: "epoch", cell: (i) => `${fmtRange(first[i], epoch[i])}${improved[i] ? " ★" : ""}`, className: "nnx-nowrap nnx-sticky" },
    { key: "step", label: "step", cell: (i) => fmtInt(step[i]) },
    ...trainColumns(m.get("task_kind") || "", e, value, spread),
    ...termColumns(v, e, value, spread),
    ...valNames.map((n) => ({ key: `val.${n}`, label: `val ${n}`, cell: value(`val.${n}`), title: spread(`val.${n}`) })),
    ...[monitorColumn(e, m.get("monitor_metric") || "", m.get("monitor_mode") || "")].filter(Boolean).map((c) => ({ ...c, className: "nnx-nowrap" })),
    { key: "lr", label: "lr", cell: (i) => fmtValue(lr[i]), className: "nnx-nowrap" },
    { key: "time", label: "time", cell: (i) => fmtDuration(seconds[i]), className: "nnx-nowrap" },
  ];
  v.table.rowAttrs = (i) => (improved[i] ? { class: "nnx-best", title: "became BEST" } : {});
  v.table.setRows(columns, e.length);
}
