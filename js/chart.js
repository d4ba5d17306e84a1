// A small canvas line chart: decimated lines (M4), nice ticks, epoch marks, an
// optional log y-axis. Colours and fonts come from JupyterLab's --jp-* variables,
// so the chart follows the light and dark themes.
import { m4 } from "./decimate.js";
import { fmtStep, fmtValue } from "./format.js";

/**
 * @typedef {{x: ArrayLike<number>, y: ArrayLike<number>, n: number, color: string,
 *   width?: number, dash?: number[], points?: boolean, label?: string}} Series
 * @typedef {{series: Series[], marks?: number[]}} ChartData
 */

const PAD = { left: 58, right: 12, top: 10, bottom: 24 };

/** Round tick values at 1, 2 or 5 times a power of ten. */
export function niceTicks(lo, hi, maxTicks = 5, integer = false) {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [];
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / Math.max(1, maxTicks);
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const norm = raw / mag;
  let step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
  if (integer) step = Math.max(1, Math.round(step));
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    out.push(Number(v.toPrecision(12)));
  }
  return out;
}

/**
 * Read a CSS variable on `el`, with a fallback for pages outside JupyterLab.
 * @param {Element} el @param {string} name @param {string} fallback
 */
export function cssVar(el, name, fallback) {
  try {
    const v = getComputedStyle(el).getPropertyValue(name).trim();
    return v || fallback;
  } catch {
    return fallback;
  }
}

export class Chart {
  /**
   * @param {HTMLElement} host  the element the canvas goes into
   * @param {{label: string, height?: number, logY?: boolean|"auto", integerX?: boolean}} opts
   */
  constructor(host, opts) {
    this.host = host;
    this.opts = { height: 180, logY: false, integerX: true, ...opts };
    this.canvas = document.createElement("canvas");
    this.canvas.setAttribute("role", "img");
    this.canvas.setAttribute("aria-label", opts.label);
    this.canvas.style.height = `${this.opts.height}px`;
    host.appendChild(this.canvas);
    /** @type {ChartData} */
    this.data = { series: [], marks: [] };
    this._raf = 0;
    /** what the last draw did, for tests: line segments drawn and the y-axis used */
    this.stats = { draws: 0, segments: 0, logY: false };
    this._ro = null;
    if (typeof ResizeObserver !== "undefined") {
      this._ro = new ResizeObserver(() => this.requestDraw());
      this._ro.observe(host);
    }
  }

  /** @param {ChartData} data */
  setData(data) {
    this.data = data;
    this.requestDraw();
  }

  requestDraw() {
    if (this._raf) return;
    const run = () => {
      this._raf = 0;
      this.draw();
    };
    if (typeof requestAnimationFrame === "function") this._raf = requestAnimationFrame(run);
    else run();
  }

  draw() {
    const widthCss = Math.max(120, Math.floor(this.host.clientWidth || 600));
    const heightCss = this.opts.height;
    const dpr = (typeof window !== "undefined" && window.devicePixelRatio) || 1;
    const w = Math.round(widthCss * dpr);
    const h = Math.round(heightCss * dpr);
    if (this.canvas.width !== w) this.canvas.width = w;
    if (this.canvas.height !== h) this.canvas.height = h;
    this.stats.draws += 1;
    this.stats.segments = 0;
    const ctx = this.canvas.getContext && this.canvas.getContext("2d");
    if (!ctx) return;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, widthCss, heightCss);

    const el = this.host;
    const font = cssVar(el, "--jp-ui-font-family", "system-ui, sans-serif");
    const textColor = cssVar(el, "--jp-ui-font-color2", "#616161");
    const gridColor = cssVar(el, "--jp-border-color2", "#e0e0e0");
    const markColor = cssVar(el, "--jp-border-color1", "#bdbdbd");
    ctx.font = `11px ${font}`;
    ctx.textBaseline = "middle";

    const plotW = widthCss - PAD.left - PAD.right;
    const plotH = heightCss - PAD.top - PAD.bottom;
    const series = this.data.series.filter((s) => s.n > 0);

