// AbstentionExplorer's view: a threshold slider (its stops are exact points of the
// risk-coverage curve, evenly spread in coverage) with a number box, the risk ceiling
// and the guarantee that choose a threshold, which probabilities it applies to;
// coverage / risk / accepted / abstained side by side (calibrated and uncalibrated);
// the risk-coverage curves with the ceiling and the operating points; the most
// confident mistakes and a page of the declined rows; Save with its path.
//
// The kernel holds the probabilities and answers each threshold with the readouts and
// the rows (synced traits); the curves and the slider's stops come once through the
// shared transport. One threshold is in flight at a time (shared/latest.js).
import { Chart } from "../shared/chart.js";
import { h, legend, onCommit } from "../shared/dom.js";
import { fmtInt, fmtValue } from "../shared/format.js";
import { LatestRequest, writeAnswered } from "../shared/latest.js";
import { SAVE } from "../shared/protocol.js";
import { SeriesView } from "../shared/series_view.js";

/** @typedef {import("../shared/view.js").Model} Model */

const SIDE_COLOR = { calibrated: "--nnx-accent", uncalibrated: "--nnx-second" };
const GUARANTEES = [
  ["", "none (validation only)"],
  ["0.9", "0.90"],
  ["0.95", "0.95"],
  ["0.99", "0.99"],
];

/** Index of the stop nearest to `threshold` in ascending `thresholds` (0 when empty). */
export function nearestStop(thresholds, threshold) {
  const n = thresholds.length;
  if (!n || !Number.isFinite(threshold)) return 0;
  let lo = 0;
  let hi = n - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (thresholds[mid] < threshold) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && Math.abs(thresholds[lo - 1] - threshold) <= Math.abs(thresholds[lo] - threshold)) return lo - 1;
  return lo;
}

/** The y domain of the risk axis: room for the curves at full coverage and the ceiling. */
export function riskDomain(fullRisks, ceiling) {
  let top = Math.max(0.02, 1.5 * (Number.isFinite(ceiling) ? ceiling : 0));
  for (const r of fullRisks) if (Number.isFinite(r)) top = Math.max(top, 2 * r);
  return [0, Math.min(1, Number(top.toPrecision(2)))];
}

/**
 * A threshold as the box shows it: six significant digits (0.992755), with more where
 * six would round it onto 0 or 1 (0.9999996 is not "1": at 1 every row is declined).
 */
export function fmtThreshold(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "";
  for (let digits = 6; digits < 17; digits++) {
    const shown = Number(v.toPrecision(digits));
    if ((shown === 1 && v !== 1) || (shown === 0 && v !== 0)) continue;
    return String(shown);
  }
  return String(v);
}

/** The box's width for `text`: every character, and room for the number spinner. */
export function boxWidth(text) {
  return `${Math.max(8, String(text).length + 4)}ch`;
}

export function fmtShare(v) {
  return v === null || v === undefined || !Number.isFinite(v) ? "–" : v.toFixed(4);
}

function sideTitle(side, info) {
  if (side === "calibrated") return `calibrated (T = ${fmtValue(info.temperature)})`;
  return (info.sides || []).length > 1 ? "uncalibrated" : "probabilities";
}

export class AbstentionView extends SeriesView {
  /** @param {Model} model @param {HTMLElement} el @param {{timers?: any}} [opts] */
  constructor(model, el, opts = {}) {
    super(model, el);
    this._frames = this._frameScheduler(() => this._render());
    this._build();
    this.request = new LatestRequest((v) => this._sendThreshold(v), { timers: opts.timers });
    this._onDispose(() => this.request.dispose());
    this._onDispose(() => this.chart && this.chart.destroy());
    this._connect({ series: ["curve", "stops"], onChange: () => this._schedule() });
    this._on("change:revision", () => {
      this.request.answered();
      this._onThresholdTrait();
    });
    this._on("change:threshold", () => this._onThresholdTrait());
    for (const name of ["readouts", "selection", "risk_ceiling", "guarantee", "use", "info"]) this._on(`change:${name}`, () => this._schedule());
    for (const name of ["mistakes", "abstained_rows", "abstained_start"]) this._on(`change:${name}`, () => this._renderTables());
    this._on("change:path", () => (this.pathInput.value = this.model.get("path") || ""));
    this._on("change:saved", () => (this.saved.textContent = this.model.get("saved") || ""));
    this._on("change:error", () => this._error());
    this.pathInput.value = model.get("path") || "";
    this.saved.textContent = model.get("saved") || "";
    this._onThresholdTrait();
    this._render();
    this._renderTables();
    this.sync.hello();
  }

