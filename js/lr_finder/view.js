// LRFinderWidget's view: the sweep's loss (raw and smoothed) against the learning rate
// on a log axis, drawn as the points arrive; the suggestion and the chosen rate as
// labelled marks, the other rules' picks as faint ones; hover for (LR, loss); click or
// drag on the curve to choose a rate; "Use this LR" hands it to the plan. The sweep
// lives in the kernel: the view says hello and receives the curve (shared/transport).
import { Chart } from "../shared/chart.js";
import { h, legend } from "../shared/dom.js";
import { fmtInt, fmtValue } from "../shared/format.js";
import { STOP } from "../shared/protocol.js";
import { SeriesView } from "../shared/series_view.js";

export const SERIES = "sweep";
const TERMINAL = new Set(["finished", "stopped", "failed"]);
const TRAITS = [
  "status", "source", "num_iter", "start_lr", "end_lr", "mode", "points", "suggested_lr", "rule", "suggestions",
  "stopped_early", "reason", "chosen_lr", "input_error", "can_stop", "can_use", "linked", "plan_lr", "applied_lr",
  "applied_note",
];
export const RULE_LABELS = { valley: "valley", min_div_10: "min ÷ 10", steepest: "steepest", linear_slope: "linear slope" };
// What a rule that found nothing says, and why (the slope rules skip the warm-up and
// never name the curve's edge: see docs/lr_finder.md).
const NOT_FOUND = {
  valley: ["no valley found", "The smoothed loss never falls for three points in a row"],
  steepest: ["no slope found", "Past the warm-up the loss does not fall, or falls most steeply at the curve's edge"],
  linear_slope: ["no slope found", "Past the warm-up the loss does not fall, or falls most steeply at the curve's edge"],
};

/** A rule's button text and tooltip when it found no rate. */
export function notFound(rule) {
  return NOT_FOUND[rule] || ["none", "This rule found no rate on this curve"];
}

/** A learning rate in three significant digits: "3.16e-3", "1e-2"; "–" for none. */
export function fmtLr(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  return Number(v.toPrecision(3)).toExponential().replace("e+", "e");
}

/**
 * The y range to draw: from the lowest finite loss to the highest smoothed loss, padded.
 * The raw losses of a diverging tail go past the top (the sweep stops there anyway) and
 * would otherwise flatten the part of the curve a rate is picked from. Null: no data.
 * @param {ArrayLike<number>} raw @param {ArrayLike<number>} smooth
 * @returns {[number, number]|null}
 */
export function yClamp(raw, smooth) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of raw) if (Number.isFinite(v)) lo = Math.min(lo, v);
  for (const v of smooth) {
    if (!Number.isFinite(v)) continue;
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  if (!Number.isFinite(hi)) {
    for (const v of raw) if (Number.isFinite(v)) hi = Math.max(hi, v);
  }
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return null;
  const pad = Math.max((hi - lo) * 0.08, Math.abs(hi) * 1e-3, 1e-9);
  return [lo - pad, hi + pad];
}

/**
 * The marks of the chart: labelled markers for the suggestion and the chosen rate (one
 * when they coincide), faint marks for the other rules' picks.
 * @returns {{markers: {x: number, label: string, color: string}[], marks: number[]}}
 */
export function marksOf({ suggestions = {}, rule = "", suggested = null, chosen = null }) {
  const markers = [];
  const same = chosen !== null && suggested !== null && Math.abs(chosen - suggested) <= 1e-6 * suggested;
  if (suggested !== null && Number.isFinite(suggested)) {
    const label = `${RULE_LABELS[rule] || rule} ${fmtLr(suggested)}${same ? " · chosen" : ""}`;
    markers.push({ x: suggested, label, color: "--nnx-suggest" });
  }
  if (chosen !== null && Number.isFinite(chosen) && !same) markers.push({ x: chosen, label: `chosen ${fmtLr(chosen)}`, color: "--nnx-chosen" });
  const marks = [];
  for (const [name, lr] of Object.entries(suggestions)) {
    if (name === rule || lr === null || lr === undefined || !Number.isFinite(lr)) continue;
    marks.push(lr);
  }
  marks.sort((a, b) => a - b);
  return { markers, marks };
}

