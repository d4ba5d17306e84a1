// Interpretation's view: the kernel's interpret(...).to_json(), sent once, drawn and
// paged here. Classification: the confusion matrix (counts, or row-normalized with the
// page trait `normalize`), a cell click (page trait `cell`) lists that cell's samples,
// and the top-losses table; regression: the residuals-vs-target scatter and the
// largest errors. Samples are drawn from their values: images on small canvases, table
// rows, or text. Paging is the page's own state: no message to the kernel.
import { h } from "../shared/dom.js";
import { fmtInt } from "../shared/format.js";
import { WidgetView } from "../shared/view.js";

/** One page of `items`: {rows, page (clamped), pages}. */
export function pageOf(items, page, size) {
  const n = (items || []).length;
  const pages = Math.max(1, Math.ceil(n / Math.max(1, size)));
  const p = Math.min(Math.max(0, page | 0), pages - 1);
  return { rows: (items || []).slice(p * size, (p + 1) * size), page: p, pages };
}

/** The text of a confusion cell: its count, or its share of the row. */
export function cellText(data, t, p, normalize) {
  if (normalize) return `${(100 * data.confusion_normalized[t][p]).toFixed(1)}%`;
  return fmtInt(data.confusion[t][p]);
}

/** An image's RGBA bytes: (C, H, W) values, min-max scaled over the image (C 1: grey). */
export function imagePixels(values, shape) {
  const [c, hgt, wid] = shape.length === 3 ? shape : [1, ...shape];
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  const span = hi > lo ? hi - lo : 1;
  const out = new Uint8ClampedArray(hgt * wid * 4);
  const plane = hgt * wid;
  for (let i = 0; i < plane; i++) {
    for (let k = 0; k < 3; k++) {
      const v = values[(c >= 3 ? k : 0) * plane + i];
      out[4 * i + k] = Math.round((255 * (v - lo)) / span);
    }
    out[4 * i + 3] = 255;
  }
  return out;
}

function fmtP(v) {
  return v === null || v === undefined ? "" : v.toFixed(3);
}

function fmtNum(v) {
  if (v === null || v === undefined) return "";
  return Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(3) : v.toPrecision(4);
}

/** A sample drawn from its display record; `scale`: pixels per image pixel. */
export function sampleNode(display, scale = 4) {
  if (!display) return h("span", { text: "" });
  if (display.kind === "image") {
    const [, hgt, wid] = display.shape;
    const canvas = h("canvas", { width: String(wid), height: String(hgt), "data-testid": "image" });
    canvas.style.width = `${wid * scale}px`;
    canvas.style.height = `${hgt * scale}px`;
    const ctx = canvas.getContext ? canvas.getContext("2d") : null;
    if (ctx) ctx.putImageData(new ImageData(imagePixels(display.values, display.shape), wid, hgt), 0, 0);
    return canvas;
  }
  if (display.kind === "tokens") return h("span", { class: "nnx-int-text", "data-testid": "text", text: display.text });
  const cells = display.names.map((n, i) => `${n}=${fmtNum(display.values[i])}`);
  return h("span", { class: "nnx-int-row", "data-testid": "row", text: cells.join("  ") });
}

export class InterpretationView extends WidgetView {
  /** @param {import("../shared/view.js").Model} model @param {HTMLElement} el */
  constructor(model, el) {
    super(model, el);
    this._pages = { cell: 0, top: 0 };
    this._makeRoot("nnx-int", "Interpretation");
    this.body = h("div");
    this.root.append(h("div", { class: "nnx-int-title", text: "The mistakes a model makes" }), this.body, this._makeError());
    this._on("change:data", () => {
      this._pages = { cell: 0, top: 0 };
      this._render();
    });
    for (const name of ["normalize", "cell", "page_size"]) this._on(`change:${name}`, () => this._render());
    this._on("change:error", () => this._error());
    this._render();
  }

  _labels() {
    return (this.model.get("data") || {}).labels || [];
  }

