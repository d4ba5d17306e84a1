// ModelSummary's view: the engine's summary (summarize_model(...).to_json()) as a tree
// table. A subtree folds and unfolds (the folded paths are the page trait `collapsed`,
// so a reload keeps them); the search box (page trait `query`) keeps the rows whose path
// or type holds its text, with their ancestors, unfolded. Extra per-row columns come in
// each row's `columns` dict and are drawn after the built-in ones. The view computes
// nothing: it draws what the kernel sent.
import { h, onCommit } from "../shared/dom.js";
import { fmtInt } from "../shared/format.js";
import { WidgetView } from "../shared/view.js";

/** "(1, 8, 8)" for [1, 8, 8]; several outputs joined; "" for none. */

// The trainable share, the number a parameter-efficient fine-tune is judged by; small
// shares keep two significant digits (0.42%), as the engine's text() does.
function fraction(t) {
  if (typeof t.trainable_fraction !== "number" || !t.frozen) return "";
  const pct = 100 * t.trainable_fraction;
  const text = pct > 0 && pct < 1 ? pct.toPrecision(2) : pct.toFixed(1);
  return ` (${text}% trainable)`;
}

export function shapeText(shape) {
  if (shape === null || shape === undefined) return "";
  if (shape.length && Array.isArray(shape[0])) return shape.map(shapeText).join(", ");
  return `(${shape.join(", ")})`;
}

