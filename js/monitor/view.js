// TrainingMonitor's view: header (run, status, reason, non-finite warning, counters,
// Stop), a toolbar (log scale, window, smoothing, zoom reset, exports), the loss, epoch
// and learning-rate charts with hover readouts, and the paged epoch table. The state
// lives in the kernel: the view says hello and receives the series (shared/transport).
import { Chart } from "../shared/chart.js";
import { download, h, legend, toCSV } from "../shared/dom.js";
import { fmtDuration, fmtInt, fmtRate, fmtStep, fmtValue } from "../shared/format.js";
import { SNAPSHOT_PNG, STOP } from "../shared/protocol.js";
import { PagedTable } from "../shared/table.js";
import { ViewSync } from "../shared/transport.js";
import {
  RaceTable,
  isLaneSeries,
  laneColor,
  laneSeries,
  laneSpecs,
  lanesKey,
  raceEpochs,
  raceMetrics,
  raceSteps,
  raceSummary,
} from "./race.js";
import { smoothLoss } from "./smoothing.js";

/**
 * The part of an anywidget model this view uses.
 * @typedef {{get(name: string): any, set(name: string, value: any): void,
 *   on(event: string, cb: Function): void, off(event: string, cb?: Function): void,
 *   save_changes(): void, send(content: any, callbacks?: any, buffers?: any[]): void}} Model
 */

const TERMINAL = new Set(["finished", "stopped", "failed", "interrupted"]);
const STAT_KEYS = ["epoch", "step", "throughput", "elapsed", "eta", "loss"];
const STAT_LABELS = { epoch: "Epoch", step: "Step", throughput: "Samples/s", elapsed: "Elapsed", eta: "ETA", loss: "Loss" };
const WINDOWS = [
  ["all", "all steps"],
  ["100", "last 100 steps"],
  ["1000", "last 1,000 steps"],
  ["10000", "last 10,000 steps"],
];
const SNAPSHOT_EVERY_MS = 60_000; // a picture for the notebook while a run goes on
const STOP_TITLE = "Stop training after the current step (writes the LAST checkpoint)";
// The JupyterLab extension (js/lab) marks <body> and listens for this event: the link
// to open the run in a panel of its own shows only where someone will answer it.
const OPEN_EVENT = "nnx-lab:open-run";

/** "1.234" for one step, "1,201–1,232" for a bucket of steps. */
function fmtRange(first, last) {
  return first === last ? fmtInt(last) : `${fmtInt(first)}–${fmtInt(last)}`;
}

/** Model trait names whose change refreshes the header. */
const HEADER_TRAITS = [
  "status", "stop_reason", "run_id", "epoch", "n_epochs", "step", "total_steps", "samples_per_sec",
  "elapsed", "eta", "can_stop", "from_log", "last_loss", "last_finite_loss", "last_finite_step",
  "loss_nonfinite_since", "loss_nonfinite_steps", "runs_root",
];

export class MonitorView {
  /** @param {Model} model @param {HTMLElement} el */
  constructor(model, el) {
    this.model = model;
    this.el = el;
    /** @type {Array<[string, Function]>} */
    this._listeners = [];
    this._frame = 0;
    this._dirty = new Set();
    this._snapshotTimer = null;
    this._lastSnapshotAt = Date.now(); // the first picture of a running run after a minute
    this._build();
    this.sync = new ViewSync(model, {
      series: ["steps", "epochs"],
      accept: isLaneSeries,
      onChange: (names) => {
        if (this._syncError) {
          this._syncError = "";
          this._error();
        }
        this._schedule(names);
      },
      onError: (text) => {
        this._syncError = text;
        this._error();
      },
    });
    this._on("msg:custom", (msg, buffers) => this.sync.handle(msg, buffers));
    for (const name of HEADER_TRAITS) this._on(`change:${name}`, () => this._header());
    this._on("change:error", () => this._error());
    this._on("change:smoothing", () => this._onSmoothingTrait());
    this._on("change:runs", () => this._onRuns());
    /** @type {import("./race.js").Lane[]} */
    this._lanes = [];
    this._lanesKey = "";
    this._onRuns();
    this._header();
    this._error();
    this._onSmoothingTrait();
    this._renderSteps();
    this._renderEpochs();
    this.sync.hello();
  }

  _on(event, cb) {
    this.model.on(event, cb);
    this._listeners.push([event, cb]);
  }

  // ------------------------------------------------------------------ DOM

