// Comparing runs: their curves overlaid (one colour per run) on the x axis the user
// picks (step, relative or wall time, epoch, or each run's fraction of itself:
// compare_axes.js), and how their configurations differ (the run.yaml values that
// differ, marked where they change the run id; the server computes it with
// nnx_lab.plans.compare_records), in a table that scrolls sideways with its first
// column kept in view. Running runs are followed live, as in a run's panel.
import { smoothLoss } from "../monitor/smoothing.js";
import { Chart } from "../shared/chart.js";
import { h, legend } from "../shared/dom.js";
import { fmtValue } from "../shared/format.js";
import { stepTicks, valueTicks } from "../shared/ticks.js";
import { metricTitle, setYTitle } from "../monitor/task.js";
import { AXES, axisFormat, stepsToX } from "./compare_axes.js";
import { shownValue } from "./format_lab.js";
import { RunFollower } from "./run_follow.js";

/** One colour per run, told apart in light and dark themes. */
export const RUN_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

/**
 * Several series on one shared x: the union of their x values (ascending), each
 * series NaN where it has no point. Every input's x is ascending.
 * @param {{x: ArrayLike<number>, y: ArrayLike<number>}[]} list
 * @returns {{x: Float64Array, ys: Float64Array[]}}
 */
export function alignOnX(list) {
  let total = 0;
  for (const s of list) total += s.x.length;
  const all = new Float64Array(total);
  let k = 0;
  for (const s of list) for (let i = 0; i < s.x.length; i++) all[k++] = s.x[i];
  all.sort();
  let n = 0;
  for (let i = 0; i < all.length; i++) if (i === 0 || all[i] !== all[i - 1]) all[n++] = all[i];
  const x = all.slice(0, n);
  const ys = list.map((s) => {
    const y = new Float64Array(n).fill(NaN);
    let j = 0;
    for (let i = 0; i < s.x.length; i++) {
      while (j < n && x[j] < s.x[i]) j++;
      if (j < n && x[j] === s.x[i]) y[j] = s.y[i];
    }
    return y;
  });
  return { x, ys };
}

/** The metrics of the epoch series of several runs, validation ones first. */
export function epochMetrics(seriesList) {
  const val = new Set();
  const train = new Set();
  for (const e of seriesList) {
    for (const f of e.fields) {
      if (f.includes(":")) continue;
      if (f.startsWith("val.")) val.add(f);
      else if (f.startsWith("train.")) train.add(f);
    }
  }
  return [...val, ...train];
}

/**
 * The rows of the differences table.
 * @param {{rows: any[]}} report  the server's compare answer
 */
export function diffRows(report) {
  return (report.rows || []).map((r) => ({
    what: String(r.what),
    values: (r.values || []).map((v, i) => shownValue(v, Boolean(r.absent && r.absent[i]))),
    changesId: r.changes_run_id === true ? "yes" : r.changes_run_id === null ? "depends" : "no",
    action: r.action || "",
  }));
}

/** What a run is called in the panel: its name, else the start of its id. */
export function runName(r) {
  return typeof r.name === "string" && r.name ? r.name : String(r.runId).slice(0, 8);
}

/** A series without the points its x is unknown for (a time axis of a log without times). */
function finiteX(s) {
  let n = 0;
  for (let i = 0; i < s.x.length; i++) if (Number.isFinite(s.x[i])) n++;
  if (n === s.x.length) return s;
  const x = new Float64Array(n);
  const y = new Float64Array(n);
  let k = 0;
  for (let i = 0; i < s.x.length; i++) {
    if (!Number.isFinite(s.x[i])) continue;
    x[k] = s.x[i];
    y[k++] = s.y[i];
  }
  return { x, y };
}

export class CompareView {
  /**
   * @param {HTMLElement} host
   * @param {{api: import("./api.js").RunsApi, runs: {folder: string, runId: string, label?: string}[],
   *   pollMs?: number}} opts
   */
  constructor(host, { api, runs, pollMs }) {
    this.api = api;
    this.runs = runs.map((r, i) => ({ ...r, color: RUN_COLORS[i % RUN_COLORS.length], shown: runName(r) }));
    this.axis = "step";
    this.node = h("div", { class: "nnx-compare", "data-testid": "compare-panel" });
    host.append(this.node);
    this._frame = 0;
    this._build();
    this.followers = this.runs.map(
      (r) =>
        new RunFollower(api, r.folder, r.runId, {
          pollMs,
          maxPoints: 4000,
          onUpdate: () => this._schedule(),
        }),
    );
    for (const f of this.followers) f.start();
    this._loadDiff();
  }

