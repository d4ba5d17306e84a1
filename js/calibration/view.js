// CalibrationExplorer's view: a temperature slider (log scale) with its number box,
// Fit and "T = 1"; NLL / Brier / ECE at T = 1 and at the slider's T; the reliability
// diagram (accuracy per confidence bin, bars, against T = 1 and the diagonal) and the
// confidence histogram (share of rows per bin, before and after); Save with its path.
//
// Two ways to measure, chosen by the kernel (info.compute; benchmarks/explorer_slider.py
// measured both):
// * "kernel": the kernel holds the logits and sends the bins and the metrics through
//   the shared transport, one numbered update per temperature it measured. While the
//   slider moves, one value is in flight at a time (shared/latest.js), so the picture
//   follows the pointer instead of a queue.
// * "browser": the logits are few enough to send once (float32, shifted by each row's
//   maximum); the view measures them itself at each move (measure.js) and writes the
//   temperature to the kernel once the slider rests.
import { Chart } from "../shared/chart.js";
import { h, legend, onCommit } from "../shared/dom.js";
import { fmtInt, fmtValue } from "../shared/format.js";
import { LatestRequest, writeAnswered } from "../shared/latest.js";
import { FIT, SAVE } from "../shared/protocol.js";
import { SeriesView } from "../shared/series_view.js";
import { measure, prepare } from "./measure.js";

/** @typedef {import("../shared/view.js").Model} Model */

const SLIDER_STEPS = 1000;
const REST_MS = 250; // browser mode: the temperature is written once the slider rests

/** Slider position (0 .. SLIDER_STEPS) <-> temperature, on a log scale over [lo, hi]. */
export function positionToTemperature(pos, lo, hi) {
  const f = Math.min(1, Math.max(0, pos / SLIDER_STEPS));
  // three significant digits: the value shown is the value sent
  return Number((lo * (hi / lo) ** f).toPrecision(3));
}

export function temperatureToPosition(t, lo, hi) {
  if (!(t > 0)) return 0;
  const f = Math.log(t / lo) / Math.log(hi / lo);
  return Math.round(Math.min(1, Math.max(0, f)) * SLIDER_STEPS);
}

/** "0.0123" with four decimals for metrics; "–" when absent. */
export function fmtMetric(v) {
  return v === null || v === undefined || !Number.isFinite(v) ? "–" : v.toFixed(4);
}

/** "−0.0123" / "+0.0123": the change from T = 1 (a minus sign, not a hyphen). */
export function fmtChange(after, before) {
  if (!Number.isFinite(after) || !Number.isFinite(before)) return "–";
  const d = after - before;
  if (Math.abs(d) < 5e-5) return "±0";
  return `${d < 0 ? "−" : "+"}${Math.abs(d).toFixed(4)}`;
}

/** Bin centres and edges of `bins` equal-width bins over [0, 1]. */
export function binGeometry(bins) {
  const centers = new Float64Array(bins);
  for (let i = 0; i < bins; i++) centers[i] = (i + 0.5) / bins;
  return { centers, lo: (i) => i / bins, hi: (i) => (i + 1) / bins };
}

export class CalibrationView extends SeriesView {
  /** @param {Model} model @param {HTMLElement} el @param {{timers?: any}} [opts] */
  constructor(model, el, opts = {}) {
    super(model, el);
    this._frames = this._frameScheduler(() => this._render());
    this._build();
    this.request = new LatestRequest((v) => this._sendTemperature(v), { timers: opts.timers });
    /** @type {import("./measure.js").Prepared|null} browser mode: the logits, prepared */
    this.local = null;
    this._restTimer = null;
    this._onDispose(() => {
      this.request.dispose();
      clearTimeout(this._restTimer);
      this.diagram.destroy();
      this.histogram.destroy();
    });
    this._connect({
      series: ["bins", "metrics", "logits", "targets"],
      onChange: (names) => {
        if (names.has("logits") || names.has("targets")) this._prepareLocal();
        this._schedule();
      },
    });
    this._on("change:temperature", () => this._onTemperatureTrait());
    this._on("change:revision", () => {
      this.request.answered();
      this._onTemperatureTrait(); // a refused value: back to the one the kernel kept
    });
    for (const name of ["fitted_temperature", "fit_message", "saved", "info"]) this._on(`change:${name}`, () => this._header());
    this._on("change:path", () => this._onPathTrait());
    this._on("change:error", () => this._error());
    this._header();
    this._onTemperatureTrait();
    this._onPathTrait();
    this._render();
    this.sync.hello();
  }

