// The Sweep view: the parallel-coordinates chart (one line per finished trial; drag
// along an axis to brush it, double-click the axis to clear; click a line to select
// it), the trials table (status, values, metrics, a checkbox each), Compare and
// "Branch from the best", and the race's TrainingMonitor (a child widget) under it.
// Brushes and the selection are page traits; the two buttons are messages.
import { h } from "../shared/dom.js";
import { WidgetView } from "../shared/view.js";
import { axisDomain, axisLabel, axisValue, fromUnit, linePoints, passes } from "./pcoords.js";

const SVG = "http://www.w3.org/2000/svg";
const SIZE = { width: 640, height: 260, pad: 28 };
// of an axis's height: a brush ending this close to an axis end takes the end
const END_SNAP = 0.03;

function svg(tag, attrs = {}) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

function fmt(v) {
  if (v === null || v === undefined) return "";
  if (typeof v !== "number") return JSON.stringify(v);
  return Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-2 && v !== 0) ? v.toExponential(2) : v.toPrecision(4);
}

export class SweepView extends WidgetView {
  constructor(model, el, opts = {}) {
    super(model, el);
    this.host = opts.host;
    this.signal = opts.signal;
    this._childRefs = {};
    this._makeRoot("nnx-sweep", "Sweep");
    this.header = h("div", { class: "nnx-sweep-header", "data-testid": "header" });
    this.chart = h("div", { class: "nnx-sweep-chart", "data-testid": "chart" });
    this.table = h("div", { class: "nnx-sweep-table", "data-testid": "table" });
    this.compareButton = h("button", { type: "button", class: "nnx-button", "data-testid": "compare", text: "Compare selected" });
    this.branchButton = h("button", { type: "button", class: "nnx-button", "data-testid": "branch", text: "Branch from the best" });
    this.driftButton = h("button", { type: "button", class: "nnx-button", "data-testid": "drift", text: "Drift of two" });
    this.compareButton.addEventListener("click", () => this.model.send({ kind: "compare" }));
    this.driftButton.addEventListener("click", () => this.model.send({ kind: "drift" }));
    this.branchButton.addEventListener("click", () => {
      const sel = this.model.get("selected") || [];
      this.model.send({ kind: "branch", index: sel.length === 1 ? sel[0] : -1 });
    });
    this.comparisonSlot = h("div", { "data-testid": "comparison-slot" });
    this.monitorSlot = h("div", { "data-testid": "monitor-slot" });
    this.root.append(this.header, this.chart, h("div", { class: "nnx-sweep-actions" }, [this.compareButton, this.driftButton, this.branchButton]), this.table, this._makeError(), this.comparisonSlot, this.monitorSlot);
    this._drag = null;
    for (const name of ["axes", "trials", "best", "brushes", "selected", "status", "has_builder"]) this._on(`change:${name}`, () => this._render());
    this._on("change:error", () => this._error());
    this._on("change:monitor", () => this._showChild("monitor", this.monitorSlot));
    this._on("change:comparison", () => this._showChild("comparison", this.comparisonSlot));
    this._render();
    this._showChild("monitor", this.monitorSlot);
    this._showChild("comparison", this.comparisonSlot);
  }

  _rows() {
    return this.model.get("trials") || [];
  }

  _render() {
    const axes = this.model.get("axes") || [];
    const rows = this._rows();
    const brushes = this.model.get("brushes") || {};
    const selected = new Set(this.model.get("selected") || []);
    const best = this.model.get("best");
    // a pruned trial has ended too (its run is kept): it counts as done, and is named
    const pruned = rows.filter((r) => r.status === "pruned").length;
    const done = pruned + rows.filter((r) => r.status === "finished" || r.status === "reused").length;
    const shown = rows.filter((r) => passes(r, axes, brushes)).length;
    const objective = this.model.get("objective");
    const ofWhich = pruned ? `, ${pruned} pruned` : "";
    let head = `${done} of ${rows.length} trials done${ofWhich} (${this.model.get("status")}); ${shown} shown`;
    if (best >= 0 && rows[best]) head += `; best: trial ${best}, ${objective} ${fmt(rows[best].metrics[objective])}`;
    this.header.textContent = head;
    this.branchButton.disabled = !this.model.get("has_builder") || best < 0;
    this.compareButton.disabled = selected.size === 0;
    this.driftButton.disabled = selected.size !== 2;
    this._drawChart(axes, rows, brushes, selected, best);
    this._drawTable(axes, rows, brushes, selected, best);
  }

