// TrainingMonitor's view: the header (header.js), the toolbar (toolbar.js), the loss,
// epoch and learning-rate charts (charts.js) with hover readouts (readouts.js), the
// paged epoch table (epochs.js), a race of several runs (race.js) and the exports
// (export.js); a composite loss's terms and each optimizer's lr (terms.js). The state lives in the kernel: the view says hello and receives the
// series (shared/transport.js); this class wires the traits to what they redraw.
import { h } from "../shared/dom.js";
import { PagedTable } from "../shared/table.js";
import { SeriesView } from "../shared/series_view.js";
import { buildCharts, makeCharts, renderSteps, showLrLegend } from "./charts.js";
import { epochReadout, lossReadout } from "./readouts.js";
import { composePng, maybeSnapshot } from "./export.js";
import { renderEpochs } from "./epochs.js";
import { buildHeader, renderHeader } from "./header.js";
import { buildFigures, onFigureMessage, renderFigures } from "./figures.js";
import { buildHealth, renderHealth } from "./health.js";
import { RaceTable, isLaneSeries, laneColor, laneSeries, lanesKey } from "./race.js";
import { setYTitle, taskView } from "./task.js";
import { onReportMessage, renderReport } from "./report.js";
import { buildToolbar, onSmoothingTrait, setLog } from "./toolbar.js";

/** @typedef {import("../shared/view.js").Model} Model */

/** Model trait names whose change refreshes the header. */
const HEADER_TRAITS = [
  "status", "stop_reason", "run_id", "epoch", "n_epochs", "step", "total_steps", "samples_per_sec",
  "elapsed", "eta", "can_stop", "from_log", "last_loss", "last_finite_loss", "last_finite_step",
  "loss_nonfinite_since", "loss_nonfinite_steps", "runs_root",
];

export class MonitorView extends SeriesView {
  /** @param {Model} model @param {HTMLElement} el */
  constructor(model, el) {
    super(model, el);
    /** @type {import("./race.js").Lane[]} the runs of a race; none: one run */
    this._lanes = [];
    this._lanesKey = "";
    /** the series changed since the last frame */
    this._dirty = new Set();
    this._frames = this._frameScheduler(() => this._redraw());
    this._lastSnapshotAt = Date.now(); // the first picture of a running run after a minute
    this._build();
    this._onDispose(() => {
      clearTimeout(this._smoothingTimer);
      for (const c of this._charts()) c.destroy();
    });
    this._connect({ series: ["steps", "epochs"], accept: isLaneSeries, onChange: (names) => this._schedule(names) });
    for (const name of HEADER_TRAITS) this._on(`change:${name}`, () => this._header());
    this._on("change:error", () => this._error());
    this._on("change:status", () => this._renderEpochs()); // "no epoch yet" or "no epoch ended"
    this._on("change:smoothing", () => onSmoothingTrait(this));
    for (const name of ["task_kind", "monitor_metric", "monitor_mode"]) this._on(`change:${name}`, () => this._onTask());
    this._on("change:runs", () => this._onRuns());
    this._on("change:figures", () => renderFigures(this));
    this._on("change:health", () => renderHealth(this));
    this._on("msg:custom", (msg, buffers) => onFigureMessage(this, msg, buffers));
    this._on("msg:custom", (msg) => onReportMessage(this, msg));
    this._onRuns();
    this._header();
    onSmoothingTrait(this);
    this._renderSteps();
    this._onTask();
    this.sync.hello();
    renderFigures(this);
    renderHealth(this);
  }

  _build() {
    this._makeRoot("nnx-monitor", "Training monitor");
    const header = buildHeader(this);
    const toolbar = buildToolbar(this);
    this.raceTable = new RaceTable();
    this.raceTable.root.hidden = true;
    this.root.append(header, this.nonfinite, this.raceTable.root, toolbar);
    buildCharts(this, this.root);
    buildFigures(this, this.root.querySelector(".nnx-charts"));
    buildHealth(this, this.root.querySelector(".nnx-charts"));
    this.note = h("p", { class: "nnx-note", "data-testid": "note" });
    this.note.hidden = true;
    this.table = new PagedTable({ label: "Per-epoch metrics", pageSize: 20 });
    // each chart follows a theme switch itself (shared/chart.js)
    this.root.append(this.note, this.table.root, this._makeError());
  }

  _charts() {
    return [this.lossChart, this.epochChart, this.lrChart];
  }

  /** The run's task and monitor: the loss axis title and the epoch chart's first metric. */
  _onTask() {
    setYTitle(this.lossChart, taskView(this.model.get("task_kind") || "").loss);
    this._metricChosen = false; // a new run: open on its monitored (or task's) metric
    this._renderEpochs();
  }

  /** The kernel's list of runs changed: switch mode or rebuild the charts when the
   * runs themselves changed, then redraw (statuses and counters change every flush). */
  _onRuns() {
    const lanes = this.model.get("runs") || [];
    const key = lanesKey(lanes);
    if (key !== this._lanesKey) {
      const keep = new Set(lanes.flatMap((l) => Object.values(laneSeries(l))));
      for (const name of Object.keys(this.sync.stores)) if (isLaneSeries(name) && !keep.has(name)) this.sync.drop(name);
      this._lanesKey = key;
      this._lanes = lanes;
      makeCharts(this, lanes);
      const race = lanes.length > 0;
      this.root.dataset.mode = race ? "race" : "run";
      this.raceTable.root.hidden = !race;
      this.lossLegend.hidden = race;
      this.termsControl.hidden = race || this._parts.terms.length === 0;
      showLrLegend(this); // a race's optimizers once renderSteps finds them, or the run's
      this.epochLegend.hidden = race;
      this.raceLegend.hidden = !race;
      this.raceLegend.replaceChildren(
        ...lanes.map((l, i) => {
          const swatch = h("span", { class: "nnx-swatch" });
          swatch.style.borderColor = laneColor(i);
          return h("span", { class: "nnx-legend-item", "data-run": l.name }, [swatch, l.name]);
        }),
      );
      this.lossCaption.textContent = race ? "Training loss per step of each run (smoothed)" : "Training loss per step";
      this._renderSteps();
    }
    this._lanes = lanes;
    this._renderEpochs();
    this._header();
  }

  // ------------------------------------------------------------------ redraws

  /** Redraw what these series feed at the next frame, then the header. */
  _schedule(names) {
    for (const n of names) this._dirty.add(n);
    this._frames.schedule();
  }

  _redraw() {
    const dirty = this._dirty;
    this._dirty = new Set();
    const has = (kind) => [...dirty].some((n) => n === kind || n.endsWith(`.${kind}`));
    if (has("steps")) this._renderSteps();
    if (has("epochs")) this._renderEpochs();
    this._header();
  }

  _header() {
    renderHeader(this);
    renderReport(this);
    maybeSnapshot(this);
  }

  _renderSteps() {
    renderSteps(this);
  }

  _renderEpochs() {
    renderEpochs(this);
  }

  _lossReadout(idx) {
    lossReadout(this, idx);
  }

  _epochReadout(idx) {
    epochReadout(this, idx);
  }

  _setLog(on) {
    setLog(this, on);
  }

  /** The three charts on one canvas, as on screen (export.js). */
  composePng() {
    return composePng(this);
  }

  _stepsStore() {
    return this.sync ? this.sync.stores.steps : null;
  }

  _raceStores() {
    return this.sync ? this.sync.stores : {};
  }
}