  _range() {
    const r = (this.model.get("info") || {}).slider_range || [0.05, 20];
    return [Number(r[0]), Number(r[1])];
  }

  // ------------------------------------------------------------------ DOM

  _build() {
    this._makeRoot("nnx-explorer nnx-calibration", "Calibration explorer");
    this.root.nnxView = this; // for the browser's console, browser tests and benchmarks
    this.title = h("div", { class: "nnx-x-title" });
    this.ids = h("div", { class: "nnx-x-ids", "data-testid": "ids" });

    // controls
    this.slider = h("input", { type: "range", min: "0", max: String(SLIDER_STEPS), step: "1", "data-testid": "temperature", "aria-label": "Temperature (log scale)" });
    this.slider.addEventListener("input", () => this._onSlider());
    this.number = h("input", { type: "number", min: "0.001", max: "1000", step: "any", class: "nnx-input nnx-x-number", "data-testid": "temperature-value", "aria-label": "Temperature" });
    onCommit(this.number, () => this._onNumber());
    this.fitButton = h("button", { type: "button", class: "nnx-btn nnx-x-primary", "data-testid": "fit", title: "Set the temperature that minimizes the NLL on these rows", text: "Fit" });
    this.fitButton.addEventListener("click", () => this.model.send({ kind: FIT }));
    this.resetButton = h("button", { type: "button", class: "nnx-btn", "data-testid": "reset", title: "Back to the model's own probabilities", text: "T = 1" });
    this.resetButton.addEventListener("click", () => this._ask(1, true));
    this.fitMessage = h("span", { class: "nnx-x-note", "data-testid": "fit-message", "aria-live": "polite" });
    const controls = h("div", { class: "nnx-x-controls" }, [
      h("label", { class: "nnx-x-slider", title: "T > 1 softens the probabilities, T < 1 sharpens them; the argmax never changes" }, ["Temperature", this.slider]),
      this.number,
      this.fitButton,
      this.resetButton,
      this.fitMessage,
    ]);

    // readouts: metric | T = 1 | at T | change
    this.readout = {};
    const rows = [];
    for (const [key, label, title] of [
      ["nll", "NLL", "Mean negative log-likelihood of the true class (lower is better)"],
      ["brier", "Brier", "Sum over classes of squared errors to the one-hot target, in [0, 2] (lower is better)"],
      ["ece", "ECE", "Expected calibration error: the row-weighted mean |accuracy − confidence| over the bins"],
    ]) {
      const before = h("td", { "data-testid": `${key}-before`, text: "–" });
      const after = h("td", { "data-testid": key, text: "–" });
      const change = h("td", { "data-testid": `${key}-change`, text: "–" });
      this.readout[key] = { before, after, change };
      rows.push(h("tr", {}, [h("th", { scope: "row", title, text: label }), before, after, change]));
    }
    this.afterHead = h("th", { scope: "col", text: "at T" });
    this.accuracy = h("p", { class: "nnx-x-note", "data-testid": "accuracy" });
    const table = h("table", { class: "nnx-x-readouts", "data-testid": "readouts" }, [
      h("thead", {}, [h("tr", {}, [h("th", { text: "" }), h("th", { scope: "col", text: "T = 1" }), this.afterHead, h("th", { scope: "col", text: "change" })])]),
      h("tbody", {}, rows),
    ]);

    // charts
    const readout = () => h("div", { class: "nnx-readout", "data-testid": "readout", "aria-live": "off" });
    this.diagramFig = h("figure", { class: "nnx-chart", "data-testid": "reliability-chart" });
    this.diagramFig.append(h("figcaption", { text: "Reliability: accuracy per confidence bin" }));
    this.histFig = h("figure", { class: "nnx-chart", "data-testid": "histogram-chart" });
    this.histFig.append(h("figcaption", { text: "Confidence histogram: share of rows per bin" }));
    const charts = h("div", { class: "nnx-charts" }, [this.diagramFig, this.histFig]);

    // save
    this.pathInput = h("input", { type: "text", class: "nnx-input nnx-x-path", "data-testid": "path", "aria-label": "Calibrator file", spellcheck: "false" });
    onCommit(this.pathInput, () => {
      if (this.pathInput.value !== this.model.get("path")) this._setTrait("path", this.pathInput.value);
    });
    this.saveButton = h("button", { type: "button", class: "nnx-btn", "data-testid": "save", text: "Save calibrator" });
    this.saveButton.addEventListener("click", () => this._save());
    this.saved = h("span", { class: "nnx-x-note", "data-testid": "saved", "aria-live": "polite" });
    const save = h("div", { class: "nnx-x-save" }, [h("label", {}, ["Save to", this.pathInput]), this.saveButton, this.saved]);

    this.root.append(h("div", { class: "nnx-x-header" }, [this.title, this.ids]), controls, h("div", { class: "nnx-x-summary" }, [table, this.accuracy]), charts, save, this._makeError());

    const { centers } = binGeometry(15);
    // both charts: a bin's value at the slider's T (bars) against T = 1, on [0, 1] x [0, 1]
    const binChart = (fig, title, yLabel, extra, legendExtra) => {
      const readoutBox = readout();
      const chart = new Chart(fig, {
        title,
        xLabel: "confidence",
        yLabel,
        height: 220,
        xDomain: [0, 1],
        yDomain: [0, 1],
        series: [
          { label: "at T", color: "--nnx-accent", bars: true, fill: "--nnx-accent-fill" },
          { label: "T = 1", color: "--nnx-second", width: 1.5, dash: [5, 4], points: true },
          ...extra,
        ],
        xFormat: (v) => fmtValue(v),
        yFormat: (v) => fmtValue(v),
        onCursor: (idx) => this._binReadout(idx),
      });
      fig.append(readoutBox, legend([["at T (bars)", "var(--nnx-accent)"], ["T = 1", "var(--nnx-second)", "nnx-dashed"], ...legendExtra]));
      return [chart, readoutBox];
    };
    [this.diagram, this.diagramReadout] = binChart(
      this.diagramFig,
      "Reliability diagram: accuracy against confidence per bin, at the slider's temperature and at T = 1",
      "accuracy",
      [{ label: "perfect", color: "--nnx-raw", width: 1, dash: [2, 3] }],
      [["perfect calibration", "var(--nnx-raw)", "nnx-dashed"]],
    );
    [this.histogram, this.histReadout] = binChart(
      this.histFig,
      "Confidence histogram: share of rows per confidence bin, at the slider's temperature and at T = 1",
      "share of rows",
      [],
      [],
    );
    this._centers = centers;
  }

