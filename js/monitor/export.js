// The monitor's exports: the three charts as one PNG, the step and epoch series as CSV
// (a race's in long form), and the picture the kernel keeps for a notebook reopened
// without its kernel (TrainingMonitor's fallback output).
import { download, toCSV } from "../shared/dom.js";
import { fmtInt } from "../shared/format.js";
import { SNAPSHOT_PNG } from "../shared/protocol.js";
import { TERMINAL } from "./header.js";
import { laneSeries } from "./race.js";

/** @typedef {import("./view.js").MonitorView} MonitorView */

const SNAPSHOT_EVERY_MS = 60_000; // a picture for the notebook while a run goes on

/**
 * The three charts on one canvas, laid out as on screen, with the run's line above and
 * the from_run hint below; null where there is nothing to draw on.
 * @param {MonitorView} v
 */
export function composePng(v) {
  const canvases = v._charts().map((c) => c.canvas());
  if (canvases.some((c) => !c) || typeof document === "undefined") return null;
  const dpr = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
  const pad = Math.round(8 * dpr);
  const line = Math.round(18 * dpr);
  const [loss, epoch, lr] = canvases;
  const side = epoch.width + lr.width + pad <= loss.width + pad; // side by side, as on screen
  const width = Math.max(loss.width, side ? epoch.width + lr.width + pad : Math.max(epoch.width, lr.width)) + 2 * pad;
  const lower = side ? Math.max(epoch.height, lr.height) + line : epoch.height + lr.height + 2 * line;
  const height = pad + line + (line + loss.height) + lower + line + pad;
  const out = document.createElement("canvas");
  out.width = width;
  out.height = height;
  const ctx = out.getContext("2d");
  if (!ctx) return null;
  const style = (name, fallback) => getComputedStyle(v.root).getPropertyValue(name).trim() || fallback;
  ctx.fillStyle = style("--jp-layout-color0", "#ffffff");
  ctx.fillRect(0, 0, width, height);
  ctx.fillStyle = style("--jp-ui-font-color1", "#212121");
  ctx.font = `600 ${Math.round(12 * dpr)}px ${style("--jp-ui-font-family", "sans-serif")}`;
  ctx.textBaseline = "top";
  const m = v.model;
  const since = m.get("loss_nonfinite_since");
  const head = [
    `Run ${m.get("run_id") || "–"}`,
    m.get("status"),
    `epoch ${v.stat.epoch.textContent}`,
    `step ${v.stat.step.textContent}`,
    since !== null && since !== undefined ? `loss non-finite since step ${fmtInt(since)}` : `loss ${v.stat.loss.textContent}`,
  ].join(" · ");
  ctx.fillText(head, pad, pad);
  const place = (canvas, caption, x, y) => {
    ctx.fillText(caption, x, y);
    ctx.drawImage(canvas, x, y + line);
  };
  let y = pad + line;
  place(loss, "Training loss per step", pad, y);
  y += line + loss.height;
  const metric = `Per epoch: ${v.metricSelect.value || "–"}`;
  if (side) {
    place(epoch, metric, pad, y);
    place(lr, "Learning rate", pad + epoch.width + pad, y);
    y += lower;
  } else {
    place(epoch, metric, pad, y);
    y += line + epoch.height;
    place(lr, "Learning rate", pad, y);
    y += line + lr.height;
  }
  ctx.font = `${Math.round(11 * dpr)}px ${style("--jp-ui-font-family", "sans-serif")}`;
  const run = m.get("run_id");
  ctx.fillText(run ? `nnx-lab TrainingMonitor · TrainingMonitor.from_run("${run}") shows it live` : "nnx-lab TrainingMonitor", pad, y + pad / 2);
  return out;
}

/** Save the charts as a PNG file. @param {MonitorView} v */
export function exportPng(v) {
  const canvas = v.composePng();
  if (!canvas || !canvas.toBlob) return;
  canvas.toBlob((blob) => blob && download(`nnx-monitor-${(v.model.get("run_id") || "run").slice(0, 8)}.png`, blob), "image/png");
}

/** Save the step or epoch series as CSV (with the smoothed loss). @param {MonitorView} v @param {"steps"|"epochs"} which */
export function exportCsv(v, which) {
  if (v._lanes.length) {
    exportRaceCsv(v, which);
    return;
  }
  const store = v.sync.stores[which];
  const names = [...store.fields];
  const cols = names.map((n) => store.column(n));
  if (which === "steps" && v._smoothed) {
    names.push("smoothed");
    cols.push(v._smoothed);
  }
  const text = toCSV(names, cols);
  download(`nnx-monitor-${(v.model.get("run_id") || "run").slice(0, 8)}-${which}.csv`, new Blob([text], { type: "text/csv" }));
}

/** A race's series in long form: one row per run and step (or epoch). */
function exportRaceCsv(v, which) {
  const stores = v.sync.stores;
  const names = ["run", "run_id"];
  /** @type {any[][]} */
  let cols = [];
  let fields = null;
  for (const lane of v._lanes) {
    const store = stores[laneSeries(lane)[which]];
    if (!store || !store.length) continue;
    if (fields === null) {
      fields = [...store.fields];
      cols = [[], [], ...fields.map(() => [])];
    }
    for (let i = 0; i < store.length; i++) {
      cols[0].push(lane.name);
      cols[1].push(lane.run_id);
      fields.forEach((f, j) => cols[j + 2].push(store.has(f) ? store.column(f)[i] : NaN));
    }
  }
  const text = toCSV([...names, ...(fields || [])], cols);
  download(`nnx-race-${which}.csv`, new Blob([text], { type: "text/csv" }));
}

/**
 * Send the kernel a picture for the notebook's fallback output (see TrainingMonitor):
 * once a run ends, and every minute while it runs.
 * @param {MonitorView} v
 */
export function maybeSnapshot(v) {
  const m = v.model;
  const run = m.get("run_id");
  const st = m.get("status");
  if (!run || !v.sync || !v.sync.synced || v._snapshotPending) return;
  const key = `${run}:${st}`;
  const due = TERMINAL.has(st) ? m.get("snapshot_of") !== key : Date.now() - v._lastSnapshotAt > SNAPSHOT_EVERY_MS;
  if (!due || v._lastSnapshotKey === key) return;
  v._snapshotPending = true;
  // after the charts drew this state
  const later = typeof requestAnimationFrame === "function" ? requestAnimationFrame : (fn) => setTimeout(fn, 0);
  later(() => {
    const canvas = v.composePng();
    if (!canvas || !canvas.toBlob) {
      v._snapshotPending = false;
      return;
    }
    canvas.toBlob(async (blob) => {
      v._snapshotPending = false;
      if (!blob || v._disposed) return;
      v._lastSnapshotAt = Date.now();
      if (TERMINAL.has(st)) v._lastSnapshotKey = key;
      const bytes = await blob.arrayBuffer();
      m.send({ kind: SNAPSHOT_PNG, view: v.sync.view, run_id: run, status: st }, undefined, [bytes]);
    }, "image/png");
  });
}