  _build() {
    const title = h("div", { class: "nnx-compare-title" }, [h("span", { class: "nnx-label", text: `Comparing ${this.runs.length} runs` })]);
    this.legend = legend(this.runs.map((r) => [`${r.shown}${r.label ? ` (${r.label})` : ""}`, r.color]));
    this.legend.dataset.testid = "compare-legend";
    this.smoothing = h("input", { type: "range", min: "0", max: "0.99", step: "0.01", value: "0.6", "aria-label": "Smoothing factor", "data-testid": "compare-smoothing" });
    this.smoothing.addEventListener("input", () => this._render());
    this.metricSelect = h("select", { class: "nnx-input", "aria-label": "Per-epoch metric", "data-testid": "compare-metric" });
    this.metricSelect.addEventListener("change", () => this._render());
    this.axisSelect = h("select", { class: "nnx-input", "aria-label": "The charts' x axis", "data-testid": "compare-x" }, AXES.map((a) => h("option", { value: a.key, text: a.label })));
    this.axisSelect.addEventListener("change", () => this.setAxis(this.axisSelect.value));
    const toolbar = h("div", { class: "nnx-toolbar" }, [
      h("label", {}, ["x axis: ", this.axisSelect]),
      h("label", { class: "nnx-range" }, ["smoothing", this.smoothing]),
      h("label", {}, ["per epoch: ", this.metricSelect]),
    ]);
    this.lossCaption = h("figcaption", { text: "Training loss (smoothed)" });
    this.epochCaption = h("figcaption", { text: "Per epoch" });
    this.lossFig = h("figure", { class: "nnx-chart nnx-chart-wide", "data-testid": "compare-loss-chart" }, [this.lossCaption]);
    this.epochFig = h("figure", { class: "nnx-chart nnx-chart-wide", "data-testid": "compare-epoch-chart" }, [this.epochCaption]);
    this.status = h("div", { class: "nnx-compare-status", "data-testid": "compare-status" });
    this.diffNote = h("p", { class: "nnx-note", "data-testid": "compare-note" });
    this.diffTable = h("table", { class: "nnx-table nnx-compare-diff", "data-testid": "compare-diff" });
    // a third run's column is never off-screen: the table scrolls, its first column stays
    this.diffWrap = h("div", { class: "nnx-compare-diff-wrap", "data-testid": "compare-diff-scroll" }, [this.diffTable]);
    this.error = h("pre", { class: "nnx-error", role: "alert", "data-testid": "compare-error" });
    this.error.hidden = true;
    const charts = h("div", { class: "nnx-charts nnx-compare-charts" }, [this.lossFig, this.epochFig]);
    this.node.append(
      title,
      this.legend,
      this.status,
      toolbar,
      charts,
      h("h3", { class: "nnx-compare-h", text: "How the configurations differ" }),
      this.diffNote,
      this.diffWrap,
      this.error,
    );
    this._makeCharts();
  }

  /** The two charts, on the current x axis (made again when it changes). */
  _makeCharts() {
    const { label, format } = axisFormat(this.axis);
    const series = this.runs.map((r) => ({ label: r.shown, color: r.color, width: 2, spanGaps: true }));
    // one label format per axis; a step axis counts whole steps (the other axes are
    // times and fractions, labelled by their own format)
    const steps = this.axis === "step";
    const ticks = { yTicks: valueTicks, ...(steps ? { xTicks: stepTicks, xInteger: true } : {}) };
    this.lossChart = new Chart(this.lossFig, {
      title: `Training loss of each run by ${label}`,
      xLabel: label,
      yLabel: "loss",
      height: 240,
      series: series.map((s) => ({ ...s })),
      xFormat: format,
      yFormat: fmtValue,
      ...ticks,
    });
    const epochs = this.axis === "epoch" ? { xTicks: stepTicks, xInteger: true } : {};
    this.epochChart = new Chart(this.epochFig, {
      title: `Per-epoch metric of each run by ${label}`,
      xLabel: label,
      yLabel: metricTitle(this.metricSelect.value),
      height: 200,
      series: series.map((s) => ({ ...s, points: true })),
      xFormat: format,
      yFormat: fmtValue,
      ...ticks,
      ...epochs,
    });
    this.lossCaption.textContent = `Training loss (smoothed) by ${label}`;
    this.epochCaption.textContent = `Per epoch, by ${label}`;
    this.lossFig.dataset.axis = this.axis;
    this.epochFig.dataset.axis = this.axis;
  }

