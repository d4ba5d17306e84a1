// The monitor's exports, what the screen shows: the three charts as one PNG with their
// legends, the step and epoch series as CSV (a race's in long form) at the precision
// they were computed in, and the picture the kernel keeps for a notebook reopened
// without its kernel (TrainingMonitor's fallback output).
import { download, toCSV } from "../shared/dom.js";
import { fmtInt } from "../shared/format.js";
import { SNAPSHOT_PNG } from "../shared/protocol.js";
import { TERMINAL } from "./header.js";
import { resolveColor } from "../shared/theme.js";
import { legendsShown } from "./charts.js";
import { laneSeries } from "./race.js";
import { smoothingFactor, smoothLoss } from "./smoothing.js";

/** @typedef {import("./view.js").MonitorView} MonitorView */

const SNAPSHOT_EVERY_MS = 60_000; // a picture for the notebook while a run goes on

/**
 * Where a legend's items go in rows at most `maxWidth` wide (all in canvas pixels).
 * @param {{measureText?: (t: string) => {width: number}}} ctx
 * @param {import("./charts.js").LegendItem[]} items
 * @returns {{places: {x: number, row: number}[], rows: number, swatch: number, gap: number}}
 */
export function legendLayout(ctx, items, maxWidth, dpr = 1) {
  const swatch = 16 * dpr;
  const gap = 12 * dpr;
  const places = [];
  let x = 0;
  let row = 0;
  for (const it of items) {
    const w = swatch + 4 * dpr + (ctx.measureText ? ctx.measureText(it.label).width : 6 * dpr * it.label.length);
    if (x > 0 && x + w > maxWidth) {
      x = 0;
      row += 1;
    }
    places.push({ x, row });
    x += w + gap;
  }
  return { places, rows: items.length ? row + 1 : 0, swatch, gap };
}

/**
 * Draw a legend as the page shows it (a swatch of each line's colour and dash, its
 * label) at (x, y); returns the height used.
 * @param {CanvasRenderingContext2D} ctx @param {import("./charts.js").LegendItem[]} items
 * @param {(item: import("./charts.js").LegendItem) => string} colorOf  the item's colour resolved
 */
export function drawLegend(ctx, items, x, y, maxWidth, line, colorOf, dpr = 1) {
  const { places, rows, swatch } = legendLayout(ctx, items, maxWidth, dpr);
  const text = ctx.fillStyle;
  items.forEach((it, i) => {
    const px = x + places[i].x;
    const mid = y + places[i].row * line + line / 2;
    ctx.strokeStyle = colorOf(it);
    ctx.lineWidth = 2 * dpr;
    ctx.setLineDash(it.dashed ? [4 * dpr, 3 * dpr] : []);
    ctx.beginPath();
    ctx.moveTo(px, mid);
    ctx.lineTo(px + swatch, mid);
    ctx.stroke();
    ctx.fillStyle = text;
    ctx.fillText(it.label, px + swatch + 4 * dpr, mid - line / 3);
  });
  ctx.setLineDash([]);
  return rows * line;
}

/**
 * The three charts on one canvas, laid out as on screen with their legends, the run's
 * line above and the from_run hint below; null where there is nothing to draw on.
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
  const out = document.createElement("canvas");
  const ctx = out.getContext("2d");
  if (!ctx) return null;
  const style = (name, fallback) => getComputedStyle(v.root).getPropertyValue(name).trim() || fallback;
  const small = `${Math.round(11 * dpr)}px ${style("--jp-ui-font-family", "sans-serif")}`;
  const legends = legendsShown(v);
  ctx.font = small;
  const rowsOf = (items, w) => legendLayout(ctx, items, w, dpr).rows * line;
  const lossLegend = rowsOf(legends.loss, loss.width);
  const epochLegend = rowsOf(legends.epoch, epoch.width);
  const lower = side
    ? Math.max(epoch.height + epochLegend, lr.height) + line
    : epoch.height + epochLegend + lr.height + 2 * line;
  out.width = width;
  out.height = pad + line + (line + loss.height + lossLegend) + lower + line + pad;
  ctx.fillStyle = style("--jp-layout-color0", "#ffffff");
  ctx.fillRect(0, 0, out.width, out.height);
  const ink = style("--jp-ui-font-color1", "#212121");
  ctx.fillStyle = ink;
  const bold = `600 ${Math.round(12 * dpr)}px ${style("--jp-ui-font-family", "sans-serif")}`;
  ctx.font = bold;
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
  const colorOf = (it) => resolveColor(v.root, it.color, it.fallback || "#888");
  /** a chart: its caption, its canvas, its legend; returns the height used */
  const place = (canvas, caption, items, x, y) => {
    ctx.font = bold;
    ctx.fillStyle = ink;
    ctx.fillText(caption, x, y);
    ctx.drawImage(canvas, x, y + line);
    ctx.font = small;
    return line + canvas.height + drawLegend(ctx, items, x, y + line + canvas.height, canvas.width, line, colorOf, dpr);
  };
  let y = pad + line;
  y += place(loss, v.lossCaption.textContent || "Training loss per step", legends.loss, pad, y);
  const metric = `Per epoch: ${v.metricSelect.value || "–"}`;
  if (side) {
    place(epoch, metric, legends.epoch, pad, y);
    place(lr, "Learning rate", [], pad + epoch.width + pad, y);
    y += lower;
  } else {
    y += place(epoch, metric, legends.epoch, pad, y);
    y += place(lr, "Learning rate", [], pad, y);
  }
  ctx.font = small;
  ctx.fillStyle = ink;
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

