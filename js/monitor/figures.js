// The monitor's figure panel: the figures a callback handed the run per epoch
// (show_figure: a PNG, a plotly figure's JSON, the points of a scatter). The kernel
// lists them in the `figures` trait; the panel asks for the one shown (name, epoch
// slider) and keeps the last few it received. A PNG is shown as an image; a scatter and
// a plotly figure's x/y traces are drawn on a canvas (plotly itself is not bundled:
// trace types without x and y arrays are named, not drawn).
import { h } from "../shared/dom.js";
import { resolveColor } from "../shared/theme.js";
import { TERM_COLORS } from "./terms.js";

/** @typedef {import("./view.js").MonitorView} MonitorView */

const CACHED = 24; // figures kept in the page; the kernel (and the run folder) keep the rest
const WIDTH = 360;
const HEIGHT = 240;

/** The panel, appended to `parent` (hidden until the run has a figure). @param {MonitorView} v */
export function buildFigures(v, parent) {
  v.figureName = h("select", { class: "nnx-input", "data-testid": "figure-name", "aria-label": "Figure" });
  v.figureEpoch = h("input", { type: "range", min: "0", max: "0", step: "1", value: "0", "data-testid": "figure-epoch", "aria-label": "Epoch of the figure" });
  v.figureEpochLabel = h("span", { class: "nnx-nowrap", "data-testid": "figure-epoch-label" });
  v.figureImg = h("img", { class: "nnx-figure-img", "data-testid": "figure-img", alt: "" });
  v.figureCanvas = h("canvas", { class: "nnx-figure-canvas", "data-testid": "figure-canvas", width: String(WIDTH), height: String(HEIGHT) });
  v.figureNote = h("p", { class: "nnx-note", "data-testid": "figure-note" });
  v.figureBody = h("div", { class: "nnx-figure-body", "data-testid": "figure-body" }, [v.figureImg, v.figureCanvas]);
  v.figurePanel = h("figure", { class: "nnx-chart nnx-figures", "data-testid": "figures" }, [
    h("figcaption", {}, [h("label", { text: "Figure: " }, [v.figureName]), " ", h("label", { class: "nnx-range" }, ["epoch", v.figureEpoch, v.figureEpochLabel])]),
    v.figureBody,
    v.figureNote,
  ]);
  v.figurePanel.hidden = true;
  v.figureImg.hidden = true;
  v.figureCanvas.hidden = true;
  v._figureCache = new Map();
  v._figureFollow = true; // the slider follows the newest epoch until it is moved back
  v.figureName.addEventListener("change", () => {
    v._figureFollow = true;
    renderFigures(v);
  });
  v.figureEpoch.addEventListener("input", () => {
    v._figureFollow = Number(v.figureEpoch.value) === Number(v.figureEpoch.max);
    showCurrent(v);
  });
  parent.append(v.figurePanel);
  v._onDispose(() => {
    if (v._figureUrl) URL.revokeObjectURL(v._figureUrl);
  });
}

/** The names and, for the chosen name, the epochs of the figures the kernel lists. */
function listed(v) {
  const figures = v.model.get("figures") || [];
  const names = [...new Set(figures.map((f) => f.name))];
  return { figures, names };
}

/** The `figures` trait changed (or a view was built): offer names and epochs. @param {MonitorView} v */
export function renderFigures(v) {
  const { figures, names } = listed(v);
  v.figurePanel.hidden = figures.length === 0;
  if (!figures.length) {
    v._figureCache.clear();
    v.figureName.replaceChildren();
    return;
  }
  const current = v.figureName.value;
  if ([...v.figureName.options].map((o) => o.value).join("|") !== names.join("|")) {
    v.figureName.replaceChildren(...names.map((n) => h("option", { value: n, text: n })));
  }
  v.figureName.value = names.includes(current) ? current : names[0];
  const epochs = figures.filter((f) => f.name === v.figureName.value).map((f) => f.epoch);
  const at = Math.min(Number(v.figureEpoch.value) || 0, epochs.length - 1);
  v._figureEpochs = epochs;
  v.figureEpoch.max = String(epochs.length - 1);
  v.figureEpoch.value = String(v._figureFollow ? epochs.length - 1 : at);
  v.figureEpoch.disabled = epochs.length < 2;
  showCurrent(v);
}

function currentKey(v) {
  const epoch = v._figureEpochs ? v._figureEpochs[Number(v.figureEpoch.value)] : undefined;
  return epoch === undefined ? null : { name: v.figureName.value, epoch, key: `${v.figureName.value}@${epoch}` };
}

/** Show the chosen figure: from the page's cache, or ask the kernel for it. */
function showCurrent(v) {
  const cur = currentKey(v);
  if (!cur) return;
  v.figureEpochLabel.textContent = String(cur.epoch);
  v.figurePanel.dataset.shown = cur.key;
  const got = v._figureCache.get(cur.key);
  if (got) {
    draw(v, got);
    return;
  }
  v.figureNote.textContent = "loading…";
  if (v.sync) v.model.send({ kind: "figure", view: v.sync.view, name: cur.name, epoch: cur.epoch });
}