  _info() {
    return this.model.get("info") || {};
  }

  _sides() {
    return this._info().sides || ["uncalibrated"];
  }

  // ------------------------------------------------------------------ DOM

  _build() {
    this._makeRoot("nnx-explorer nnx-abstention", "Abstention explorer");
    this.root.nnxView = this; // for the browser's console, browser tests and benchmarks
    this.title = h("div", { class: "nnx-x-title" });
    this.ids = h("div", { class: "nnx-x-ids", "data-testid": "ids" });

    this.slider = h("input", { type: "range", min: "0", max: "0", step: "1", "data-testid": "threshold", "aria-label": "Threshold (stops evenly spread in coverage)" });
    this.slider.addEventListener("input", () => this._onSlider());
    this.number = h("input", { type: "number", min: "0", max: "1", step: "any", class: "nnx-input nnx-x-number", "data-testid": "threshold-value", "aria-label": "Threshold" });
    onCommit(this.number, () => {
      const v = Number(this.number.value);
      this.request.request(this.number.value === "" || !Number.isFinite(v) ? this.number.value : v);
    });
    this.ceiling = h("input", { type: "number", min: "0", max: "1", step: "0.005", class: "nnx-input nnx-x-number", "data-testid": "risk-ceiling", "aria-label": "Risk ceiling" });
    onCommit(this.ceiling, () => {
      const v = this.ceiling.value === "" ? this.ceiling.value : Number(this.ceiling.value);
      if (v !== this.model.get("risk_ceiling")) this._setTrait("risk_ceiling", v);
    });
    this.guarantee = h("select", { class: "nnx-input", "data-testid": "guarantee", "aria-label": "Guarantee" });
    for (const [value, label] of GUARANTEES) this.guarantee.append(h("option", { value, text: label }));
    this.guarantee.addEventListener("change", () => this._setTrait("guarantee", this.guarantee.value === "" ? null : Number(this.guarantee.value)));
    this.useSelect = h("select", { class: "nnx-input", "data-testid": "use", "aria-label": "Probabilities the threshold applies to" });
    this.useSelect.addEventListener("change", () => this._setTrait("use", this.useSelect.value));
    this.useLabel = h("label", { title: "Which probabilities the threshold and the saved policy apply to" }, ["apply to", this.useSelect]);
    this.selectionNote = h("p", { class: "nnx-x-note", "data-testid": "selection" });
    const controls = h("div", { class: "nnx-x-controls" }, [
      h("label", { class: "nnx-x-slider", title: "Rows scoring at or above the threshold are answered; the others are declined" }, ["Threshold", this.slider]),
      this.number,
      h("label", { title: "The highest error rate accepted among answered rows: chooses the threshold" }, ["Risk ceiling", this.ceiling]),
      h("label", { title: "Choose with a high-probability risk bound (selection with guaranteed risk)" }, ["guarantee", this.guarantee]),
      this.useLabel,
    ]);

    // readouts: one column per side
    this.readoutTable = h("table", { class: "nnx-x-readouts", "data-testid": "readouts" });

    const readout = () => h("div", { class: "nnx-readout", "data-testid": "readout", "aria-live": "off" });
    this.curveFig = h("figure", { class: "nnx-chart nnx-chart-wide", "data-testid": "curve-chart" });
    this.curveFig.append(h("figcaption", { text: "Risk against coverage: each point is a threshold; the dots are the current one" }));
    this.curveReadout = readout();

    this.mistakesBox = h("div", { "data-testid": "mistakes" });
    this.abstainedBox = h("div", { "data-testid": "declined-rows" });
    this.pageStatus = h("span", { class: "nnx-page-status", "data-testid": "declined-status" });
    this.prev = h("button", { type: "button", class: "nnx-btn", "data-testid": "declined-prev", text: "‹", title: "Rows nearer the threshold" });
    this.next = h("button", { type: "button", class: "nnx-btn", "data-testid": "declined-next", text: "›", title: "Rows further below the threshold" });
    this.prev.addEventListener("click", () => this._page(-1));
    this.next.addEventListener("click", () => this._page(1));
    const tables = h("div", { class: "nnx-x-tables" }, [
      h("section", {}, [h("h4", { text: "Most confident mistakes" }), this.mistakesBox]),
      h("section", {}, [h("h4", { text: "Declined rows, nearest the threshold first" }), this.abstainedBox, h("div", { class: "nnx-x-pager" }, [this.prev, this.pageStatus, this.next])]),
    ]);

    this.pathInput = h("input", { type: "text", class: "nnx-input nnx-x-path", "data-testid": "path", "aria-label": "Policy file", spellcheck: "false" });
    onCommit(this.pathInput, () => {
      if (this.pathInput.value !== this.model.get("path")) this._setTrait("path", this.pathInput.value);
    });
    this.saveButton = h("button", { type: "button", class: "nnx-btn", "data-testid": "save", text: "Save policy" });
    this.saveButton.addEventListener("click", () => {
      if (this.pathInput.value !== this.model.get("path")) this._setTrait("path", this.pathInput.value);
      this.model.send({ kind: SAVE });
    });
    this.saved = h("span", { class: "nnx-x-note", "data-testid": "saved", "aria-live": "polite" });
    const save = h("div", { class: "nnx-x-save" }, [h("label", {}, ["Save to", this.pathInput]), this.saveButton, this.saved]);

    this.root.append(
      h("div", { class: "nnx-x-header" }, [this.title, this.ids]),
      controls,
      this.selectionNote,
      h("div", { class: "nnx-x-summary" }, [this.readoutTable]),
      h("div", { class: "nnx-charts" }, [this.curveFig]),
      tables,
      save,
      this._makeError(),
    );
    this._chartSides = [];
  }