  _drawChart(axes, rows, brushes, selected, best) {
    const { width, height, pad } = SIZE;
    const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", "aria-label": "parallel coordinates" });
    const domains = axes.map((a) => axisDomain(a, rows));
    const step = axes.length > 1 ? (width - 2 * pad) / (axes.length - 1) : 0;
    for (const row of rows) {
      const pts = linePoints(row, axes, domains, SIZE);
      if (!pts) continue;
      const inside = passes(row, axes, brushes);
      let cls = inside ? "nnx-sweep-line" : "nnx-sweep-line nnx-sweep-out";
      if (selected.has(row.index)) cls += " nnx-sweep-selected";
      if (row.index === best) cls += " nnx-sweep-best";
      const line = svg("polyline", { points: pts, class: cls, "data-trial": row.index, fill: "none" });
      line.addEventListener("click", () => this._toggle(row.index));
      root.append(line);
    }
    axes.forEach((axis, i) => {
      const x = pad + i * step;
      const g = svg("g", { "data-axis": axis.key });
      g.append(svg("line", { x1: x, x2: x, y1: pad, y2: height - pad, class: "nnx-sweep-axis" }));
      const label = svg("text", { x, y: pad - 10, "text-anchor": "middle", class: "nnx-sweep-label" });
      label.textContent = axisLabel(axis);
      const d = domains[i];
      const lo = svg("text", { x: x + 4, y: height - pad + 14, class: "nnx-sweep-tick" });
      const hi = svg("text", { x: x + 4, y: pad + 4, class: "nnx-sweep-tick" });
      lo.textContent = axis.scale === "choice" ? fmt(axis.choices[0]) : fmt(d.lo);
      hi.textContent = axis.scale === "choice" ? fmt(axis.choices[axis.choices.length - 1]) : fmt(d.hi);
      g.append(label, lo, hi);
      const span = brushes[axis.key];
      if (span) {
        const toY = (v) => pad + (1 - (d.log ? (Math.log(v) - Math.log(d.lo)) / (Math.log(d.hi) - Math.log(d.lo)) : (v - d.lo) / (d.hi - d.lo))) * (height - 2 * pad);
        const y1 = Math.max(pad, Math.min(toY(span[1]), height - pad));
        const y2 = Math.max(pad, Math.min(toY(span[0]), height - pad));
        g.append(svg("rect", { x: x - 6, y: y1, width: 12, height: Math.max(2, y2 - y1), class: "nnx-sweep-brush", "data-testid": `brush-${axis.key}` }));
      }
      const hit = svg("rect", { x: x - 10, y: pad, width: 20, height: height - 2 * pad, class: "nnx-sweep-hit", fill: "transparent" });
      hit.addEventListener("pointerdown", (ev) => (this._drag = { axis: i, y0: this._svgY(root, ev) }));
      hit.addEventListener("pointerup", (ev) => this._endDrag(root, ev, axes, domains));
      hit.addEventListener("dblclick", () => this.brush(axis.key, null));
      g.append(hit);
      root.append(g);
    });
    this.chart.replaceChildren(root);
  }

  _svgY(root, ev) {
    const box = root.getBoundingClientRect();
    return box.height ? ((ev.clientY - box.top) / box.height) * SIZE.height : ev.clientY;
  }

  _endDrag(root, ev, axes, domains) {
    const drag = this._drag;
    this._drag = null;
    if (!drag) return;
    const { height, pad } = SIZE;
    const ys = [drag.y0, this._svgY(root, ev)].map((y) => 1 - (Math.min(Math.max(y, pad), height - pad) - pad) / (height - 2 * pad));
    if (Math.abs(ys[0] - ys[1]) < 0.01) return;
    const d = domains[drag.axis];
    // a drag that ends within a few pixels of an axis end takes the end itself (exactly,
    // not its float image), so the highest or lowest trial and an end choice can be kept
    const [a, b] = ys.map((u) => (u >= 1 - END_SNAP ? d.hi : u <= END_SNAP ? d.lo : fromUnit(u, d)));
    this.brush(axes[drag.axis].key, [Math.min(a, b), Math.max(a, b)]);
  }

  /** Brush `key` to [lo, hi] (in the axis's values; a choice axis: indices), or clear it. */
  brush(key, span) {
    const next = { ...(this.model.get("brushes") || {}) };
    if (span) next[key] = span;
    else delete next[key];
    this._setTrait("brushes", next);
  }

  _toggle(index) {
    const sel = new Set(this.model.get("selected") || []);
    if (sel.has(index)) sel.delete(index);
    else sel.add(index);
    this._setTrait("selected", [...sel].sort((a, b) => a - b));
  }

  _drawTable(axes, rows, brushes, selected, best) {
    const head = h("tr", {}, [h("th", { text: "" }), h("th", { text: "trial" }), h("th", { text: "status" }), h("th", { text: "seed" }), ...axes.map((a) => h("th", { text: axisLabel(a) })), h("th", { text: "run" })]);
    const body = rows.map((r) => {
      const box = h("input", { type: "checkbox", "aria-label": `select trial ${r.index}` });
      box.checked = selected.has(r.index);
      box.addEventListener("change", () => this._toggle(r.index));
      const cells = axes.map((a) => {
        const v = a.kind === "value" ? r.values[a.key] : r.metrics[a.key];
        return h("td", { text: v === undefined || (a.kind === "metric" && axisValue(r, a) === null) ? "" : fmt(v) });
      });
      const cls = [passes(r, axes, brushes) ? "" : "nnx-sweep-out", r.index === best ? "nnx-sweep-best" : ""].join(" ").trim();
      return h("tr", { "data-trial": String(r.index), "data-status": r.status, class: cls }, [h("td", {}, [box]), h("td", { text: String(r.index) }), h("td", { text: r.status, title: r.error || "" }), h("td", { text: String(r.seed) }), ...cells, h("td", { text: r.run_id ? r.run_id.slice(0, 8) : "" })]);
    });
    this.table.replaceChildren(h("table", {}, [h("thead", {}, [head]), h("tbody", {}, body)]));
  }

  async _showChild(name, slot) {
    const ref = this.model.get(name);
    if (ref === this._childRefs[name]) return;
    this._childRefs[name] = ref;
    slot.replaceChildren();
    if (!ref) return;
    if (!this.host || typeof this.host.getWidget !== "function") {
      slot.textContent = `This front end cannot draw the ${name} inside the sweep: display sweep.${name} in a cell.`;
      return;
    }
    try {
      const child = await this.host.getWidget(ref);
      if (this._disposed || this._childRefs[name] !== ref) return;
      const box = h("div");
      slot.append(box);
      await child.render({ el: box, signal: this.signal });
    } catch (err) {
      slot.textContent = `nnx-lab: the ${name} could not be drawn (${err && err.message ? err.message : err})`;
    }
  }
}