/** Bytes in words: "512 B", "1.5 KiB", "3.2 MiB". */
export function bytesText(n) {
  const units = ["B", "KiB", "MiB", "GiB"];
  let v = Number(n) || 0;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`;
}

/** The parent path of a row's path ("" for a child of the root, null for the root). */
export function parentOf(path) {
  if (path === "") return null;
  const i = path.lastIndexOf(".");
  return i < 0 ? "" : path.slice(0, i);
}

/**
 * The rows to draw: with a query, the matches and their ancestors; without one, every
 * row whose ancestors are all unfolded. Each comes with whether it matched.
 * @param {any[]} rows @param {string[]} collapsed @param {string} query
 */
export function visibleRows(rows, collapsed, query) {
  const folded = new Set(collapsed || []);
  const q = (query || "").trim().toLowerCase();
  if (q) {
    const matched = new Set(rows.filter((r) => r.path.toLowerCase().includes(q) || r.type.toLowerCase().includes(q)).map((r) => r.path));
    const keep = new Set();
    for (const path of matched) {
      for (let p = path; p !== null; p = parentOf(p)) keep.add(p);
    }
    return rows.filter((r) => keep.has(r.path)).map((r) => ({ row: r, match: matched.has(r.path) }));
  }
  const hidden = (path) => {
    for (let p = parentOf(path); p !== null; p = parentOf(p)) if (folded.has(p)) return true;
    return false;
  };
  return rows.filter((r) => !hidden(r.path)).map((r) => ({ row: r, match: false }));
}

export class ModelSummaryView extends WidgetView {
  /** @param {import("../shared/view.js").Model} model @param {HTMLElement} el */
  constructor(model, el) {
    super(model, el);
    this._build();
    for (const name of ["data", "collapsed", "query", "version"]) this._on(`change:${name}`, () => this._render());
    this._on("change:error", () => this._error());
    this._render();
  }

  _build() {
    this._makeRoot("nnx-msum", "Model summary");
    this.search = h("input", { type: "search", placeholder: "search a layer", "aria-label": "search a layer by name or type", "data-testid": "search" });
    // filtered at once in the page; the kernel hears the query when typing pauses
    /** @type {string|null} */
    this._typed = null;
    let timer = null;
    const send = () => {
      clearTimeout(timer);
      timer = null;
      this._setTrait("query", this.search.value);
    };
    onCommit(this.search, send);
    this.search.addEventListener("input", () => {
      this._typed = this.search.value;
      this._render();
      clearTimeout(timer);
      timer = setTimeout(send, 300);
    });
    this._onDispose(() => clearTimeout(timer));
    this.expand = h("button", { type: "button", class: "nnx-button", "data-testid": "expand-all", text: "expand all" });
    this.expand.addEventListener("click", () => this._setTrait("collapsed", []));
    this.fold = h("button", { type: "button", class: "nnx-button", "data-testid": "collapse-all", text: "collapse all" });
    this.fold.addEventListener("click", () => {
      const rows = (this.model.get("data") || {}).rows || [];
      this._setTrait("collapsed", rows.filter((r) => r.has_children && r.path !== "").map((r) => r.path));
    });
    this.refresh = h("button", { type: "button", class: "nnx-button", "data-testid": "refresh", text: "refresh" });
    this.refresh.addEventListener("click", () => this.model.send({ kind: "refresh" }));
    this.totals = h("span", { class: "nnx-ms-totals", "data-testid": "totals", role: "status" });
    this.thead = h("thead");
    this.tbody = h("tbody");
    this.memory = h("p", { class: "nnx-ms-memory", "data-testid": "memory" });
    this.notes = h("ul", { class: "nnx-ms-notes", "data-testid": "notes" });
    this.root.append(
      h("div", { class: "nnx-ms-title", text: "Model summary" }),
      h("div", { class: "nnx-ms-bar" }, [this.search, this.expand, this.fold, this.refresh, this.totals]),
      h("div", { class: "nnx-ms-box" }, [h("table", { class: "nnx-ms-table", "data-testid": "summary-table" }, [this.thead, this.tbody])]),
      this.memory,
      this.notes,
      this._makeError(),
    );
  }

  _toggle(path) {
    const folded = new Set(this.model.get("collapsed") || []);
    if (folded.has(path)) folded.delete(path);
    else folded.add(path);
    this._setTrait("collapsed", [...folded]);
  }

  _render() {
    const m = this.model;
    const data = m.get("data") || {};
    const rows = data.rows || [];
    const t = data.totals || {};
    const sent = m.get("query") || "";
    if (this._typed === sent) this._typed = null;
    const query = this._typed ?? sent;
    if (this.search.value !== query) this.search.value = query;
    const folded = new Set(m.get("collapsed") || []);
    const shapes = rows.some((r) => r.output_shape !== null && r.output_shape !== undefined);
    const extra = [...new Set(rows.flatMap((r) => Object.keys(r.columns || {})))];
    const head = ["layer", "type", "params", "trainable", "frozen", "state", "dtype", "device", ...(shapes ? ["output"] : []), ...extra];
    this.thead.replaceChildren(h("tr", {}, head.map((name) => h("th", { scope: "col", text: name }))));
    const shown = visibleRows(rows, [...folded], query);
    this.tbody.replaceChildren(
      ...shown.map(({ row: r, match }) => {
        const open = !folded.has(r.path) || Boolean(query.trim());
        const toggle = r.has_children
          ? h("button", { type: "button", class: "nnx-ms-toggle", "data-testid": "toggle", "aria-expanded": open ? "true" : "false", "aria-label": `${open ? "fold" : "unfold"} ${r.path || "the model"}`, text: open ? "▾" : "▸" })
          : h("span", { class: "nnx-ms-leaf" });
        if (r.has_children) toggle.addEventListener("click", () => this._toggle(r.path));
        const name = h("td", { class: "nnx-ms-name", style: `padding-left: ${8 + 14 * r.depth}px` }, [toggle, h("code", { text: r.name || "(model)" })]);
        name.title = r.path || "the whole model";
        const cells = [
          name,
          h("td", { class: "nnx-ms-type", text: r.type }),
          h("td", { text: fmtInt(r.params) }),
          h("td", { text: fmtInt(r.trainable) }),
          h("td", { text: fmtInt(r.frozen) }),
          h("td", { class: "nnx-ms-text nnx-ms-state", text: r.state }),
          h("td", { class: "nnx-ms-text", text: (r.dtypes || []).join(", ") }),
          h("td", { class: "nnx-ms-text", text: (r.devices || []).join(", ") }),
        ];
        if (shapes) cells.push(h("td", { class: "nnx-ms-text", "data-testid": "shape", text: shapeText(r.output_shape) }));
        for (const key of extra) {
          const v = (r.columns || {})[key];
          cells.push(h("td", { class: "nnx-ms-text", text: v === undefined || v === null ? "" : String(v) }));
        }
        return h("tr", { "data-path": r.path, "data-state": r.state || "none", "data-match": match ? "true" : "false" }, cells);
      }),
    );
    this.totals.textContent = rows.length
      ? `${fmtInt(t.params)} parameters: ${fmtInt(t.trainable)} trainable, ${fmtInt(t.frozen)} frozen${fraction(t)}; ${shown.length} of ${rows.length} modules shown`
      : "no summary yet";
    this.memory.textContent = rows.length
      ? `memory: parameters ${bytesText(t.param_bytes)}, buffers ${bytesText(t.buffer_bytes)}, gradients ${bytesText(t.grad_bytes)}, ${t.optimizer} state ${bytesText(t.optimizer_bytes)}; total ${bytesText(t.total_bytes)}` +
        (data.input_shape ? `; input ${shapeText(data.input_shape)}` : "")
      : "";
    const notes = data.notes || [];
    this.notes.replaceChildren(...notes.map((n) => h("li", { text: n })));
    this.notes.hidden = !notes.length;
  }
}