export class LRFinderView extends SeriesView {
  /** @param {import("../shared/view.js").Model} model @param {HTMLElement} el */
  constructor(model, el) {
    super(model, el);
    this._frames = this._frameScheduler(() => this._render());
    /** a rate being dragged (not yet sent), or null */
    this.preview = null;
    this._yRange = null;
    this._build();
    this._onDispose(() => this.chart.destroy());
    this._connect({ series: [SERIES], onChange: () => this._schedule() });
    for (const name of TRAITS) this._on(`change:${name}`, () => this._refresh());
    this._on("change:error", () => this._error());
    this._refresh();
    this._render();
    this.sync.hello();
  }

  // ------------------------------------------------------------------ DOM

  _build() {
    this._makeRoot("nnx-lr-finder", "LR finder");
    this.status = h("span", { class: "nnx-lr-status", "data-testid": "status", role: "status" });
    this.progress = h("span", { class: "nnx-lr-progress", "data-testid": "progress" });
    this.reason = h("span", { class: "nnx-lr-reason", "data-testid": "reason" });
    this.stopButton = h("button", { type: "button", class: "nnx-btn", "data-testid": "stop", text: "Stop" });
    this.stopButton.addEventListener("click", () => this._stop());
    this.restartButton = h("button", { type: "button", class: "nnx-btn", "data-testid": "restart", text: "Sweep again" });
    this.restartButton.addEventListener("click", () => this.model.send({ kind: "restart" }));
    const header = h("div", { class: "nnx-lr-header" }, [
      h("span", { class: "nnx-lr-title", text: "LR finder" }),
      this.status,
      this.progress,
      this.reason,
      h("span", { class: "nnx-spacer" }),
      this.stopButton,
      this.restartButton,
    ]);

    this.fig = h("figure", { class: "nnx-chart nnx-lr-chart", "data-testid": "lr-chart", "data-points": "0" });
    this.fig.append(h("figcaption", { text: "Loss against learning rate: click or drag on the curve to choose a rate" }));
    this.chart = new Chart(this.fig, {
      title: "Loss against learning rate, raw and smoothed",
      xLabel: "learning rate",
      yLabel: "loss",
      height: 240,
      logX: true,
      series: [
        { label: "loss", color: "--nnx-raw", width: 1 },
        { label: "smoothed", color: "--nnx-accent", width: 2 },
      ],
      xFormat: fmtLr,
      yFormat: fmtValue,
      dragPick: true,
      yRange: () => this._yRange,
      onCursor: (idx) => this._readout(idx),
      onPick: (p) => this._pick(p),
      onDraw: (r) => {
        this.fig.dataset.xRange = r.x.map((v) => Number(v).toPrecision(6)).join(",");
        this.fig.dataset.yRange = r.y.map((v) => Number(v).toPrecision(6)).join(",");
      },
    });
    this.readoutBox = h("div", { class: "nnx-lr-readout", "data-testid": "readout", "aria-live": "off" });
    this.fig.append(
      this.readoutBox,
      legend([
        ["loss", "var(--nnx-raw)"],
        ["smoothed", "var(--nnx-accent)"],
        ["suggested", "var(--nnx-suggest)"],
        ["chosen", "var(--nnx-chosen)"],
        ["other rules", "var(--jp-border-color1, #bdbdbd)", "nnx-dashed"],
      ]),
    );

    this.rules = h("ul", { class: "nnx-lr-rules", "data-testid": "rules", "aria-label": "Every rule's pick" });
    this.chosenInput = h("input", { type: "text", class: "nnx-lr-input", "data-testid": "chosen-lr", spellcheck: "false", autocomplete: "off", "aria-label": "Chosen learning rate", placeholder: "click the curve" });
    this.chosenInput.addEventListener("change", () => this.model.send({ kind: "choose", text: this.chosenInput.value }));
    this.chosenInput.addEventListener("keydown", (e) => {
      if (e.key === "Enter") this.chosenInput.blur();
    });
    this.useButton = h("button", { type: "button", class: "nnx-btn nnx-btn-primary", "data-testid": "use", text: "Use this LR" });
    this.useButton.addEventListener("click", () => this.model.send({ kind: "use" }));
    this.applied = h("span", { class: "nnx-lr-applied", "data-testid": "applied" });
    this.planLr = h("span", { class: "nnx-lr-plan", "data-testid": "plan-lr" });
    const choice = h("div", { class: "nnx-lr-choice" }, [
      h("label", { class: "nnx-lr-label", text: "Chosen LR" }, [this.chosenInput]),
      this.useButton,
      this.planLr,
      this.applied,
    ]);
    this.inputError = h("div", { class: "nnx-lr-input-error", "data-testid": "input-error", role: "alert" });
    this.inputError.hidden = true;
    this.root.append(header, this.fig, this.rules, choice, this.inputError, this._makeError());
  }