/**
 * The columns of a series the CSV carries: every column but the lowest and highest of a
 * row (`loss:min`, `loss:max`) while no rows are merged, where they equal the value.
 * @param {import("../shared/store.js").ColumnStore} store @param {boolean} merged
 */
export function csvFields(store, merged) {
  return store.fields.filter((f) => merged || !/:(min|max)$/.test(f));
}

/**
 * The CSV of one run's step or epoch series (with the smoothed loss the chart draws,
 * kept at the float32 precision of the losses it averages).
 * @param {MonitorView} v @param {"steps"|"epochs"} which
 */
export function runCsv(v, which) {
  const store = v.sync.stores[which];
  const names = csvFields(store, store.width > 1);
  const cols = names.map((n) => store.column(n));
  if (which === "steps" && v._smoothed) {
    names.push("smoothed");
    cols.push(Float32Array.from(v._smoothed));
  }
  return toCSV(names, cols);
}

/** Save the step or epoch series as CSV. @param {MonitorView} v @param {"steps"|"epochs"} which */
export function exportCsv(v, which) {
  const race = v._lanes.length > 0;
  const text = race ? raceCsv(v, which) : runCsv(v, which);
  const name = race ? `nnx-race-${which}.csv` : `nnx-monitor-${(v.model.get("run_id") || "run").slice(0, 8)}-${which}.csv`;
  download(name, new Blob([text], { type: "text/csv" }));
}

/**
 * A race's series in long form: one row per run and step (or epoch), the columns of
 * every run, each in its own precision: a run's loss terms and optimizers' rates
 * (`term.<name>`, `aux.<name>`, `lr.<name>`) are columns like the others, and a cell
 * of a column the run does not have is empty (`nan` is a value the run logged). The
 * steps add what the chart draws: `smoothed` (the run's loss) and `<term>:smoothed`
 * for each term, by the smoothing shown.
 * @param {MonitorView} v @param {"steps"|"epochs"} which
 */
export function raceCsv(v, which) {
  const stores = v.sync.stores;
  const held = v._lanes.map((lane) => [lane, stores[laneSeries(lane)[which]]]).filter(([, s]) => s && s.length);
  const merged = held.some(([, s]) => s.width > 1);
  /** @type {Map<string, boolean>} field -> float32 in every run that has it */
  const fields = new Map();
  for (const [, s] of held) {
    for (const f of csvFields(s, merged)) fields.set(f, (fields.get(f) ?? true) && s.column(f) instanceof Float32Array);
  }
  const names = [...fields.keys()];
  /** @type {[string, (s: any) => ArrayLike<number> | null][]} the smoothed columns: name, of a run's store */
  const derived = [];
  if (which === "steps") {
    const a = smoothingFactor(v);
    const smooth = (key) => (s) => (s.has(key) ? Float32Array.from(smoothLoss(s.column(key), s.column("n"), a)) : null);
    derived.push(["smoothed", smooth("loss")]);
    for (const f of names) if (/^(term|aux)\.[^:]*$/.test(f)) derived.push([`${f}:smoothed`, smooth(f)]);
  }
  const rows = held.reduce((n, [, s]) => n + s.length, 0);
  const runs = [];
  const ids = [];
  const cols = [
    ...names.map((f) => (fields.get(f) ? new Float32Array(rows) : new Float64Array(rows))),
    ...derived.map(() => new Float32Array(rows)),
  ];
  const blanks = cols.map(() => new Uint8Array(rows));
  let k = 0;
  for (const [lane, s] of held) {
    const src = [...names.map((f) => (s.has(f) ? s.column(f) : null)), ...derived.map(([, of]) => of(s))];
    for (let i = 0; i < s.length; i++, k++) {
      runs.push(lane.name);
      ids.push(lane.run_id);
      src.forEach((c, j) => {
        if (c) cols[j][k] = c[i];
        else blanks[j][k] = 1;
      });
    }
  }
  const header = ["run", "run_id", ...names, ...derived.map(([name]) => name)];
  return toCSV(header, [runs, ids, ...cols], [null, null, ...blanks]);
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