  /** (Re)build the chart for these sides: one curve each, and the ceiling. */
  _ensureChart(sides) {
    const key = sides.join("|");
    if (this.chart && this._chartKey === key) return;
    if (this.chart) this.chart.destroy();
    this.curveFig.querySelectorAll(".nnx-legend, .nnx-readout").forEach((n) => n.remove());
    this._chartKey = key;
    this._chartSides = sides;
    const info = this._info();
    this.chart = new Chart(this.curveFig, {
      title: "Risk-coverage curves with the risk ceiling and the current operating points",
      xLabel: "coverage (share of rows answered)",
      yLabel: "risk (error rate of answered rows)",
      height: 240,
      xDomain: [0, 1],
      yDomain: [0, 1],
      series: [
        ...sides.map((s) => ({ label: sideTitle(s, info), color: SIDE_COLOR[s] || "--nnx-accent", width: 2, dash: s === "uncalibrated" && sides.length > 1 ? [6, 3] : undefined })),
        { label: "risk ceiling", color: "--nnx-bad", width: 1, dash: [6, 4] },
      ],
      xFormat: (v) => fmtValue(v),
      yFormat: (v) => fmtValue(v),
      onCursor: (idx) => this._curveReadout(idx),
    });
    this.curveFig.append(
      this.curveReadout,
      legend([
        ...sides.map((s) => [sideTitle(s, info), `var(${SIDE_COLOR[s] || "--nnx-accent"})`, s === "uncalibrated" && sides.length > 1 ? "nnx-dashed" : ""]),
        ["risk ceiling", "var(--nnx-bad)", "nnx-dashed"],
      ]),
    );
  }

  // ------------------------------------------------------------------ controls

  _stops() {
    return this.sync ? this.sync.stores.stops : null;
  }

  _onSlider() {
    const s = this._stops();
    if (!s || !s.length) return;
    const i = Math.min(s.length - 1, Math.max(0, Number(this.slider.value)));
    const tau = s.column("threshold")[i];
    this._showThreshold(tau);
    this.request.request(tau);
  }

  /** The threshold in the box, wide enough to show every digit it has. */
  _showThreshold(tau) {
    this.number.value = fmtThreshold(tau);
    this.number.style.width = boxWidth(this.number.value);
  }

  _sendThreshold(tau) {
    writeAnswered(this.model, "threshold", tau, this.request);
  }

