// TrainingMonitor's view: header (run, status, counters, Stop), live charts (loss per
// step raw + smoothed, a per-epoch metric, learning rate), a per-epoch table, and the
// error area. State lives in the kernel: a new view says "hello" and gets everything.
import "./monitor.css";
import { Chart, cssVar } from "./chart.js";
import { fmtDuration, fmtInt, fmtRate, fmtValue } from "./format.js";
import { APPEND, HELLO, PROTOCOL_VERSION, RESET, STOP } from "./protocol.js";
import { StepStore } from "./series.js";

/**
 * The part of an anywidget model this view uses.
 * @typedef {{get(name: string): any, set(name: string, value: any): void,
 *   on(event: string, cb: Function): void, off(event: string, cb?: Function): void,
 *   save_changes(): void, send(content: any, callbacks?: any, buffers?: any[]): void}} Model
 */

/**
 * @param {string} tag
 * @param {Record<string, string>} [attrs]
 * @param {(Node|string)[]} [children]
 */
function h(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

/** @param {HTMLElement} host @param {[string, string, string?][]} items */
function legend(host, items) {
  const box = h("div", { class: "nnx-legend" });
  for (const [label, color, style] of items) {
    const swatch = h("span", { class: `nnx-swatch ${style || ""}` });
    swatch.style.borderColor = color;
    box.append(h("span", { class: "nnx-legend-item" }, [swatch, label]));
  }
  host.append(box);
  return box;
}

/** epoch-row keys that are counts, not metrics: left out of the chart and the table */
const NOT_METRICS = new Set(["samples"]);

const STAT_KEYS = ["epoch", "step", "throughput", "elapsed", "eta", "loss"];
const STAT_LABELS = {
  epoch: "Epoch",
  step: "Step",
  throughput: "Samples/s",
  elapsed: "Elapsed",
  eta: "ETA",
  loss: "Loss",
};

/**
 * @param {{model: Model, el: HTMLElement}} ctx
 * @returns {() => void} cleanup
 */
export function render({ model, el }) {
  const store = new StepStore(Number(model.get("smoothing")) || 0);
  /** @type {Array<[string, Function]>} */
  const listeners = [];
  const on = (event, cb) => {
    model.on(event, cb);
    listeners.push([event, cb]);
  };

  // ---------------------------------------------------------------- DOM
  const root = h("div", { class: "nnx-monitor", role: "region", "aria-label": "Training monitor" });
  const runId = h("code", { class: "nnx-run-id", "data-testid": "run-id" });
  const status = h("span", { class: "nnx-status", "data-testid": "status", role: "status" });
  const stopButton = h("button", {
    type: "button",
    class: "nnx-button",
    "data-testid": "stop",
    "aria-label": "Stop training after the current step",
    title: "Stop training after the current step (writes the LAST checkpoint)",
    text: "Stop",
  });
  const stats = h("dl", { class: "nnx-stats" });
  /** @type {Record<string, HTMLElement>} */
  const statValue = {};
  for (const key of STAT_KEYS) {
    statValue[key] = h("dd", { "data-testid": key, text: "–" });
    stats.append(h("div", { class: "nnx-stat" }, [h("dt", { text: STAT_LABELS[key] }), statValue[key]]));
  }
  const header = h("div", { class: "nnx-header" }, [
    h("div", { class: "nnx-title" }, [h("span", { class: "nnx-label", text: "Run" }), runId, status]),
    stats,
    stopButton,
  ]);

  const lossFig = h("figure", { class: "nnx-chart nnx-chart-wide", "data-testid": "loss-chart", "data-points": "0" });
  lossFig.append(h("figcaption", { text: "Training loss per step" }));
  const lossChart = new Chart(lossFig, { label: "Training loss per step, raw and smoothed", height: 200, logY: false });
  legend(lossFig, [
    ["raw", "var(--nnx-raw)"],
    ["smoothed (EMA)", "var(--nnx-accent)"],
    ["epoch end", "var(--jp-border-color1, #bdbdbd)", "nnx-dashed"],
  ]);

  const metricSelect = h("select", { "data-testid": "metric-select", "aria-label": "Per-epoch metric" });
  const epochFig = h("figure", { class: "nnx-chart", "data-testid": "epoch-chart" });
  epochFig.append(h("figcaption", {}, [h("label", { text: "Per epoch: " }, [metricSelect])]));
  const epochChart = new Chart(epochFig, { label: "Per-epoch metric, validation and training", height: 160 });
  legend(epochFig, [
    ["validation", "var(--nnx-accent)"],
    ["training (epoch)", "var(--nnx-second)", "nnx-dashed"],
  ]);

  const lrFig = h("figure", { class: "nnx-chart", "data-testid": "lr-chart" });
  lrFig.append(h("figcaption", { text: "Learning rate" }));
  const lrChart = new Chart(lrFig, { label: "Learning rate per step", height: 160, logY: "auto" });

  const charts = h("div", { class: "nnx-charts" }, [lossFig, epochFig, lrFig]);
  const table = h("table", { class: "nnx-table", "data-testid": "epochs-table" });
  const tableBox = h("div", { class: "nnx-table-box", tabindex: "0", "aria-label": "Per-epoch metrics" }, [table]);
  const error = h("pre", { class: "nnx-error", "data-testid": "error", role: "alert" });
  error.hidden = true;
  root.append(header, charts, tableBox, error);
  el.append(root);

  // ---------------------------------------------------------------- state -> DOM
  const updateHeader = () => {
    const st = String(model.get("status") || "created");
    status.textContent = st;
    status.dataset.status = st;
    const reason = model.get("stop_reason");
    if (reason) status.title = reason;
    else status.removeAttribute("title");
    runId.textContent = model.get("run_id") || "–";
    const nEpochs = model.get("n_epochs");
    const epoch = model.get("epoch");
    statValue.epoch.textContent = nEpochs ? `${fmtInt(epoch)} / ${fmtInt(nEpochs)}` : fmtInt(epoch);
    const total = model.get("total_steps");
    const step = model.get("step");
    statValue.step.textContent = total ? `${fmtInt(step)} / ${fmtInt(total)}` : fmtInt(step);
    statValue.throughput.textContent = fmtRate(model.get("samples_per_sec"));
    statValue.elapsed.textContent = fmtDuration(model.get("elapsed"));
    const terminal = st === "finished" || st === "stopped" || st === "failed";
    statValue.eta.textContent = terminal ? "–" : fmtDuration(model.get("eta"));
    const canStop = Boolean(model.get("can_stop")) && (st === "running" || st === "created");
    stopButton.disabled = !canStop;
    stopButton.title =
      st === "running" && !canStop
        ? "Stop reaches only runs started with monitor.fit(...); interrupt the kernel to stop this one"
        : "Stop training after the current step (writes the LAST checkpoint)";
    stopButton.textContent = st === "stopping" ? "Stopping…" : "Stop";
    stopButton.setAttribute("aria-busy", st === "stopping" ? "true" : "false");
    root.dataset.status = st;
  };

  const updateError = () => {
    const text = model.get("error") || "";
    error.textContent = text;
    error.hidden = !text;
  };

  const updateLossText = () => {
    const last = store.lastLoss();
    const ema = store.length ? store.ema[store.length - 1] : NaN;
    statValue.loss.textContent =
      last === null ? "–" : `${fmtValue(last)}${Number.isFinite(ema) ? ` (EMA ${fmtValue(ema)})` : ""}`;
  };

  /** metric names present in the epoch rows, validation ones first */
  const metricNames = () => {
    const names = new Set();
    for (const row of store.epochs) {
      for (const [k, v] of Object.entries(row.val || {})) if (v !== null && !NOT_METRICS.has(k)) names.add(k);
    }
    for (const row of store.epochs) {
      for (const [k, v] of Object.entries(row.train || {})) if (v !== null && !NOT_METRICS.has(k)) names.add(k);
    }
    return [...names];
  };

  const updateEpochs = () => {
    const names = metricNames();
    const current = metricSelect.value || (names.includes("loss") ? "loss" : names[0] || "");
    const have = [...metricSelect.options].map((o) => o.value).join("|");
    if (have !== names.join("|")) {
      metricSelect.replaceChildren(...names.map((n) => h("option", { value: n, text: n })));
    }
    if (names.includes(current)) metricSelect.value = current;
    drawEpochChart();
    // table: epoch, step, train loss, the validation metrics, lr, seconds
    const valNames = [];
    for (const row of store.epochs) {
      for (const [k, v] of Object.entries(row.val || {})) {
        if (v !== null && !NOT_METRICS.has(k) && !valNames.includes(k)) valNames.push(k);
      }
    }
    const head = h("tr", {}, [
      h("th", { scope: "col", text: "epoch" }),
      h("th", { scope: "col", text: "step" }),
      h("th", { scope: "col", text: "train loss" }),
      ...valNames.map((k) => h("th", { scope: "col", text: `val ${k}` })),
      h("th", { scope: "col", text: "lr" }),
      h("th", { scope: "col", text: "time" }),
    ]);
    const rows = store.epochs.map((row) =>
      h("tr", row.improved ? { class: "nnx-best", title: "became BEST" } : {}, [
        h("td", { text: `${row.epoch}${row.improved ? " ★" : ""}` }),
        h("td", { text: fmtInt(row.step) }),
        h("td", { text: fmtValue(row.train ? row.train.loss : null) }),
        ...valNames.map((k) => h("td", { text: fmtValue(row.val ? row.val[k] : null) })),
        h("td", { text: fmtValue(row.lr) }),
        h("td", { text: fmtDuration(row.seconds) }),
      ]),
    );
    table.replaceChildren(h("thead", {}, [head]), h("tbody", {}, rows));
    tableBox.hidden = store.epochs.length === 0;
  };

  const marks = () => store.epochs.map((r) => r.step);

  const drawEpochChart = () => {
    const metric = metricSelect.value;
    const rows = store.epochs;
    const x = Float64Array.from(rows, (r) => r.step);
    const pick = (part) =>
      Float64Array.from(rows, (r) => {
        const v = r[part] ? r[part][metric] : null;
        return v === null || v === undefined ? NaN : v;
      });
    epochChart.setData({
      series: [
        { x, y: pick("val"), n: rows.length, color: cssVar(root, "--nnx-accent", "#1976d2"), points: true },
        { x, y: pick("train"), n: rows.length, color: cssVar(root, "--nnx-second", "#e65100"), dash: [5, 4], points: true },
      ],
      marks: [],
    });
  };

  const drawStepCharts = () => {
    const n = store.length;
    lossChart.setData({
      series: [
        { x: store.step, y: store.loss, n, color: cssVar(root, "--nnx-raw", "#90a4ae"), width: 1 },
        { x: store.step, y: store.ema, n, color: cssVar(root, "--nnx-accent", "#1976d2"), width: 2 },
      ],
      marks: marks(),
    });
    lrChart.setData({
      series: [{ x: store.step, y: store.lr, n, color: cssVar(root, "--nnx-second", "#e65100"), width: 1.5 }],
      marks: marks(),
    });
  };

  let helloPending = false;
  let shownEpochs = 0;
  const sayHello = () => {
    helloPending = true;
    model.send({ kind: HELLO, version: PROTOCOL_VERSION });
  };

  const onCustom = (msg, buffers) => {
    if (!msg || (msg.kind !== RESET && msg.kind !== APPEND)) return;
    try {
      store.apply(msg, buffers);
    } catch (err) {
      error.textContent = String(err && err.message ? err.message : err);
      error.hidden = false;
      return;
    }
    if (msg.kind === RESET) helloPending = false;
    lossFig.dataset.points = String(store.length);
    updateLossText();
    drawStepCharts();
    if (msg.kind === RESET || store.epochs.length !== shownEpochs) {
      shownEpochs = store.epochs.length;
      updateEpochs();
    }
    if (store.gap && !helloPending) sayHello(); // missed points: ask for everything
  };

  const onSmoothing = () => {
    store.setSmoothing(Number(model.get("smoothing")) || 0);
    updateLossText();
    drawStepCharts();
  };

  const onStopClick = () => {
    stopButton.disabled = true;
    model.send({ kind: STOP });
  };

  const redrawAll = () => {
    drawStepCharts();
    drawEpochChart();
  };

  for (const name of ["status", "stop_reason", "run_id", "epoch", "n_epochs", "step", "total_steps", "samples_per_sec", "elapsed", "eta", "can_stop"]) {
    on(`change:${name}`, updateHeader);
  }
  on("change:error", updateError);
  on("change:smoothing", onSmoothing);
  on("msg:custom", onCustom);
  stopButton.addEventListener("click", onStopClick);
  metricSelect.addEventListener("change", drawEpochChart);

  // JupyterLab switches themes by changing attributes on <body>: redraw with new colours.
  let themeObserver = null;
  if (typeof MutationObserver !== "undefined" && document.body) {
    themeObserver = new MutationObserver(redrawAll);
    themeObserver.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-name", "data-jp-theme-light"] });
  }

  updateHeader();
  updateError();
  updateEpochs();
  drawStepCharts();
  sayHello();

  return () => {
    for (const [event, cb] of listeners) model.off(event, cb);
    listeners.length = 0;
    stopButton.removeEventListener("click", onStopClick);
    metricSelect.removeEventListener("change", drawEpochChart);
    if (themeObserver) themeObserver.disconnect();
    lossChart.destroy();
    epochChart.destroy();
    lrChart.destroy();
    root.remove();
  };
}

export default { render };