  _build() {
    // In the page from the start: the charts size themselves from their container.
    this.root = h("div", { class: "nnx-monitor", role: "region", "aria-label": "Training monitor" });
    const charts = h("div", { class: "nnx-charts" });
    this.el.append(this.root);
    const stopButton = h("button", { type: "button", class: "nnx-button", "data-testid": "stop", text: "Stop" });
    stopButton.addEventListener("click", () => this._stop());
    this.stopButton = stopButton;
    this.runId = h("code", { class: "nnx-run-id", "data-testid": "run-id" });
    this.status = h("span", { class: "nnx-status", "data-testid": "status", role: "status" });
    this.reason = h("span", { class: "nnx-reason", "data-testid": "reason" });
    this.nonfinite = h("span", { class: "nnx-nonfinite", "data-testid": "nonfinite", role: "alert" });
    this.openLink = h("button", {
      type: "button",
      class: "nnx-tool nnx-open-panel",
      "data-testid": "open-in-panel",
      title: "Open this run in a JupyterLab panel of its own (nnx-lab runs), which follows it without this kernel",
      text: "Open in panel",
    });
    this.openLink.hidden = true;
    this.openLink.addEventListener("click", () => this._openInPanel());
    const stats = h("dl", { class: "nnx-stats" });
    /** @type {Record<string, HTMLElement>} */
    this.stat = {};
    for (const key of STAT_KEYS) {
      this.stat[key] = h("dd", { "data-testid": key, text: "–" });
      stats.append(h("div", { class: "nnx-stat" }, [h("dt", { text: STAT_LABELS[key] }), this.stat[key]]));
    }
    this.raceStatus = h("span", { class: "nnx-race-status", "data-testid": "race-status" });
    this.raceStatus.hidden = true;
    this.runTitle = h("div", { class: "nnx-title" }, [h("span", { class: "nnx-label", text: "Run" }), this.runId, this.status, this.reason, this.openLink]);
    this.stats = stats;
    const header = h("div", { class: "nnx-header" }, [this.raceStatus, this.runTitle, stats, stopButton]);

    // toolbar
    this.logToggle = h("input", { type: "checkbox", "data-testid": "log-toggle" });
    this.logToggle.addEventListener("change", () => this._setLog(this.logToggle.checked));
    this.windowSelect = h("select", { "data-testid": "window", "aria-label": "Steps shown" });
    for (const [value, label] of WINDOWS) this.windowSelect.append(h("option", { value, text: label }));
    this.windowSelect.addEventListener("change", () => this._setWindow(this.windowSelect.value));
    this.smoothing = h("input", { type: "range", min: "0", max: "0.99", step: "0.01", "data-testid": "smoothing", "aria-label": "Smoothing factor" });
    this.smoothingValue = h("output", { class: "nnx-smoothing-value", "data-testid": "smoothing-value" });
    this.smoothing.addEventListener("input", () => this._onSmoothingInput());
    this.resetZoom = h("button", { type: "button", class: "nnx-tool", "data-testid": "reset-zoom", title: "Show every step again (or double-click a chart)", text: "Reset zoom" });
    this.resetZoom.disabled = true;
    this.resetZoom.addEventListener("click", () => this._setWindow("all"));
    const tool = (label, testid, title, fn) => {
      const b = h("button", { type: "button", class: "nnx-tool", "data-testid": testid, title, text: label });
      b.addEventListener("click", fn);
      return b;
    };
    const toolbar = h("div", { class: "nnx-toolbar", role: "toolbar", "aria-label": "Chart options" }, [
      h("label", { class: "nnx-check", title: "Logarithmic loss axis" }, [this.logToggle, "log scale"]),
      this.windowSelect,
      h("label", { class: "nnx-range", title: "Smoothing of the loss line (EMA factor)" }, ["smoothing", this.smoothing, this.smoothingValue]),
      this.resetZoom,
      h("span", { class: "nnx-spacer" }),
      tool("PNG", "export-png", "Save the charts as a PNG picture", () => this._exportPng()),
      tool("CSV steps", "export-csv-steps", "Save the step series as CSV", () => this._exportCsv("steps")),
      tool("CSV epochs", "export-csv-epochs", "Save the epoch series as CSV", () => this._exportCsv("epochs")),
    ]);

    // charts
    const readout = () => h("div", { class: "nnx-readout", "data-testid": "readout", "aria-live": "off" });
    this.lossFig = h("figure", { class: "nnx-chart nnx-chart-wide", "data-testid": "loss-chart", "data-points": "0" });
    this.lossCaption = h("figcaption", { text: "Training loss per step" });
    this.lossFig.append(this.lossCaption);
    this.epochFig = h("figure", { class: "nnx-chart", "data-testid": "epoch-chart" });
    this.lrFig = h("figure", { class: "nnx-chart", "data-testid": "lr-chart" });
    charts.append(this.lossFig, this.epochFig, this.lrFig);
    this.raceTable = new RaceTable();
    this.raceTable.root.hidden = true;
    this.root.append(header, this.nonfinite, this.raceTable.root, toolbar, charts);
    this._syncKey = `nnx-steps-${Math.random().toString(36).slice(2)}`;
    this.lossReadout = readout();
    this.lossLegend = legend([
      ["loss", "var(--nnx-raw)"],
      ["smoothed", "var(--nnx-accent)"],
      ["epoch end", "var(--jp-border-color1, #bdbdbd)", "nnx-dashed"],
    ]);
    this.raceLegend = h("div", { class: "nnx-legend", "data-testid": "race-legend" });
    this.raceLegend.hidden = true;
    this.metricSelect = h("select", { "data-testid": "metric-select", "aria-label": "Per-epoch metric" });
    this.metricSelect.addEventListener("change", () => this._renderEpochs());
    this.epochCaption = h("label", { text: "Per epoch: " }, [this.metricSelect]);
    this.epochFig.append(h("figcaption", {}, [this.epochCaption]));
    this.epochReadout = readout();
    this.epochLegend = legend([
      ["validation", "var(--nnx-accent)"],
      ["training (epoch)", "var(--nnx-second)", "nnx-dashed"],
    ]);
    this.lrFig.append(h("figcaption", { text: "Learning rate" }));
    this.lrReadout = readout();
    this._makeCharts([]);
    this.lossFig.append(this.lossReadout, this.lossLegend, this.raceLegend);
    this.epochFig.append(this.epochReadout, this.epochLegend);
    this.lrFig.append(this.lrReadout);

    this.note = h("p", { class: "nnx-note", "data-testid": "note" });
    this.note.hidden = true;
    this.table = new PagedTable({ label: "Per-epoch metrics", pageSize: 20 });
    this.error = h("pre", { class: "nnx-error", "data-testid": "error", role: "alert" });
    this.error.hidden = true;
    this.root.append(this.note, this.table.root, this.error);

    // JupyterLab switches themes by changing attributes on <body>: redraw with its colours.
    this._themeObserver = null;
    if (typeof MutationObserver !== "undefined" && document.body) {
      this._themeObserver = new MutationObserver(() => {
        for (const c of this._charts()) c.refreshTheme();
        this._schedule(new Set(["steps", "epochs"]));
      });
      this._themeObserver.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-name", "data-jp-theme-light"] });
    }
  }