  _onThresholdTrait() {
    if (this.request && this.request.busy) return; // the pointer has the slider
    const tau = Number(this.model.get("threshold"));
    this._showThreshold(tau);
    const s = this._stops();
    if (s && s.length) {
      this.slider.max = String(s.length - 1);
      this.slider.value = String(nearestStop(s.column("threshold"), tau));
    }
  }

  _page(direction) {
    const size = this._info().page_size || 10;
    const start = Math.max(0, Number(this.model.get("abstained_start") || 0) + direction * size);
    this._setTrait("abstained_start", start);
  }

  // ------------------------------------------------------------------ drawing

  _schedule() {
    this._clearSyncError();
    this._frames.schedule();
  }

  _render() {
    const m = this.model;
    const info = this._info();
    const sides = this._sides();
    const use = m.get("use");
    this.title.textContent = `Abstention · ${fmtInt(info.rows)} rows · ${fmtInt(info.classes)} classes · score ${info.kind || "–"} · split '${info.split_id || "–"}'`;
    this.ids.textContent = info.model_id ? `model ${String(info.model_id).slice(0, 20)}…` : "";
    this.ids.title = info.model_id || "";
    this.ceiling.value = String(m.get("risk_ceiling"));
    const g = m.get("guarantee");
    this.guarantee.value = g === null || g === undefined ? "" : String(g);
    if (this.guarantee.value !== (g === null || g === undefined ? "" : String(g))) {
      this.guarantee.append(h("option", { value: String(g), text: String(g) }));
      this.guarantee.value = String(g);
    }
    const have = [...this.useSelect.options].map((o) => o.value).join("|");
    if (have !== sides.join("|")) this.useSelect.replaceChildren(...sides.map((s) => h("option", { value: s, text: sideTitle(s, info) })));
    this.useSelect.value = use;
    this.useLabel.hidden = sides.length < 2;
    this._onThresholdTrait();
    this._renderSelection();
    this._renderReadouts(sides, use);
    this._renderCurve(sides, use);
  }

  _renderSelection() {
    const sel = this.model.get("selection") || {};
    let text = "";
    if (sel.status === "selected") {
      const bound = sel.guarantee ? `; with probability ${sel.guarantee}, risk on new rows ≤ ${fmtShare(sel.risk_bound)}` : "; met on this split, not guaranteed on new rows";
      text = `ceiling ${sel.risk_ceiling}: threshold ${fmtValue(sel.threshold)} answers ${fmtShare(sel.coverage)} of the rows at risk ${fmtShare(sel.risk)}${bound}`;
    } else if (sel.status) {
      text = `ceiling ${sel.risk_ceiling}: ${sel.reason}`;
    }
    this.selectionNote.textContent = text;
    this.selectionNote.dataset.status = sel.status || "";
  }

  _renderReadouts(sides, use) {
    const info = this._info();
    const readouts = this.model.get("readouts") || {};
    const head = h("tr", {}, [h("th", { text: "" }), ...sides.map((s) => h("th", { scope: "col", text: sideTitle(s, info) + (sides.length > 1 && s === use ? " ◂" : ""), title: s === use ? "the threshold applies to these" : "" }))]);
    const rows = [
      ["coverage", "coverage", (r) => fmtShare(r.coverage)],
      ["risk", "risk", (r) => (r.risk === null || r.risk === undefined ? "none answered" : fmtShare(r.risk))],
      ["accepted", "answered", (r) => fmtInt(r.accepted)],
      ["abstained", "declined", (r) => fmtInt(r.abstained)],
    ].map(([key, label, cell]) =>
      h("tr", {}, [
        h("th", { scope: "row", text: label }),
        ...sides.map((s) => h("td", { "data-testid": s === use ? key : `${key}-${s}`, text: readouts[s] ? cell(readouts[s]) : "–" })),
      ]),
    );
    this.readoutTable.replaceChildren(h("thead", {}, [head]), h("tbody", {}, rows));
    const r = readouts[use];
    if (r) {
      this.root.dataset.threshold = String(r.threshold);
      this.root.dataset.coverage = String(r.coverage);
      const ceiling = Number(this.model.get("risk_ceiling"));
      const ok = r.risk !== null && r.risk !== undefined && r.risk <= ceiling;
      this.saveButton.disabled = !ok;
      this.saveButton.title = ok
        ? "Write the policy at this threshold as JSON (atomically)"
        : r.risk === null || r.risk === undefined
          ? "Nothing is answered at this threshold"
          : `The risk at this threshold (${fmtShare(r.risk)}) is above the ceiling (${ceiling})`;
    }
  }