  // ------------------------------------------------------------------ kernel -> view

  _refresh() {
    const m = this.model;
    const st = String(m.get("status") || "created");
    this.status.textContent = st;
    this.status.dataset.status = st;
    this.root.dataset.status = st;
    const n = m.get("num_iter") || 0;
    this.progress.textContent = `${fmtInt(m.get("points") || 0)} / ${fmtInt(n)} steps`;
    const reason = m.get("reason") || "";
    this.reason.textContent = reason;
    this.reason.hidden = !reason;

    const canStop = Boolean(m.get("can_stop")) && st === "running";
    this.stopButton.disabled = !canStop;
    this.stopButton.title = canStop ? "Stop the sweep after the current step (the model is restored)" : st === "stopping" ? "Stopping after the current step…" : "No sweep running";
    this.stopButton.textContent = st === "stopping" ? "Stopping…" : "Stop";
    this.restartButton.disabled = !TERMINAL.has(st);
    this.restartButton.title = TERMINAL.has(st) ? "Run the sweep again" : "A sweep is running";

    this._xDomain();
    this._rules();
    const chosen = m.get("chosen_lr");
    const active = typeof document !== "undefined" ? document.activeElement : null;
    const inputError = m.get("input_error") || "";
    // a refused text stays in the field with its error; otherwise the kernel's value
    if (this.chosenInput !== active && !inputError && this.preview === null) this.chosenInput.value = chosen === null || chosen === undefined ? "" : fmtLr(chosen);
    this.chosenInput.setAttribute("aria-invalid", inputError ? "true" : "false");
    this.inputError.textContent = inputError;
    this.inputError.hidden = !inputError;
    this.fig.dataset.chosen = chosen === null || chosen === undefined ? "" : String(chosen);
    const suggested = m.get("suggested_lr");
    this.fig.dataset.suggested = suggested === null || suggested === undefined ? "" : String(suggested);

    const canUse = Boolean(m.get("can_use"));
    this.useButton.disabled = !canUse;
    let title = "Give the chosen rate to the plan";
    if (m.get("linked")) title += " and set the PlanBuilder's learning-rate field";
    if (!canUse) title = chosen === null || chosen === undefined ? "Choose a rate first: click the curve" : "No plan to update: this widget sweeps a model; link a PlanBuilder (widget.link(builder))";
    this.useButton.title = title;
    const planLr = m.get("plan_lr");
    this.planLr.textContent = planLr === null || planLr === undefined ? "" : `${m.get("linked") ? "builder" : "plan"} max_lr ${fmtLr(planLr)}`;
    this.applied.textContent = m.get("applied_note") || "";
    this._marks();
  }

