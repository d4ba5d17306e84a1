// The monitor's toolbar: log scale, the window of steps shown, the smoothing slider
// (drawn at once, written to the kernel once it rests), zoom reset, the exports and
// the Report button (report.js). The loss and lr charts zoom together; a zoom lies over
// the window of steps, and Reset zoom goes back to that window.
import { h } from "../shared/dom.js";
import { exportCsv, exportPng } from "./export.js";
import { buildReport } from "./report.js";

/** @typedef {import("./view.js").MonitorView} MonitorView @typedef {import("../shared/chart.js").Chart} Chart */

const WINDOWS = [
  ["all", "all steps"],
  ["100", "last 100 steps"],
  ["1000", "last 1,000 steps"],
  ["10000", "last 10,000 steps"],
];
const SMOOTHING_REST_MS = 250;

/** The toolbar's elements (on the view: logToggle, windowSelect, smoothing, ...). @param {MonitorView} v */
export function buildToolbar(v) {
  v.logToggle = h("input", { type: "checkbox", "data-testid": "log-toggle" });
  v.logToggle.addEventListener("change", () => v._setLog(v.logToggle.checked));
  v.windowSelect = h("select", { class: "nnx-input", "data-testid": "window", "aria-label": "Steps shown" });
  for (const [value, label] of WINDOWS) v.windowSelect.append(h("option", { value, text: label }));
  v.windowSelect.addEventListener("change", () => setWindow(v, v.windowSelect.value));
  v.smoothing = h("input", { type: "range", min: "0", max: "0.99", step: "0.01", "data-testid": "smoothing", "aria-label": "Smoothing factor" });
  v.smoothingValue = h("output", { class: "nnx-smoothing-value", "data-testid": "smoothing-value" });
  v.smoothing.addEventListener("input", () => onSmoothingInput(v));
  v.resetZoom = h("button", { type: "button", class: "nnx-tool", "data-testid": "reset-zoom", title: "Undo the zoom (or double-click a chart); the steps shown stay as chosen", text: "Reset zoom" });
  v.resetZoom.disabled = true;
  v.resetZoom.addEventListener("click", () => v.lossChart.resetZoom()); // the lr chart follows (onZoom)
  const tool = (label, testid, title, fn) => {
    const b = h("button", { type: "button", class: "nnx-tool", "data-testid": testid, title, text: label });
    b.addEventListener("click", fn);
    return b;
  };
  return h("div", { class: "nnx-toolbar", role: "toolbar", "aria-label": "Chart options" }, [
    h("label", { class: "nnx-check", title: "Logarithmic loss axis" }, [v.logToggle, "log scale"]),
    v.windowSelect,
    h("label", { class: "nnx-range", title: "Smoothing of the loss line (EMA factor)" }, ["smoothing", v.smoothing, v.smoothingValue]),
    v.resetZoom,
    h("span", { class: "nnx-spacer" }),
    tool("PNG", "export-png", "Save the charts as a PNG picture", () => exportPng(v)),
    tool("CSV steps", "export-csv-steps", "Save the step series as CSV", () => exportCsv(v, "steps")),
    tool("CSV epochs", "export-csv-epochs", "Save the epoch series as CSV", () => exportCsv(v, "epochs")),
    ...buildReport(v),
  ]);
}

/** @param {MonitorView} v @param {boolean} on */
export function setLog(v, on) {
  v.lossChart.setLogY(on);
  v.lossFig.dataset.log = on ? "y" : "";
  v._renderSteps();
}

/** Show all steps or the newest N ("100", ...) in the loss and lr charts (a zoom ends). @param {MonitorView} v */
export function setWindow(v, value) {
  v.windowSelect.value = value;
  const n = value === "all" ? null : Number(value);
  for (const c of [v.lossChart, v.lrChart]) c.setXWindow(n);
  v.resetZoom.disabled = true;
  v._zoomSource = null;
}

/** One chart zoomed (or was reset): the other follows. @param {MonitorView} v @param {Chart} source */
export function onZoom(v, source, range) {
  if (v._zoomSource) return; // the other chart following this one
  v._zoomSource = source;
  const other = source === v.lossChart ? v.lrChart : v.lossChart;
  if (range) other.setXRange(range[0], range[1]);
  else other.resetZoom();
  v._zoomSource = null;
  v.resetZoom.disabled = range === null; // Reset zoom undoes a zoom, never the window
}

/** The kernel's smoothing factor (a reload, another view) moves the slider. @param {MonitorView} v */
export function onSmoothingTrait(v) {
  const a = Number(v.model.get("smoothing")) || 0;
  v.smoothing.value = String(Math.min(0.99, a));
  v.smoothingValue.textContent = a.toFixed(2);
  v._renderSteps();
}

function onSmoothingInput(v) {
  const a = Number(v.smoothing.value);
  v.smoothingValue.textContent = a.toFixed(2);
  // redraw at once; write the trait once the slider rests (debounced)
  v._smoothingOverride = a;
  v._renderSteps();
  clearTimeout(v._smoothingTimer);
  v._smoothingTimer = setTimeout(() => {
    v._smoothingOverride = undefined;
    v._setTrait("smoothing", a);
  }, SMOOTHING_REST_MS);
}