  /** Draw both charts on another x axis (a key of AXES). */
  setAxis(axis) {
    if (!AXES.some((a) => a.key === axis) || axis === this.axis) return;
    this.axis = axis;
    this.axisSelect.value = axis;
    this.lossChart.destroy();
    this.epochChart.destroy();
    this._makeCharts();
    this._render();
  }

  async _loadDiff() {
    try {
      const report = await this.api.compare(this.runs);
      this.report = report;
      this._renderDiff();
    } catch (err) {
      this.error.textContent = `The configurations could not be compared: ${err && err.message ? err.message : err}`;
      this.error.hidden = false;
    }
  }

  _renderDiff() {
    const rows = diffRows(this.report);
    const head = h("tr", {}, [
      h("th", { text: "value" }),
      ...this.runs.map((r) => {
        const th = h("th", { title: `run ${r.runId}` }, [h("span", { class: "nnx-swatch" }), r.shown]);
        th.firstChild.style.borderColor = r.color;
        return th;
      }),
      h("th", { text: "changes the run id" }),
    ]);
    const body = rows.map((row) => {
      const tr = h("tr", { "data-testid": "diff-row" }, [
        h("td", {}, [h("code", { text: row.what })]),
        ...row.values.map((v) => h("td", { class: "nnx-num", text: v, title: v })),
        h("td", { text: row.changesId === "yes" ? "★ changes the id" : row.changesId === "depends" ? "depends" : "no", title: row.action }),
      ]);
      tr.dataset.what = row.what;
      tr.dataset.changesId = row.changesId;
      if (row.changesId === "yes") tr.classList.add("nnx-changes-id");
      return tr;
    });
    this.diffTable.replaceChildren(h("thead", {}, [head]), h("tbody", {}, body));
    const unchanged = this.report.unchanged || 0;
    this.diffNote.textContent = rows.length
      ? `${rows.length} values differ (${unchanged} are the same); ★ marks a value that enters the run id.`
      : `The configurations are the same (${unchanged} values compared).`;
  }

  _schedule() {
    if (this._frame) return;
    const run = () => {
      this._frame = 0;
      this._render();
    };
    this._frame = typeof requestAnimationFrame === "function" ? requestAnimationFrame(run) : (setTimeout(run, 0), 1);
  }

  _render() {
    const states = this.followers.map((f) => f.state);
    const a = Number(this.smoothing.value) || 0;
    const infos = states.map((s) => s.axisInfo());
    const loss = alignOnX(
      states.map((s, i) => ({ x: stepsToX(this.axis, s.steps.column("step"), infos[i]), y: smoothLoss(s.steps.column("loss"), s.steps.column("n"), a) })).map(finiteX),
    );
    this.lossChart.setData(loss.x, loss.ys);
    const metrics = epochMetrics(states.map((s) => s.epochs));
    const have = [...this.metricSelect.options].map((o) => o.value).join("|");
    const current = this.metricSelect.value || (metrics.includes("val.loss") ? "val.loss" : metrics[0] || "");
    if (have !== metrics.join("|")) this.metricSelect.replaceChildren(...metrics.map((m) => h("option", { value: m, text: m })));
    if (metrics.includes(current)) this.metricSelect.value = current;
    const metric = this.metricSelect.value;
    const epochs = alignOnX(
      states
        .map((s, i) => ({
          x: this.axis === "epoch" ? s.epochs.column("epoch") : stepsToX(this.axis, s.epochs.column("step"), infos[i]),
          y: s.epochs.has(metric) ? s.epochs.column(metric) : new Float64Array(s.epochs.length).fill(NaN),
        }))
        .map(finiteX),
    );
    setYTitle(this.epochChart, metricTitle(metric)); // the axis says which metric
    this.epochChart.setData(epochs.x, epochs.ys);
    this.lossFig.dataset.points = String(loss.x.length);
    this.lossFig.dataset.xMax = loss.x.length ? String(loss.x[loss.x.length - 1]) : "";
    this.epochFig.dataset.metric = metric;
    const parts = this.followers.map((f, i) => {
      const t = f.state.traits;
      return `${this.runs[i].shown}: ${t.status}, step ${t.step}${f.problem ? ` (${f.problem})` : ""}`;
    });
    this.status.textContent = parts.join(" · ");
  }

  dispose() {
    for (const f of this.followers) f.dispose();
    if (this._frame && typeof cancelAnimationFrame === "function") cancelAnimationFrame(this._frame);
    this.lossChart.destroy();
    this.epochChart.destroy();
    this.node.remove();
  }
}