  // ------------------------------------------------------------------ header and controls

  _header() {
    const m = this.model;
    const info = m.get("info") || {};
    const classes = info.kind === "bernoulli" ? "bernoulli outputs" : `${fmtInt(info.classes)} classes`;
    this.title.textContent = `Calibration · ${fmtInt(info.rows)} rows · ${classes} · split '${info.split_id || "–"}'`;
    const model = String(info.model_id || "");
    this.ids.textContent = `model ${model.length > 20 ? `${model.slice(0, 20)}…` : model}`;
    this.ids.title = model;
    this.accuracy.textContent = Number.isFinite(info.accuracy) ? `accuracy ${fmtMetric(info.accuracy)} at every T (the argmax does not change)` : "";
    const fitted = m.get("fitted_temperature");
    this.fitMessage.textContent = m.get("fit_message") || "";
    this.fitMessage.dataset.ok = fitted === null || fitted === undefined ? "false" : "true";
    this.saveButton.disabled = fitted === null || fitted === undefined;
    this.saveButton.title = this.saveButton.disabled ? "Fit first: Save writes the fitted calibrator" : "Write the fitted calibrator as JSON (atomically)";
    this.saved.textContent = m.get("saved") || "";
  }

  _onTemperatureTrait() {
    // The kernel's value; while the pointer drags the slider, the slider stays with it.
    if (this.request && this.request.busy) return;
    if (this._restTimer !== null) return; // browser mode: our own value is on its way
    const t = Number(this.model.get("temperature"));
    this._showTemperature(t);
    if (this.local && Number.isFinite(t) && t > 0 && t !== this._measuredT) this._measureLocal(t);
  }