  _charts() {
    return [this.lossChart, this.epochChart, this.lrChart];
  }

  /**
   * The three charts: one run (raw and smoothed loss, validation and training per
   * epoch, lr) or, with `lanes`, one line per run of a race in its colour. A rebuild
   * keeps each chart where it was in its figure, and the toolbar's log scale and window.
   * @param {import("./race.js").Lane[]} lanes
   */
  _makeCharts(lanes) {
    const old = this.lossChart ? this._charts() : null;
    const anchors = old ? old.map((c) => (c.plot ? c.plot.root.nextSibling : null)) : [null, null, null];
    if (old) for (const c of old) c.destroy();
    const race = lanes.length > 0;
    const lossSeries = race
      ? laneSpecs(lanes)
      : [
          { label: "loss", color: "--nnx-raw", width: 1 },
          { label: "smoothed", color: "--nnx-accent", width: 2 },
          { label: "max", color: "--nnx-raw", hidden: true, show: false },
          { label: "min", color: "--nnx-raw", hidden: true, show: false },
        ];
    this.lossChart = new Chart(this.lossFig, {
      title: race ? "Training loss per step of each run, smoothed" : "Training loss per step, raw and smoothed",
      xLabel: "step",
      yLabel: "loss",
      height: 220,
      series: lossSeries,
      bands: race ? [] : [{ upper: 2, lower: 3, fill: "--nnx-band" }],
      xFormat: fmtStep,
      yFormat: fmtValue,
      sync: this._syncKey,
      onCursor: (idx) => this._lossReadout(idx),
      onZoom: (range) => this._onZoom(this.lossChart, range),
      // for browser tests and for anyone inspecting the page: what the axes show
      onDraw: (r) => {
        this.lossFig.dataset.xRange = r.x.map((v) => Number(v).toPrecision(6)).join(",");
        this.lossFig.dataset.yRange = r.y.map((v) => Number(v).toPrecision(6)).join(",");
      },
    });
    this.epochChart = new Chart(this.epochFig, {
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
      xFormat: fmtStep,
      yFormat: fmtValue,
      onCursor: (idx) => this._epochReadout(idx),
    });
    this.lrChart = new Chart(this.lrFig, {
      title: race ? "Learning rate per step of each run" : "Learning rate per step",
      xLabel: "step",
      yLabel: "lr",
      height: 180,
      series: race ? laneSpecs(lanes, { width: 1.5 }) : [{ label: "lr", color: "--nnx-second", width: 1.5 }],
      xFormat: fmtStep,
      yFormat: fmtValue,
      sync: this._syncKey,
      onCursor: (idx) => this._lossReadout(idx),
      onZoom: (range) => this._onZoom(this.lrChart, range),
    });
    const figs = [this.lossFig, this.epochFig, this.lrFig];
    this._charts().forEach((c, i) => {
      if (anchors[i] && anchors[i].parentNode === figs[i]) figs[i].insertBefore(c.plot.root, anchors[i]);
    });
    if (old) {
      this.lossChart.setLogY(this.logToggle.checked);
      if (this.windowSelect.value !== "all") this._setWindow(this.windowSelect.value);
    }
    this._markerKey = undefined; // markers go onto the new loss chart at the next header
  }

  // ------------------------------------------------------------------ header