  _pager(key, total) {
    const size = this.model.get("page_size") || 12;
    const { page, pages } = pageOf(new Array(total), this._pages[key], size);
    const prev = h("button", { type: "button", class: "nnx-button", "data-testid": `${key}-prev`, text: "‹ prev" });
    const next = h("button", { type: "button", class: "nnx-button", "data-testid": `${key}-next`, text: "next ›" });
    prev.disabled = page === 0;
    next.disabled = page >= pages - 1;
    prev.addEventListener("click", () => this._turn(key, page - 1));
    next.addEventListener("click", () => this._turn(key, page + 1));
    return h("div", { class: "nnx-int-pager" }, [prev, h("span", { "data-testid": `${key}-page`, text: `page ${page + 1} of ${pages}` }), next]);
  }

  _turn(key, page) {
    this._pages[key] = page;
    this._render();
  }

  _render() {
    const data = this.model.get("data") || {};
    if (!data.task) {
      this.body.replaceChildren(h("p", { class: "nnx-int-note", text: "nothing interpreted yet" }));
      return;
    }
    const notes = [];
    if (data.source && data.source.kind === "run") notes.push(`BEST checkpoint of run ${data.source.run_id.slice(0, 8)} (epoch ${data.source.epoch})`);
    if (data.calibrated) notes.push(`probabilities calibrated (T = ${data.temperature.toPrecision(3)})`);
    if (data.policy) notes.push(`abstention: ${data.policy.kind} < ${data.policy.threshold.toPrecision(3)} is declined`);
    const head = [h("p", { class: "nnx-int-summary", "data-testid": "summary", text: data.summary })];
    if (notes.length) head.push(h("p", { class: "nnx-int-note", "data-testid": "notes", text: notes.join("; ") }));
    const parts = data.task === "regression" ? this._regression(data) : this._classification(data);
    this.body.replaceChildren(...head, ...parts);
  }

  _classification(data) {
    const labels = this._labels();
    const normalize = Boolean(this.model.get("normalize"));
    const picked = this.model.get("cell") || [];
    const toggle = h("button", { type: "button", class: "nnx-button", "data-testid": "normalize", "aria-pressed": normalize ? "true" : "false", text: normalize ? "show counts" : "show row %" });
    toggle.addEventListener("click", () => this._setTrait("normalize", !normalize));
    const rows = labels.map((name, t) =>
      h("tr", {}, [
        h("th", { scope: "row", text: name }),
        ...labels.map((_, p) => {
          const share = data.confusion_normalized[t][p];
          const button = h("button", { type: "button", "data-cell": `${t},${p}`, "aria-label": `true ${name}, predicted ${labels[p]}`, text: cellText(data, t, p, normalize) });
          button.addEventListener("click", () => {
            this._pages.cell = 0;
            this._setTrait("cell", [t, p]);
          });
          const td = h("td", { "data-dark": share > 0.55 ? "true" : "false", "data-picked": picked[0] === t && picked[1] === p ? "true" : "false" }, [button]);
          td.style.background = `rgba(25, 118, 210, ${(0.85 * share).toFixed(3)})`;
          return td;
        }),
      ]),
    );
    const matrix = h("table", { class: "nnx-int-matrix", "data-testid": "confusion" }, [
      h("thead", {}, [h("tr", {}, [h("th", { text: "true \\ predicted" }), ...labels.map((n) => h("th", { scope: "col", text: n }))])]),
      h("tbody", {}, rows),
    ]);
    const out = [h("div", { class: "nnx-int-bar" }, [toggle]), matrix];
    if (picked.length === 2) out.push(...this._cell(data, picked));
    out.push(h("div", { class: "nnx-int-title", text: "Top losses" }), ...this._mistakes(data.top_losses || [], "top", true));
    return out;
  }

  _cell(data, [t, p]) {
    const labels = this._labels();
    const cell = (data.cells || {})[`${t},${p}`] || { count: 0, samples: [] };
    const kept = cell.samples.length < cell.count ? ` (the first ${fmtInt(cell.samples.length)} kept)` : "";
    const title = h("div", { class: "nnx-int-note", "data-testid": "cell-title", text: `true ${labels[t]}, predicted ${labels[p]}: ${fmtInt(cell.count)} samples${kept}` });
    const size = this.model.get("page_size") || 12;
    const { rows, page } = pageOf(cell.samples, this._pages.cell, size);
    this._pages.cell = page;
    const tiles = rows.map((s) =>
      h("div", { class: "nnx-int-tile", "data-id": String(s.id) }, [sampleNode(s.display), h("span", { text: `#${s.id} p=${fmtP(s.probability)}` })]),
    );
    return [title, h("div", { class: "nnx-int-grid", "data-testid": "cell-samples" }, tiles), this._pager("cell", cell.samples.length)];
  }