  _showTemperature(t) {
    const [lo, hi] = this._range();
    this.slider.value = String(temperatureToPosition(t, lo, hi));
    this.number.value = String(Number(t.toPrecision(4)));
  }

  _onSlider() {
    const [lo, hi] = this._range();
    const t = positionToTemperature(Number(this.slider.value), lo, hi);
    this.number.value = String(t);
    this._ask(t, false);
  }

  _onNumber() {
    const t = Number(this.number.value);
    // the kernel judges the value: a refused one comes back with the reason
    this._ask(Number.isFinite(t) ? t : this.number.value, true);
  }

  /** The temperature the controls ask for: measured here (browser mode) or by the kernel. */
  _ask(t, now) {
    if (!this.local || !(typeof t === "number" && t > 0 && Number.isFinite(t))) {
      this.request.request(t);
      return;
    }
    this._measureLocal(t);
    clearTimeout(this._restTimer);
    const write = () => {
      this._restTimer = null;
      this._sendTemperature(t);
    };
    if (now) write();
    else this._restTimer = setTimeout(write, REST_MS);
  }

  /** Browser mode: the compact buffer of logits arrived (or came again): prepare it. */
  _prepareLocal() {
    const info = this.model.get("info") || {};
    const z = this.sync.stores.logits.column("z");
    const y = this.sync.stores.targets.column("y");
    if (info.compute !== "browser" || !y.length || z.length !== y.length * info.classes) return;
    this.local = prepare(/** @type {Float32Array} */ (z), /** @type {Int32Array} */ (y));
    this._before = measure(this.local, info.bins || 15, 1);
    this._measureLocal(Number(this.model.get("temperature")) || 1);
  }

  /** Browser mode: measure at t into the stores the charts draw from. */
  _measureLocal(t) {
    if (!this.local) return;
    const info = this.model.get("info") || {};
    const now = measure(this.local, info.bins || 15, t);
    this._measuredT = t;
    const b = this._before;
    const mean = (sum, count) => Float64Array.from(sum, (v, i) => (count[i] ? v / count[i] : NaN));
    const put = (store, columns) => {
      const fields = Object.keys(columns);
      const dtypes = fields.map((f) => (columns[f] instanceof Int32Array ? "int32" : "float64"));
      store.apply({ at: 0, count: columns[fields[0]].length, fields, dtypes, width: 1, total: columns[fields[0]].length, buffer: 0 }, fields.map((f) => columns[f]));
    };
    put(this.sync.stores.bins, {
      count_before: b.count,
      confidence_before: mean(b.confidence, b.count),
      accuracy_before: mean(b.correct, b.count),
      count: now.count,
      confidence: mean(now.confidence, now.count),
      accuracy: mean(now.correct, now.count),
    });
    put(this.sync.stores.metrics, {
      temperature: Float64Array.from([1, t]),
      nll: Float64Array.from([b.nll, now.nll]),
      brier: Float64Array.from([b.brier, now.brier]),
      ece: Float64Array.from([b.ece, now.ece]),
    });
    this._schedule();
  }