  _header() {
    const m = this.model;
    const race = this._lanes.length > 0;
    // a comparison of finished runs has no current run: no run line, no counters
    const comparing = race && Boolean(m.get("from_log")) && !m.get("run_id");
    this.raceStatus.hidden = !race;
    this.raceStatus.textContent = race ? raceSummary(this._lanes, comparing) : "";
    this.runTitle.hidden = comparing;
    this.stats.hidden = comparing;
    const st = String(m.get("status") || "created");
    this.status.textContent = st;
    this.status.dataset.status = st;
    this.root.dataset.status = st;
    const reason = m.get("stop_reason") || "";
    this.reason.textContent = reason;
    this.reason.hidden = !reason;
    this.runId.textContent = m.get("run_id") || "–";
    this.runId.title = m.get("run_id") || "";
    this.openLink.hidden = !(m.get("run_id") && m.get("runs_root") && document.body && document.body.dataset.nnxLabRuns);
    const nEpochs = m.get("n_epochs");
    const epoch = m.get("epoch");
    this.stat.epoch.textContent = nEpochs ? `${fmtInt(epoch)} / ${fmtInt(nEpochs)}` : fmtInt(epoch);
    const total = m.get("total_steps");
    const step = m.get("step");
    this.stat.step.textContent = total ? `${fmtInt(step)} / ${fmtInt(total)}` : fmtInt(step);
    this.stat.throughput.textContent = fmtRate(m.get("samples_per_sec"));
    this.stat.elapsed.textContent = fmtDuration(m.get("elapsed"));
    this.stat.eta.textContent = TERMINAL.has(st) ? "–" : fmtDuration(m.get("eta"));

    // the loss: the latest value, or loudly that it is not finite
    const since = m.get("loss_nonfinite_since");
    const badSteps = m.get("loss_nonfinite_steps") || 0;
    const lastFinite = m.get("last_finite_loss");
    if (since !== null && since !== undefined) {
      const before = lastFinite === null || lastFinite === undefined ? "" : ` (last finite ${fmtValue(lastFinite)} at step ${fmtInt(m.get("last_finite_step"))})`;
      this.stat.loss.textContent = `non-finite${before}`;
      this.nonfinite.textContent = `⚠ loss non-finite since step ${fmtInt(since)}`;
      this.nonfinite.hidden = false;
      this.root.dataset.health = "nonfinite";
      this.lossFig.dataset.nonfiniteSince = String(since);
    } else {
      const last = m.get("last_loss");
      const ema = this._emaLast();
      this.stat.loss.textContent = last === null || last === undefined ? "–" : `${fmtValue(last)}${Number.isFinite(ema) ? ` (smoothed ${fmtValue(ema)})` : ""}`;
      this.nonfinite.textContent = badSteps ? `⚠ ${fmtInt(badSteps)} steps had a non-finite loss` : "";
      this.nonfinite.hidden = !badSteps;
      if (badSteps) this.root.dataset.health = "nonfinite";
      else delete this.root.dataset.health;
      delete this.lossFig.dataset.nonfiniteSince;
    }
    const markerKey = since === null || since === undefined ? "" : String(since);
    if (markerKey !== this._markerKey) {
      this._markerKey = markerKey;
      this.lossChart.setMarkers(
        markerKey ? [{ x: since, label: `loss non-finite since step ${fmtInt(since)}`, color: "--jp-error-color1" }] : [],
      );
    }

    // Stop: enabled only when a click can reach the loop; the tooltip says why not
    const canStop = Boolean(m.get("can_stop")) && (st === "running" || st === "created");
    const b = this.stopButton;
    b.disabled = !canStop;
    let title = STOP_TITLE;
    if (m.get("from_log")) title = "This run is read from its log: Stop reaches only runs started with monitor.fit(...) in this kernel";
    else if (TERMINAL.has(st)) title = `The run has ended (${st})`;
    else if (st === "stopping") title = "Stopping after the current step…";
    else if (st === "running" && !canStop) title = "Stop reaches only runs started with monitor.fit(...); interrupt the kernel to stop this one";
    else if (!canStop) title = "No run to stop yet";
    b.title = title;
    b.setAttribute("aria-label", title);
    b.textContent = st === "stopping" ? "Stopping…" : "Stop";
    b.setAttribute("aria-busy", st === "stopping" ? "true" : "false");
    this._maybeSnapshot();
  }

  _error() {
    // the kernel's error first; the view's own (the kernel out of reach) until it syncs
    const text = this.model.get("error") || this._syncError || "";
    this._showError(text);
  }

  _showError(text) {
    this.error.textContent = text;
    this.error.hidden = !text;
  }

  _stop() {
    this.stopButton.disabled = true;
    this.model.send({ kind: STOP });
  }

  _openInPanel() {
    const detail = { run_id: this.model.get("run_id"), runs_root: this.model.get("runs_root") };
    this.root.dispatchEvent(new CustomEvent(OPEN_EVENT, { bubbles: true, composed: true, detail }));
  }

  // ------------------------------------------------------------------ toolbar