/** A custom message: a figure this view asked for. Returns whether it was one. @param {MonitorView} v */
export function onFigureMessage(v, msg, buffers) {
  if (!msg || msg.kind !== "figure_data" || !v.sync || msg.to !== v.sync.view) return false;
  const buf = buffers && buffers[0];
  const bytes = buf ? new Uint8Array(buf.buffer || buf, buf.byteOffset || 0, buf.byteLength) : null;
  const key = `${msg.name}@${msg.epoch}`;
  v._figureCache.delete(key);
  v._figureCache.set(key, msg.error ? { error: String(msg.error) } : { kind: msg.figure_kind, bytes: bytes ? bytes.slice() : new Uint8Array(0) });
  while (v._figureCache.size > CACHED) v._figureCache.delete(v._figureCache.keys().next().value);
  const cur = currentKey(v);
  if (cur && cur.key === key) draw(v, v._figureCache.get(key));
  return true;
}

/** Points of a scatter figure, or of a plotly figure's traces with numeric x and y. */
export function figurePoints(kind, json) {
  if (kind === "scatter") {
    const groups = json.group ? [...new Set(json.group)] : [""];
    return {
      traces: groups.map((g) => {
        const idx = json.x.map((_x, i) => i).filter((i) => !json.group || json.group[i] === g);
        return { name: g, x: idx.map((i) => json.x[i]), y: idx.map((i) => json.y[i]), lines: false };
      }),
      skipped: [],
    };
  }
  const traces = [];
  const skipped = [];
  for (const t of json.data || []) {
    if (Array.isArray(t.x) && Array.isArray(t.y)) {
      traces.push({ name: t.name || t.type || "trace", x: t.x.map(Number), y: t.y.map(Number), lines: typeof t.mode === "string" ? t.mode.includes("lines") : !t.type || t.type === "scatter" });
    } else skipped.push(t.type || "trace");
  }
  return { traces, skipped };
}

function draw(v, fig) {
  v.figureImg.hidden = true;
  v.figureCanvas.hidden = true;
  if (fig.error) {
    v.figureNote.textContent = fig.error;
    v.figureBody.dataset.kind = "";
    return;
  }
  v.figureBody.dataset.kind = fig.kind;
  v.figureNote.textContent = "";
  if (fig.kind === "png") {
    if (v._figureUrl) URL.revokeObjectURL(v._figureUrl);
    v._figureUrl = URL.createObjectURL(new Blob([fig.bytes], { type: "image/png" }));
    v.figureImg.src = v._figureUrl;
    v.figureImg.hidden = false;
    return;
  }
  let json;
  try {
    json = JSON.parse(new TextDecoder().decode(fig.bytes));
  } catch {
    v.figureNote.textContent = "the figure is not JSON";
    return;
  }
  const { traces, skipped } = figurePoints(fig.kind, json);
  v.figureCanvas.hidden = false;
  v.figureBody.dataset.points = String(traces.reduce((n, t) => n + t.x.length, 0));
  v.figureBody.dataset.traces = traces.map((t) => t.name).join(",");
  if (skipped.length) v.figureNote.textContent = `Not drawn here: ${skipped.join(", ")} traces (only x/y traces are).`;
  paint(v, traces);
}

/** The traces on the canvas: shared axes from the finite values, one colour per trace. */
function paint(v, traces) {
  const ctx = v.figureCanvas.getContext ? v.figureCanvas.getContext("2d") : null;
  if (!ctx) return;
  const xs = traces.flatMap((t) => t.x).filter(Number.isFinite);
  const ys = traces.flatMap((t) => t.y).filter(Number.isFinite);
  ctx.clearRect(0, 0, WIDTH, HEIGHT);
  if (!xs.length || !ys.length) return;
  const pad = 12;
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  const [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  const sx = (x) => pad + ((x - x0) / (x1 - x0 || 1)) * (WIDTH - 2 * pad);
  const sy = (y) => HEIGHT - pad - ((y - y0) / (y1 - y0 || 1)) * (HEIGHT - 2 * pad);
  ctx.strokeStyle = resolveColor(v.root, "--jp-border-color2", "#e0e0e0");
  ctx.strokeRect(pad, pad, WIDTH - 2 * pad, HEIGHT - 2 * pad);
  traces.forEach((t, k) => {
    const color = TERM_COLORS[k % TERM_COLORS.length];
    ctx.fillStyle = ctx.strokeStyle = color;
    if (t.lines) {
      ctx.beginPath();
      let open = false;
      t.x.forEach((x, i) => {
        const y = t.y[i];
        if (!Number.isFinite(x) || !Number.isFinite(y)) {
          open = false;
          return;
        }
        if (open) ctx.lineTo(sx(x), sy(y));
        else ctx.moveTo(sx(x), sy(y));
        open = true;
      });
      ctx.stroke();
    }
    t.x.forEach((x, i) => {
      const y = t.y[i];
      if (Number.isFinite(x) && Number.isFinite(y)) ctx.fillRect(sx(x) - 1.5, sy(y) - 1.5, 3, 3);
    });
  });
}