  _sendTemperature(t) {
    writeAnswered(this.model, "temperature", t, this.request);
  }

  _onPathTrait() {
    this.pathInput.value = this.model.get("path") || "";
  }

  _save() {
    const path = this.pathInput.value;
    if (path !== this.model.get("path")) this._setTrait("path", path);
    this.model.send({ kind: SAVE });
  }

  // ------------------------------------------------------------------ drawing

  _schedule() {
    this._clearSyncError();
    this._frames.schedule();
  }

  /** What the kernel measured last: {temperature, nll, brier, ece} at T = 1 and at T. */
  metrics() {
    const s = this.sync.stores.metrics;
    if (s.length < 2) return null;
    const row = (i) => ({ temperature: s.column("temperature")[i], nll: s.column("nll")[i], brier: s.column("brier")[i], ece: s.column("ece")[i] });
    return { before: row(0), after: row(1) };
  }

  _render() {
    const b = this.sync.stores.bins;
    const m = this.metrics();
    const n = b.length;
    if (n && this._centers.length !== n) this._centers = binGeometry(n).centers;
    const x = n ? this._centers : new Float64Array(0);
    const perfect = Float64Array.from(x);
    this.diagram.setData(x, [b.column("accuracy"), b.column("accuracy_before"), perfect]);
    const share = (col) => {
      let total = 0;
      for (let i = 0; i < col.length; i++) total += col[i];
      return Float64Array.from(col, (v) => (total ? v / total : NaN));
    };
    this.histogram.setData(x, [share(b.column("count")), share(b.column("count_before"))]);
    if (!m) return;
    for (const key of ["nll", "brier", "ece"]) {
      const r = this.readout[key];
      r.before.textContent = fmtMetric(m.before[key]);
      r.after.textContent = fmtMetric(m.after[key]);
      r.change.textContent = fmtChange(m.after[key], m.before[key]);
      r.change.dataset.sign = m.after[key] < m.before[key] - 5e-5 ? "better" : m.after[key] > m.before[key] + 5e-5 ? "worse" : "same";
    }
    const t = m.after.temperature;
    this.afterHead.textContent = `T = ${fmtValue(t)}`;
    // for browser tests and anyone inspecting the page: what is drawn
    this.diagramFig.dataset.temperature = String(t);
    this.diagramFig.dataset.ece = m.after.ece.toFixed(6);
    this.diagramFig.dataset.counts = Array.from(b.column("count")).join(",");
    this.root.dataset.temperature = String(t);
    this.root.dataset.compute = this.local ? "browser" : "kernel";
  }

  _binReadout(idx) {
    const b = this.sync.stores.bins;
    if (idx === null || idx === undefined || idx >= b.length) {
      this.diagramReadout.textContent = "";
      this.histReadout.textContent = "";
      return;
    }
    const n = b.length;
    const { lo, hi } = binGeometry(n);
    const count = b.column("count")[idx];
    const before = b.column("count_before")[idx];
    const text = [
      `bin ${fmtValue(lo(idx))}–${fmtValue(hi(idx))}`,
      `${fmtInt(count)} rows (T = 1: ${fmtInt(before)})`,
      `confidence ${fmtValue(b.column("confidence")[idx])}`,
      `accuracy ${fmtValue(b.column("accuracy")[idx])}`,
      `T = 1: ${fmtValue(b.column("confidence_before")[idx])} / ${fmtValue(b.column("accuracy_before")[idx])}`,
    ].join(" · ");
    this.diagramReadout.textContent = text;
    this.histReadout.textContent = text;
  }
}