  _mistakes(items, key, classes) {
    const labels = this._labels();
    const size = this.model.get("page_size") || 12;
    const { rows, page } = pageOf(items, this._pages[key], size);
    this._pages[key] = page;
    const declined = items.some((m) => m.declined !== null && m.declined !== undefined);
    const head = classes
      ? ["sample", "id", "true", "predicted", "probability", "p(true)", "loss", ...(declined ? ["declined"] : [])]
      : ["sample", "id", "target", "prediction", "|error|"];
    const body = rows.map((m) => {
      const cells = classes
        ? [labels[m.target] ?? m.target, labels[m.prediction] ?? m.prediction, fmtP(m.probability), fmtP(m.true_probability), fmtNum(m.loss), ...(declined ? [m.declined ? "yes" : "no"] : [])]
        : [fmtNum(m.target), fmtNum(m.prediction), fmtNum(m.loss)];
      return h("tr", { "data-id": String(m.id), "data-declined": m.declined ? "true" : "false" }, [
        h("td", { class: "nnx-int-sample" }, [sampleNode(m.display, 3)]),
        h("td", { text: String(m.id) }),
        ...cells.map((c) => h("td", { text: String(c) })),
      ]);
    });
    const table = h("table", { class: "nnx-int-table", "data-testid": `${key}-table` }, [
      h("thead", {}, [h("tr", {}, head.map((n) => h("th", { scope: "col", text: n })))]),
      h("tbody", {}, body),
    ]);
    return [table, this._pager(key, items.length)];
  }

  _regression(data) {
    const pts = data.points || { targets: [], residuals: [], total: 0 };
    const shown = pts.targets.length < pts.total ? ` (${fmtInt(pts.targets.length)} of ${fmtInt(pts.total)} points, evenly spaced)` : "";
    return [
      h("div", { class: "nnx-int-title", text: `Residuals (prediction − target) against target${shown}` }),
      scatter(pts.targets, pts.residuals),
      h("div", { class: "nnx-int-title", text: "Largest errors" }),
      ...this._mistakes(data.largest_errors || [], "top", false),
    ];
  }
}

/** An SVG scatter of y against x with the y = 0 line and the axes' ranges. */
export function scatter(xs, ys, width = 420, height = 220) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "nnx-int-scatter");
  svg.setAttribute("data-testid", "residuals");
  svg.setAttribute("width", String(width));
  svg.setAttribute("height", String(height));
  const pad = 34;
  const range = (v) => {
    let lo = Math.min(...v);
    let hi = Math.max(...v);
    if (!(hi > lo)) [lo, hi] = [lo - 1, hi + 1];
    return [lo, hi];
  };
  const [x0, x1] = xs.length ? range(xs) : [0, 1];
  const [y0, y1] = ys.length ? range([...ys, 0]) : [-1, 1];
  const sx = (v) => pad + ((v - x0) / (x1 - x0)) * (width - 2 * pad);
  const sy = (v) => height - pad - ((v - y0) / (y1 - y0)) * (height - 2 * pad);
  const add = (tag, attrs, text) => {
    const node = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    svg.append(node);
  };
  add("line", { x1: pad, x2: width - pad, y1: sy(0), y2: sy(0), "data-testid": "zero" });
  for (let i = 0; i < xs.length; i++) add("circle", { cx: sx(xs[i]).toFixed(1), cy: sy(ys[i]).toFixed(1), r: 2 });
  add("text", { x: pad, y: height - 8 }, `target ${fmtNum(x0)} … ${fmtNum(x1)}`);
  add("text", { x: 2, y: 12 }, `residual ${fmtNum(y0)} … ${fmtNum(y1)}`);
  return svg;
}
