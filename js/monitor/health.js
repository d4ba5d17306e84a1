// The monitor's gradient-health heatmap (TrainingMonitor(health=True)): one row per
// parameter tensor, one column per sampled step, the colour a log scale of the metric
// chosen (gradient norm, update/weight ratio, weight norm). A non-finite cell is drawn
// red; hovering a cell names the tensor, the step and its three numbers. The header
// names the first problem the probe found (non-finite, vanishing, exploding) and its step.
import { h } from "../shared/dom.js";

/** @typedef {import("./view.js").MonitorView} MonitorView */

const CELL_H = 12;
const MAX_W = 720;
export const METRICS = { grad_norm: "gradient norm", update_ratio: "update / weight", weight_norm: "weight norm" };

/** log10 range of the finite positive values of `rows` ([lo, hi]; [0, 1] with none). */
export function logRange(rows) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const row of rows) for (const v of row) if (v != null && v > 0 && Number.isFinite(v)) {
    const l = Math.log10(v);
    if (l < lo) lo = l;
    if (l > hi) hi = l;
  }
  if (lo === Infinity) return [0, 1];
  return lo === hi ? [lo - 0.5, hi + 0.5] : [lo, hi];
}

/** A cell's colour: null (not measured) grey, non-finite red, zero the darkest, else a
 * blue-to-yellow ramp of log10(v) within [lo, hi]. */
export function cellColor(v, nonfinite, lo, hi) {
  if (nonfinite) return "rgb(220,30,30)";
  if (v == null) return "rgb(128,128,128)";
  const t = v <= 0 ? 0 : Math.min(1, Math.max(0, (Math.log10(v) - lo) / (hi - lo)));
  const r = Math.round(40 + 215 * t);
  const g = Math.round(30 + 200 * t);
  const b = Math.round(120 * (1 - t) + 40);
  return `rgb(${r},${g},${b})`;
}

/** The cell under canvas point (x, y), or null. */
export function cellAt(payload, x, y, width) {
  const rows = payload.names?.length ?? 0;
  const cols = payload.steps?.length ?? 0;
  if (!rows || !cols) return null;
  const c = Math.floor((x / width) * cols);
  const r = Math.floor(y / CELL_H);
  if (c < 0 || c >= cols || r < 0 || r >= rows) return null;
  return { row: r, col: c };
}

/** The hover text of a cell. */
export function cellText(payload, row, col) {
  const f = (v) => (v == null ? "—" : Number(v).toPrecision(3));
  const bad = payload.nonfinite?.[row]?.[col];
  return `${payload.names[row]} at step ${payload.steps[col]}: gradient norm ${bad ? "non-finite" : f(payload.grad_norm[row][col])}, ` +
    `update/weight ${f(payload.update_ratio[row][col])}, weight norm ${f(payload.weight_norm[row][col])}`;
}

/** The header line: the first problem and its step, or that all is well. */
export function healthHeadline(payload) {
  const first = payload?.first;
  if (!payload?.steps?.length) return "";
  if (!first) return `Gradient health: no problem in ${payload.steps.length} samples (to step ${payload.steps.at(-1)})`;
  const what = { nonfinite: "went non-finite", vanishing: "vanished", exploding: "exploded" }[first.kind] ?? first.kind;
  const start = first.kind === "nonfinite" ? " — the NaN started there" : "";
  return `Gradient of ${first.layer} ${what} at step ${first.step}${start}`;
}

/** The panel, appended to `parent` (hidden until health records arrive). @param {MonitorView} v */
export function buildHealth(v, parent) {
  v.healthMetric = h("select", { class: "nnx-input", "data-testid": "health-metric", "aria-label": "Health metric" },
    Object.entries(METRICS).map(([k, label]) => h("option", { value: k, text: label })));
  v.healthHead = h("p", { class: "nnx-note", "data-testid": "health-head" });
  v.healthCanvas = h("canvas", { "data-testid": "health-canvas", width: String(MAX_W), height: "12" });
  v.healthTip = h("p", { class: "nnx-note", "data-testid": "health-tip" });
  v.healthPanel = h("figure", { class: "nnx-chart nnx-health", "data-testid": "health" }, [
    h("figcaption", {}, [h("label", { text: "Gradient health: " }, [v.healthMetric])]),
    v.healthHead, v.healthCanvas, v.healthTip,
  ]);
  v.healthPanel.hidden = true;
  v.healthMetric.addEventListener("change", () => renderHealth(v));
  v.healthCanvas.addEventListener("mousemove", (e) => {
    const p = v.model.get("health");
    const rect = v.healthCanvas.getBoundingClientRect();
    const cell = cellAt(p, e.clientX - rect.left, e.clientY - rect.top, rect.width || MAX_W);
    v.healthTip.textContent = cell ? cellText(p, cell.row, cell.col) : "";
  });
  parent.append(v.healthPanel);
}

/** Draw the `health` trait. @param {MonitorView} v */
export function renderHealth(v) {
  const p = v.model.get("health") || {};
  const rows = p.names?.length ?? 0;
  v.healthPanel.hidden = !rows;
  if (!rows) return;
  v.healthHead.textContent = healthHeadline(p);
  const metric = v.healthMetric.value || "grad_norm";
  const data = p[metric] || [];
  const [lo, hi] = logRange(data);
  const canvas = v.healthCanvas;
  canvas.height = rows * CELL_H;
  const ctx = canvas.getContext?.("2d");
  if (!ctx) return;
  const cols = p.steps.length;
  const w = canvas.width / cols;
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) {
    ctx.fillStyle = cellColor(data[r]?.[c], metric === "grad_norm" && p.nonfinite?.[r]?.[c], lo, hi);
    ctx.fillRect(c * w, r * CELL_H, Math.ceil(w), CELL_H - 1);
  }
}