  /** The x axis spans the sweep's range from the start, so the curve grows across it. */
  _xDomain() {
    const a = Number(this.model.get("start_lr"));
    const b = Number(this.model.get("end_lr"));
    const logX = (this.model.get("mode") || "exp") === "exp";
    if (this.chart.opts.logX !== logX) this.chart.setLogX(logX);
    const key = `${a},${b},${logX}`;
    if (key === this._domainKey || !(a > 0) || !(b > a)) return;
    this._domainKey = key;
    this.chart.setXRange(a, b);
  }

  _rules() {
    const m = this.model;
    const suggestions = m.get("suggestions") || {};
    const rule = m.get("rule") || "";
    const key = JSON.stringify([suggestions, rule]);
    if (key === this._rulesKey) return;
    this._rulesKey = key;
    const items = [];
    for (const [name, lr] of Object.entries(suggestions)) {
      const usable = lr !== null && lr !== undefined && Number.isFinite(lr);
      const [missing, why] = notFound(name);
      const b = h("button", { type: "button", class: "nnx-lr-rule", "data-rule": name, text: `${RULE_LABELS[name] || name} ${usable ? fmtLr(lr) : missing}` });
      b.disabled = !usable;
      b.title = usable ? `Choose ${fmtLr(lr)} (the ${RULE_LABELS[name] || name} rule's pick)` : why;
      if (usable) b.addEventListener("click", () => this._choose(lr));
      const li = h("li", {}, [b]);
      if (name === rule) li.dataset.suggested = "true";
      items.push(li);
    }
    this.rules.replaceChildren(...items);
    this.rules.hidden = items.length === 0;
  }

  _marks() {
    const m = this.model;
    const chosen = this.preview !== null ? this.preview : m.get("chosen_lr");
    const { markers, marks } = marksOf({
      suggestions: m.get("suggestions") || {},
      rule: m.get("rule") || "",
      suggested: m.get("suggested_lr") ?? null,
      chosen: chosen ?? null,
    });
    const key = JSON.stringify([markers, marks]);
    if (key === this._marksKey) return;
    this._marksKey = key;
    this.chart.setMarks(marks);
    this.chart.setMarkers(markers);
  }

  // ------------------------------------------------------------------ the curve

  _schedule() {
    this._frames.schedule();
  }

  /** The held points as the chart draws them. */
  curve() {
    const store = this.sync.stores[SERIES];
    return { x: store.column("lr"), raw: store.column("loss"), smooth: store.column("smoothed") };
  }

  _render() {
    const { x, raw, smooth } = this.curve();
    this._yRange = yClamp(raw, smooth);
    this.chart.setData(x, [raw, smooth]);
    this.fig.dataset.points = String(x.length);
  }

  _readout(idx) {
    const { x, raw, smooth } = this.curve();
    if (idx === null || idx === undefined || idx >= x.length) {
      this.readoutBox.textContent = x.length ? "hover the curve for (LR, loss)" : "";
      return;
    }
    this.readoutBox.textContent = `LR ${fmtLr(x[idx])} · loss ${fmtValue(raw[idx])} · smoothed ${fmtValue(smooth[idx])}`;
  }

  /** A click, or a drag's moves and its end: the chosen rate follows; sent when released. */
  _pick(p) {
    if (!Number.isFinite(p.x) || !(p.x > 0)) return;
    if (p.dragging) {
      this.preview = p.x;
      this.chosenInput.value = fmtLr(p.x);
      this._marks();
      return;
    }
    this.preview = null;
    this._choose(p.x);
  }

  _choose(lr) {
    this._setTrait("chosen_lr", lr);
    this.chosenInput.value = fmtLr(lr);
    this._marks();
  }

  _stop() {
    this.stopButton.disabled = true;
    this.model.send({ kind: STOP });
  }
}