    // x range from the data (x is sorted), y range from the decimated columns
    let x0 = Infinity;
    let x1 = -Infinity;
    for (const s of series) {
      x0 = Math.min(x0, s.x[0]);
      x1 = Math.max(x1, s.x[s.n - 1]);
    }
    if (!Number.isFinite(x0)) {
      ctx.fillStyle = textColor;
      ctx.textAlign = "center";
      ctx.fillText("no data yet", PAD.left + plotW / 2, PAD.top + plotH / 2);
      return;
    }
    if (x1 <= x0) {
      x0 -= 1;
      x1 += 1;
    }
    const decimated = series.map((s) => m4(s.x, s.y, s.n, x0, x1, plotW));
    let lo = Infinity;
    let hi = -Infinity;
    let minPositive = Infinity;
    for (const d of decimated) {
      for (let k = 0; k < d.count; k++) {
        lo = Math.min(lo, d.min[k]);
        hi = Math.max(hi, d.max[k]);
        if (d.min[k] > 0) minPositive = Math.min(minPositive, d.min[k]);
        else if (d.max[k] > 0) minPositive = Math.min(minPositive, d.max[k]);
      }
    }
    if (!Number.isFinite(lo)) {
      lo = 0;
      hi = 1;
    }
    let logY = this.opts.logY === true;
    if (this.opts.logY === "auto") logY = lo > 0 && hi / lo > 20;
    this.stats.logY = logY;
    const ty = logY ? (v) => Math.log10(Math.max(v, minPositive)) : (v) => v;
    let ylo = ty(logY ? Math.max(lo, minPositive) : lo);
    let yhi = ty(hi);
    if (yhi <= ylo) {
      const pad = Math.abs(ylo) * 0.05 || 0.5;
      ylo -= pad;
      yhi += pad;
    } else {
      const pad = (yhi - ylo) * 0.04;
      ylo -= pad;
      yhi += pad;
    }
    const px = (c) => PAD.left + c + 0.5;
    const xToPx = (x) => PAD.left + ((x - x0) / (x1 - x0)) * plotW;
    const yToPx = (v) => PAD.top + (1 - (ty(v) - ylo) / (yhi - ylo)) * plotH;
    const tyToPx = (t) => PAD.top + (1 - (t - ylo) / (yhi - ylo)) * plotH;

    // grid and y labels
    ctx.strokeStyle = gridColor;
    ctx.lineWidth = 1;
    ctx.fillStyle = textColor;
    ctx.textAlign = "right";
    const yTicks = niceTicks(ylo, yhi, Math.max(2, Math.floor(plotH / 36)), false);
    const yStep = yTicks.length > 1 ? yTicks[1] - yTicks[0] : 1;
    for (const t of yTicks) {
      const y = Math.round(tyToPx(t)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(PAD.left, y);
      ctx.lineTo(PAD.left + plotW, y);
      ctx.stroke();
      let label;
      if (logY) label = yStep >= 1 && Number.isInteger(t) ? `1e${t}` : fmtValue(Math.pow(10, t));
      else label = fmtValue(t);
      ctx.fillText(label, PAD.left - 6, y);
    }
    // x labels
    ctx.textAlign = "center";
    const xTicks = niceTicks(x0, x1, Math.max(2, Math.floor(plotW / 90)), this.opts.integerX);
    for (const t of xTicks) {
      const label = fmtStep(t);
      const metrics = ctx.measureText ? ctx.measureText(label) : null;
      const half = ((metrics && metrics.width) || 0) / 2;
      const x = Math.min(Math.max(xToPx(t), PAD.left + half), widthCss - 2 - half);
      ctx.fillText(label, x, heightCss - PAD.bottom / 2);
    }
    // epoch marks
    const marks = this.data.marks || [];
    if (marks.length) {
      ctx.save();
      ctx.strokeStyle = markColor;
      ctx.setLineDash([3, 3]);
      ctx.beginPath();
      for (const m of marks) {
        if (m < x0 || m > x1) continue;
        const x = Math.round(xToPx(m)) + 0.5;
        ctx.moveTo(x, PAD.top);
        ctx.lineTo(x, PAD.top + plotH);
      }
      ctx.stroke();
      ctx.restore();
    }
    // series
    ctx.save();
    ctx.beginPath();
    ctx.rect(PAD.left, PAD.top - 2, plotW, plotH + 4);
    ctx.clip();
    series.forEach((s, i) => {
      const d = decimated[i];
      ctx.strokeStyle = s.color;
      ctx.fillStyle = s.color;
      ctx.lineWidth = s.width || 1.5;
      ctx.setLineDash(s.dash || []);
      ctx.beginPath();
      for (let k = 0; k < d.count; k++) {
        const x = px(d.cols[k]);
        if (k === 0) ctx.moveTo(x, yToPx(d.first[k]));
        else ctx.lineTo(x, yToPx(d.first[k]));
        ctx.lineTo(x, yToPx(d.min[k]));
        ctx.lineTo(x, yToPx(d.max[k]));
        ctx.lineTo(x, yToPx(d.last[k]));
        this.stats.segments += 4;
      }
      ctx.stroke();
      if (s.points) {
        ctx.setLineDash([]);
        for (let k = 0; k < d.count; k++) {
          ctx.beginPath();
          ctx.arc(px(d.cols[k]), yToPx(d.last[k]), 3, 0, 2 * Math.PI);
          ctx.fill();
        }
      }
    });
    ctx.restore();
  }

  destroy() {
    if (this._raf && typeof cancelAnimationFrame === "function") cancelAnimationFrame(this._raf);
    this._raf = 0;
    if (this._ro) this._ro.disconnect();
    this._ro = null;
    this.canvas.remove();
  }
}