  _setLog(on) {
    this.lossChart.setLogY(on);
    this.lossFig.dataset.log = on ? "y" : "";
    this._renderSteps();
  }

  _setWindow(value) {
    this.windowSelect.value = value;
    const n = value === "all" ? null : Number(value);
    for (const c of [this.lossChart, this.lrChart]) c.setXWindow(n);
    this.resetZoom.disabled = n === null;
    this._zoomSource = null;
  }

  _onZoom(source, range) {
    if (this._zoomSource) return; // the other chart following this one
    this._zoomSource = source;
    const other = source === this.lossChart ? this.lrChart : this.lossChart;
    if (range) other.setXRange(range[0], range[1]);
    else other.resetZoom();
    this._zoomSource = null;
    if (range) this.windowSelect.value = "all";
    this.resetZoom.disabled = range === null && this.lossChart.xWindow === null;
  }

  _onSmoothingTrait() {
    const a = Number(this.model.get("smoothing")) || 0;
    this.smoothing.value = String(Math.min(0.99, a));
    this.smoothingValue.textContent = a.toFixed(2);
    this._renderSteps();
  }

  _onSmoothingInput() {
    const a = Number(this.smoothing.value);
    this.smoothingValue.textContent = a.toFixed(2);
    // redraw at once; write the trait once the slider rests (debounced)
    this._smoothingOverride = a;
    this._renderSteps();
    clearTimeout(this._smoothingTimer);
    this._smoothingTimer = setTimeout(() => {
      this._smoothingOverride = undefined;
      this.model.set("smoothing", a);
      this.model.save_changes();
    }, 250);
  }

  _smoothingFactor() {
    return this._smoothingOverride ?? (Number(this.model.get("smoothing")) || 0);
  }

  // ------------------------------------------------------------------ data -> charts

  _schedule(names) {
    for (const n of names) this._dirty.add(n);
    if (this._frame) return;
    const run = () => {
      this._frame = 0;
      const dirty = this._dirty;
      this._dirty = new Set();
      const has = (kind) => [...dirty].some((n) => n === kind || n.endsWith(`.${kind}`));
      if (has("steps")) this._renderSteps();
      if (has("epochs")) this._renderEpochs();
      this._header();
    };
    this._frame = typeof requestAnimationFrame === "function" ? requestAnimationFrame(run) : (run(), 0);
  }

  _stepsStore() {
    return this.sync ? this.sync.stores.steps : null;
  }