  _renderCurve(sides, use) {
    this._ensureChart(sides);
    const c = this.sync.stores.curve;
    const x = c.column("coverage");
    const ceiling = Number(this.model.get("risk_ceiling"));
    const ys = sides.map((s) => c.column(`risk.${s}`));
    ys.push(new Float64Array(x.length).fill(ceiling));
    const full = sides.map((s) => {
      const col = c.column(`risk.${s}`);
      return col.length ? col[col.length - 1] : NaN;
    });
    this.chart.setYDomain(riskDomain(full, ceiling));
    this.chart.setData(x, ys);
    const readouts = this.model.get("readouts") || {};
    const dots = [];
    for (const s of sides) {
      const r = readouts[s];
      if (r && r.risk !== null && r.risk !== undefined) dots.push({ x: r.coverage, y: r.risk, color: SIDE_COLOR[s] || "--nnx-accent" });
    }
    this.chart.setDots(dots);
    const r = readouts[use];
    this.chart.setMarkers(r ? [{ x: r.coverage, label: `coverage ${fmtShare(r.coverage)}`, color: SIDE_COLOR[use] || "--nnx-accent" }] : []);
    this.curveFig.dataset.points = String(x.length);
  }

  _curveReadout(idx) {
    const c = this.sync.stores.curve;
    if (idx === null || idx === undefined || idx >= c.length) {
      this.curveReadout.textContent = "";
      return;
    }
    const info = this._info();
    const parts = [`coverage ${fmtShare(c.column("coverage")[idx])}`];
    for (const s of this._chartSides) parts.push(`${sideTitle(s, info)} risk ${fmtShare(c.column(`risk.${s}`)[idx])}`);
    this.curveReadout.textContent = parts.join(" · ");
  }

  _renderTables() {
    const labels = this._info().labels;
    // the engine's rows: target / target_label, prediction / predicted_label
    const name = (row, key) => {
      const label = row[key === "target" ? "target_label" : "predicted_label"];
      return label !== undefined && label !== null ? String(label) : String(row[key]);
    };
    const target = labels ? "true label" : "true class";
    /** The rows' table, or `empty` where there are none; the first columns are every table's. */
    const table = (rows, columns, attrs, empty) => {
      if (!rows.length) return h("p", { class: "nnx-x-note", text: empty });
      const all = [["id", (r) => String(r.sample_id)], [target, (r) => name(r, "target")], ["predicted", (r) => name(r, "prediction")], ["score", (r) => fmtShare(r.score)], ...columns];
      const head = h("tr", {}, all.map(([label]) => h("th", { scope: "col", text: label })));
      const body = rows.map((row) => h("tr", attrs(row), all.map(([, cell]) => h("td", { text: cell(row) }))));
      return h("div", { class: "nnx-table-box" }, [h("table", { class: "nnx-table" }, [h("thead", {}, [head]), h("tbody", {}, body)])]);
    };
    this.mistakesBox.replaceChildren(
      table(
        this.model.get("mistakes") || [],
        [
          ["p(true)", (r) => fmtShare(r.probability_of_target)],
          ["answered", (r) => (r.accepted ? "yes" : "no")],
        ],
        (r) => ({ "data-accepted": String(Boolean(r.accepted)), title: r.accepted ? "answered at this threshold: a confident mistake that gets through" : "declined at this threshold" }),
        "no mistakes on this split",
      ),
    );
    const rows = this.model.get("abstained_rows") || [];
    const use = this.model.get("use");
    const r = (this.model.get("readouts") || {})[use];
    const total = r ? r.abstained : 0;
    const start = Number(this.model.get("abstained_start") || 0);
    this.abstainedBox.replaceChildren(
      table(rows, [["right?", (x) => (x.correct ? "right" : "wrong")]], (x) => ({ "data-correct": String(Boolean(x.correct)) }), "every row is answered at this threshold"),
    );
    this.pageStatus.textContent = total ? `${fmtInt(start + 1)}–${fmtInt(start + rows.length)} of ${fmtInt(total)} declined` : "";
    this.prev.disabled = start <= 0;
    this.next.disabled = start + rows.length >= total;
  }
}
