// What a chart draws over its series (shared/chart.js): dashed marks at x values
// (epoch ends, other rules' picks), thinned where they would crowd; labelled markers
// ("loss non-finite since step N", the suggested rate), their labels placed apart
// (marker_labels.js); dots (an operating point).
import { placeLabels } from "./marker_labels.js";
import { cssVar, resolveColor } from "./theme.js";

const MIN_MARK_GAP = 8; // px between marks; denser marks are thinned
const LABEL_ROW = 14; // px from one row of marker labels to the next (11 px text)

/**
 * Indices of the marks to draw so that neighbours are at least `minGap` pixels apart.
 * @param {number[]} px  mark positions in pixels, ascending
 */
export function thinMarks(px, minGap) {
  if (px.length < 2) return px.map((_, i) => i);
  const span = px[px.length - 1] - px[0];
  const mean = span / (px.length - 1);
  const every = mean >= minGap ? 1 : Math.ceil(minGap / Math.max(mean, 1e-9));
  const out = [];
  let lastPx = -Infinity;
  for (let i = 0; i < px.length; i += every) {
    if (px[i] - lastPx >= minGap) {
      out.push(i);
      lastPx = px[i];
    }
  }
  return out;
}

/**
 * Draw what lies on top of the series: the marks (thinned), the labelled markers and
 * the dots. Sets chart.info.marksDrawn and dotsDrawn.
 * @param {import("./chart.js").Chart} chart @param {any} u the uPlot instance
 */
export function drawOverlay(chart, u) {
  const ctx = u.ctx;
  const { left, top, width, height } = u.bbox;
  const dpr = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
  const inRange = (x) => x >= u.scales.x.min && x <= u.scales.x.max;
  const visible = chart.marks.filter(inRange);
  const px = visible.map((x) => Math.round(u.valToPos(x, "x", true)));
  const keep = thinMarks(px, MIN_MARK_GAP * dpr);
  chart.info.marksDrawn = keep.length;
  ctx.save();
  ctx.beginPath();
  ctx.rect(left, top, width, height);
  ctx.clip();
  if (keep.length) {
    ctx.strokeStyle = cssVar(chart.host, "--jp-border-color1", "#bdbdbd");
    ctx.lineWidth = dpr;
    ctx.setLineDash([3 * dpr, 3 * dpr]);
    ctx.beginPath();
    for (const i of keep) {
      ctx.moveTo(px[i] + 0.5, top);
      ctx.lineTo(px[i] + 0.5, top + height);
    }
    ctx.stroke();
  }
  ctx.setLineDash([]);
  const shown = chart.markers.filter((m) => inRange(m.x));
  ctx.font = `600 ${11 * dpr}px ${cssVar(chart.host, "--jp-ui-font-family", "sans-serif")}`;
  ctx.textBaseline = "top";
  ctx.textAlign = "left";
  const xs = shown.map((m) => Math.round(u.valToPos(m.x, "x", true)) + 0.5);
  const places = placeLabels(
    shown.map((m, i) => ({ px: xs[i], width: ctx.measureText ? ctx.measureText(m.label).width : 0 })),
    { left, right: left + width, pad: 4 * dpr, gap: 6 * dpr },
  );
  chart.info.labels = shown.map((m, i) => ({ label: m.label, ...places[i] }));
  shown.forEach((m, i) => {
    const x = xs[i];
    const color = resolveColor(chart.host, m.color, "#d32f2f");
    ctx.strokeStyle = color;
    ctx.fillStyle = color;
    ctx.lineWidth = 2 * dpr;
    ctx.beginPath();
    ctx.moveTo(x, top);
    ctx.lineTo(x, top + height);
    ctx.stroke();
    ctx.fillText(m.label, places[i].x0, top + (4 + places[i].row * LABEL_ROW) * dpr);
  });
  chart.info.dotsDrawn = 0;
  for (const d of chart.dots) {
    if (!Number.isFinite(d.x) || !Number.isFinite(d.y) || !inRange(d.x)) continue;
    const x = u.valToPos(d.x, "x", true);
    const y = u.valToPos(d.y, "y", true);
    ctx.fillStyle = resolveColor(chart.host, d.color, "#d32f2f");
    ctx.strokeStyle = cssVar(chart.host, "--jp-layout-color0", "#ffffff");
    ctx.lineWidth = 2 * dpr;
    ctx.beginPath();
    ctx.arc(x, y, 5 * dpr, 0, 2 * Math.PI);
    ctx.fill();
    ctx.stroke();
    chart.info.dotsDrawn += 1;
  }
  ctx.restore();
}