  _renderSteps() {
    if (this._lanes.length) {
      this._renderRaceSteps();
      return;
    }
    const s = this._stepsStore();
    if (!s) return;
    const step = s.column("step");
    const loss = s.column("loss");
    this._smoothed = smoothLoss(loss, s.column("n"), this._smoothingFactor());
    // the min-max band only means something once steps are merged into buckets
    this.lossChart.showSeries([2, 3], s.width > 1);
    this.lossChart.setData(step, [loss, this._smoothed, s.column("loss:max"), s.column("loss:min")]);
    this.lrChart.setData(step, [s.column("lr")]);
    // the lr axis goes log when the schedule spans more than a factor 20
    const lr = s.column("lr");
    let lo = Infinity;
    let hi = -Infinity;
    for (let i = 0; i < lr.length; i++) {
      const v = lr[i];
      if (Number.isFinite(v) && v > 0) {
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    }
    this.lrChart.setLogY(lo > 0 && hi / lo > 20);
    this.lossFig.dataset.points = String(s.length);
    this.lossFig.dataset.steps = String(s.total);
    this.lossFig.dataset.first = s.length ? String(s.column("first")[0]) : "";
    this.lossFig.dataset.width = String(s.width);
    this._marks();
    this._note();
  }

  // ------------------------------------------------------------------ races

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
      this._makeCharts(lanes);
      const race = lanes.length > 0;
      this.root.dataset.mode = race ? "race" : "run";
      this.raceTable.root.hidden = !race;
      this.lossLegend.hidden = race;
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

  _raceStores() {
    return this.sync ? this.sync.stores : {};
  }

  _renderRaceSteps() {
    const stores = this._raceStores();
    const { loss, lr } = raceSteps(this._lanes, stores, this._smoothingFactor());
    this._race = { loss, lr };
    this.lossChart.setData(loss.x, loss.ys);
    this.lrChart.setData(lr.x, lr.ys);
    let lo = Infinity;
    let hi = -Infinity;
    for (const col of lr.ys) {
      for (const v of col) {
        if (Number.isFinite(v) && v > 0) {
          if (v < lo) lo = v;
          if (v > hi) hi = v;
        }
      }
    }
    this.lrChart.setLogY(lo > 0 && hi / lo > 20);
    let total = 0;
    for (const lane of this._lanes) {
      const s = stores[laneSeries(lane).steps];
      if (s) total += s.total;
    }
    this.lossFig.dataset.runs = String(this._lanes.length);
    this.lossFig.dataset.points = String(loss.x.length);
    this.lossFig.dataset.steps = String(total);
    this.lossFig.dataset.first = loss.x.length ? String(loss.x[0]) : "";
    this.lossChart.setMarks([]);
    this.lrChart.setMarks([]);
    this.note.hidden = true;
  }

  _renderRaceEpochs() {
    const stores = this._raceStores();
    const { all } = raceMetrics(this._lanes, stores);
    const have = [...this.metricSelect.options].map((o) => o.value).join("|");
    const current = this.metricSelect.value || (all.includes("loss") ? "loss" : all[0] || "");
    if (have !== all.join("|")) this.metricSelect.replaceChildren(...all.map((n) => h("option", { value: n, text: n })));
    if (all.includes(current)) this.metricSelect.value = current;
    const metric = this.metricSelect.value;
    const data = raceEpochs(this._lanes, stores, metric);
    this._raceEpochData = data;
    this.epochChart.setData(data.x, data.ys);
    this.epochFig.dataset.split = data.split;
    this.raceTable.render(this._lanes, stores, metric, data.split);
    this.table.root.hidden = true;
  }

  _marks() {
    const e = this.sync ? this.sync.stores.epochs : null;
    const marks = e ? Array.from(e.column("step")) : [];
    this.lossChart.setMarks(marks);
    this.lrChart.setMarks(marks);
  }

  _note() {
    const s = this._stepsStore();
    const e = this.sync.stores.epochs;
    const parts = [];
    if (s.width > 1) {
      parts.push(
        `The ${fmtInt(s.total)} steps are shown in ${fmtInt(s.length)} buckets of up to ${fmtInt(s.width)} steps ` +
          "(line: mean; band: lowest to highest).",
      );
    }
    if (e.width > 1) parts.push(`The ${fmtInt(e.total)} epochs are merged in rows of up to ${fmtInt(e.width)}.`);
    if (parts.length) parts.push("The run's metrics.jsonl keeps every step and epoch.");
    this.note.textContent = parts.join(" ");
    this.note.hidden = parts.length === 0;
  }

  _emaLast() {
    const sm = this._smoothed;
    if (!sm) return NaN;
    for (let i = sm.length - 1; i >= 0; i--) if (Number.isFinite(sm[i])) return sm[i];
    return NaN;
  }

  /** Metric names in the epoch series: validation ones first, then training ones. */
  _metrics() {
    const e = this.sync.stores.epochs;
    const val = [];
    const train = [];
    for (const f of e.fields) {
      if (f.includes(":")) continue;
      if (f.startsWith("val.")) val.push(f.slice(4));
      else if (f.startsWith("train.")) train.push(f.slice(6));
    }
    return { val, train, all: [...new Set([...val, ...train])] };
  }

  _renderEpochs() {
    if (!this.sync) return;
    if (this._lanes.length) {
      this._renderRaceEpochs();
      return;
    }
    const { val, all } = this._metrics();
    const have = [...this.metricSelect.options].map((o) => o.value).join("|");
    const current = this.metricSelect.value || (all.includes("loss") ? "loss" : all[0] || "");
    if (have !== all.join("|")) this.metricSelect.replaceChildren(...all.map((n) => h("option", { value: n, text: n })));
    if (all.includes(current)) this.metricSelect.value = current;
    this._renderEpochChart();
    this._renderTable(val);
    this._marks();
  }

  _renderEpochChart() {
    const e = this.sync.stores.epochs;
    const metric = this.metricSelect.value;
    const col = (name) => (e.has(name) ? e.column(name) : new Float32Array(e.length).fill(NaN));
    const x = e.column("epoch");
    this.epochChart.showSeries([2, 3], e.width > 1);
    this.epochChart.setData(x, [col(`val.${metric}`), col(`train.${metric}`), col(`val.${metric}:max`), col(`val.${metric}:min`)]);
  }

  _renderTable(valNames) {
    const e = this.sync.stores.epochs;
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
    /** @type {import("../shared/table.js").Column[]} */
    const columns = [
      { key: "epoch", label: "epoch", cell: (i) => `${fmtRange(first[i], epoch[i])}${improved[i] ? " ★" : ""}` },
      { key: "step", label: "step", cell: (i) => fmtInt(step[i]) },
      { key: "train.loss", label: "train loss", cell: value("train.loss"), title: spread("train.loss") },
      ...valNames.map((n) => ({ key: `val.${n}`, label: `val ${n}`, cell: value(`val.${n}`), title: spread(`val.${n}`) })),
      { key: "lr", label: "lr", cell: (i) => fmtValue(lr[i]), className: "nnx-nowrap" },
      { key: "time", label: "time", cell: (i) => fmtDuration(seconds[i]), className: "nnx-nowrap" },
    ];
    this.table.rowAttrs = (i) => (improved[i] ? { class: "nnx-best", title: "became BEST" } : {});
    this.table.setRows(columns, e.length);
  }

  // ------------------------------------------------------------------ readouts

  _lossReadout(idx) {
    if (this._lanes.length) {
      this._raceLossReadout(idx);
      return;
    }
    const s = this._stepsStore();
    if (idx === null || idx === undefined || !s || idx >= s.length) {
      this.lossReadout.textContent = "";
      this.lrReadout.textContent = "";
      return;
    }
    const first = s.column("first")[idx];
    const last = s.column("step")[idx];
    const loss = s.column("loss")[idx];
    const bad = s.column("bad")[idx];
    const lo = s.column("loss:min")[idx];
    const hi = s.column("loss:max")[idx];
    const sm = this._smoothed ? this._smoothed[idx] : NaN;
    const lr = s.column("lr")[idx];
    const stepText = first === last ? `step ${fmtInt(last)}` : `steps ${fmtRange(first, last)}`;
    let lossText = Number.isFinite(loss) ? `loss ${fmtValue(loss)}` : "loss non-finite";
    if (first !== last && Number.isFinite(lo)) lossText += ` (${fmtValue(lo)} to ${fmtValue(hi)})`;
    if (bad && Number.isFinite(loss)) lossText += `, ${fmtInt(bad)} non-finite`;
    const parts = [stepText, lossText, `smoothed ${Number.isFinite(sm) ? fmtValue(sm) : "–"}`, `lr ${fmtValue(lr)}`];
    this.lossReadout.textContent = parts.join(" · ");
    this.lrReadout.textContent = `${stepText} · lr ${fmtValue(lr)}`;
  }

  _raceLossReadout(idx) {
    const race = this._race;
    if (idx === null || idx === undefined || !race || idx >= race.loss.x.length) {
      this.lossReadout.textContent = "";
      this.lrReadout.textContent = "";
      return;
    }
    const parts = [`step ${fmtInt(race.loss.x[idx])}`];
    const lrs = [`step ${fmtInt(race.loss.x[idx])}`];
    this._lanes.forEach((lane, i) => {
      const v = race.loss.ys[i][idx];
      if (v !== undefined) parts.push(`${lane.name} ${Number.isFinite(v) ? fmtValue(v) : "non-finite"}`);
      const r = race.lr.ys[i] ? race.lr.ys[i][idx] : undefined;
      if (r !== undefined) lrs.push(`${lane.name} ${fmtValue(r)}`);
    });
    this.lossReadout.textContent = parts.join(" · ");
    this.lrReadout.textContent = lrs.join(" · ");
  }

  _epochReadout(idx) {
    if (this._lanes.length) {
      const d = this._raceEpochData;
      if (idx === null || idx === undefined || !d || idx >= d.x.length) {
        this.epochReadout.textContent = "";
        return;
      }
      const parts = [`epoch ${fmtInt(d.x[idx])}`];
      this._lanes.forEach((lane, i) => {
        const v = d.ys[i][idx];
        if (v !== undefined) parts.push(`${lane.name} ${fmtValue(v)}`);
      });
      this.epochReadout.textContent = parts.join(" · ");
      return;
    }
    const e = this.sync.stores.epochs;
    if (idx === null || idx === undefined || idx >= e.length) {
      this.epochReadout.textContent = "";
      return;
    }
    const parts = [`epoch ${fmtRange(e.column("first")[idx], e.column("epoch")[idx])}`];
    const { val, train } = this._metrics();
    for (const n of val) parts.push(`val ${n} ${fmtValue(e.column(`val.${n}`)[idx])}`);
    for (const n of train) parts.push(`train ${n} ${fmtValue(e.column(`train.${n}`)[idx])}`);
    this.epochReadout.textContent = parts.join(" · ");
  }

  // ------------------------------------------------------------------ exports

  /** The three charts on one canvas, laid out as on screen, with the run's line
   * above and the from_run hint below. */
  composePng() {
    const canvases = this._charts().map((c) => c.canvas());
    if (canvases.some((c) => !c) || typeof document === "undefined") return null;
    const dpr = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
    const pad = Math.round(8 * dpr);
    const line = Math.round(18 * dpr);
    const [loss, epoch, lr] = canvases;
    const side = epoch.width + lr.width + pad <= loss.width + pad; // side by side, as on screen
    const width = Math.max(loss.width, side ? epoch.width + lr.width + pad : Math.max(epoch.width, lr.width)) + 2 * pad;
    const lower = side ? Math.max(epoch.height, lr.height) + line : epoch.height + lr.height + 2 * line;
    const height = pad + line + (line + loss.height) + lower + line + pad;
    const out = document.createElement("canvas");
    out.width = width;
    out.height = height;
    const ctx = out.getContext("2d");
    if (!ctx) return null;
    const style = (name, fallback) => getComputedStyle(this.root).getPropertyValue(name).trim() || fallback;
    ctx.fillStyle = style("--jp-layout-color0", "#ffffff");
    ctx.fillRect(0, 0, width, height);
    ctx.fillStyle = style("--jp-ui-font-color1", "#212121");
    ctx.font = `600 ${Math.round(12 * dpr)}px ${style("--jp-ui-font-family", "sans-serif")}`;
    ctx.textBaseline = "top";
    const m = this.model;
    const since = m.get("loss_nonfinite_since");
    const head = [
      `Run ${m.get("run_id") || "–"}`,
      m.get("status"),
      `epoch ${this.stat.epoch.textContent}`,
      `step ${this.stat.step.textContent}`,
      since !== null && since !== undefined ? `loss non-finite since step ${fmtInt(since)}` : `loss ${this.stat.loss.textContent}`,
    ].join(" · ");
    ctx.fillText(head, pad, pad);
    const place = (canvas, caption, x, y) => {
      ctx.fillText(caption, x, y);
      ctx.drawImage(canvas, x, y + line);
    };
    let y = pad + line;
    place(loss, "Training loss per step", pad, y);
    y += line + loss.height;
    const metric = `Per epoch: ${this.metricSelect.value || "–"}`;
    if (side) {
      place(epoch, metric, pad, y);
      place(lr, "Learning rate", pad + epoch.width + pad, y);
      y += lower;
    } else {
      place(epoch, metric, pad, y);
      y += line + epoch.height;
      place(lr, "Learning rate", pad, y);
      y += line + lr.height;
    }
    ctx.font = `${Math.round(11 * dpr)}px ${style("--jp-ui-font-family", "sans-serif")}`;
    const run = m.get("run_id");
    ctx.fillText(run ? `nnx-lab TrainingMonitor · TrainingMonitor.from_run("${run}") shows it live` : "nnx-lab TrainingMonitor", pad, y + pad / 2);
    return out;
  }

  _exportPng() {
    const canvas = this.composePng();
    if (!canvas || !canvas.toBlob) return;
    canvas.toBlob((blob) => blob && download(`nnx-monitor-${(this.model.get("run_id") || "run").slice(0, 8)}.png`, blob), "image/png");
  }

  _exportCsv(which) {
    if (this._lanes.length) {
      this._exportRaceCsv(which);
      return;
    }
    const store = this.sync.stores[which];
    const names = [...store.fields];
    const cols = names.map((n) => store.column(n));
    if (which === "steps" && this._smoothed) {
      names.push("smoothed");
      cols.push(this._smoothed);
    }
    const text = toCSV(names, cols);
    download(`nnx-monitor-${(this.model.get("run_id") || "run").slice(0, 8)}-${which}.csv`, new Blob([text], { type: "text/csv" }));
  }

  /** A race's series in long form: one row per run and step (or epoch). */
  _exportRaceCsv(which) {
    const stores = this.sync.stores;
    const names = ["run", "run_id"];
    /** @type {any[][]} */
    let cols = [];
    let fields = null;
    for (const lane of this._lanes) {
      const store = stores[laneSeries(lane)[which]];
      if (!store || !store.length) continue;
      if (fields === null) {
        fields = [...store.fields];
        cols = [[], [], ...fields.map(() => [])];
      }
      for (let i = 0; i < store.length; i++) {
        cols[0].push(lane.name);
        cols[1].push(lane.run_id);
        fields.forEach((f, j) => cols[j + 2].push(store.has(f) ? store.column(f)[i] : NaN));
      }
    }
    const text = toCSV([...names, ...(fields || [])], cols);
    download(`nnx-race-${which}.csv`, new Blob([text], { type: "text/csv" }));
  }

  /** Send the kernel a picture for the notebook's fallback output (see TrainingMonitor). */
  _maybeSnapshot() {
    const m = this.model;
    const run = m.get("run_id");
    const st = m.get("status");
    if (!run || !this.sync || !this.sync.synced || this._snapshotPending) return;
    const key = `${run}:${st}`;
    const due = TERMINAL.has(st) ? m.get("snapshot_of") !== key : Date.now() - this._lastSnapshotAt > SNAPSHOT_EVERY_MS;
    if (!due || this._lastSnapshotKey === key) return;
    this._snapshotPending = true;
    // after the charts drew this state
    const later = typeof requestAnimationFrame === "function" ? requestAnimationFrame : (fn) => setTimeout(fn, 0);
    later(() => {
      const canvas = this.composePng();
      if (!canvas || !canvas.toBlob) {
        this._snapshotPending = false;
        return;
      }
      canvas.toBlob(async (blob) => {
        this._snapshotPending = false;
        if (!blob || this._disposed) return;
        this._lastSnapshotAt = Date.now();
        if (TERMINAL.has(st)) this._lastSnapshotKey = key;
        const bytes = await blob.arrayBuffer();
        m.send({ kind: SNAPSHOT_PNG, view: this.sync.view, run_id: run, status: st }, undefined, [bytes]);
      }, "image/png");
    });
  }

  dispose() {
    this._disposed = true;
    for (const [event, cb] of this._listeners) this.model.off(event, cb);
    this._listeners.length = 0;
    this.sync.dispose();
    if (this._frame && typeof cancelAnimationFrame === "function") cancelAnimationFrame(this._frame);
    clearTimeout(this._smoothingTimer);
    if (this._themeObserver) this._themeObserver.disconnect();
    for (const c of this._charts()) c.destroy();
    this.root.remove();
  }
}
