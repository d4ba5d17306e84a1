// The chart every nnx-lab widget draws with: a thin layer over uPlot that adds what
// the widgets share. Non-finite values become gaps; linear or log scales on either
// axis; a hover readout hook; click-to-pick; drag to zoom (x), shift-drag to pan,
// double-click or resetZoom() to go back; min/max bands; bars; axis titles; marks
// (thinned when dense) and labelled markers; fixed domains (xDomain / yDomain: the
// axes do not follow the data, e.g. probabilities on [0, 1]); dots (an operating
// point); colours from JupyterLab's theme, followed through a theme switch. An axis
// reads in one format (xTicks / yTicks, shared/ticks.js); a count axis (xInteger) has
// whole-number ticks.
// With `dragPick` a drag picks (the pick follows the mouse) instead of zooming; `yRange`
// replaces the y range the data would give (e.g. to keep a diverging tail from
// flattening the rest). The columns become uPlot's values in plot_values.js; what lies
// over the series (marks, markers, dots) is drawn by chart_overlay.js.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { drawOverlay } from "./chart_overlay.js";
import { toPlotValues } from "./plot_values.js";
import { cssVar, onThemeChange, resolveColor } from "./theme.js";
import { INTEGER_INCRS, logRange } from "./ticks.js";

/**
 * @typedef {{label: string, color: string, width?: number, dash?: number[],
 *   fill?: string, points?: boolean, bars?: boolean, show?: boolean,
 *   hidden?: boolean, spanGaps?: boolean}} SeriesSpec
 *   color / fill: a CSS variable name ("--nnx-accent") or a colour.
 *   hidden: drawn only as the edge of a band (no line, no legend).
 *   spanGaps: draw the line across missing values (curves of several runs on one x).
 * @typedef {{upper: number, lower: number, fill: string}} BandSpec  (indices into series)
 * @typedef {{x: number, label: string, color: string}} Marker
 * @typedef {{x: number, y: number, color: string, label?: string}} Dot  (a point drawn on top)
 * @typedef {{title: string, xLabel: string, yLabel: string, height?: number,
 *   series: SeriesSpec[], bands?: BandSpec[], logX?: boolean, logY?: boolean,
 *   xDomain?: [number, number], yDomain?: [number, number],
 *   xFormat?: (v: number) => string, yFormat?: (v: number) => string,
 *   xTicks?: (splits: (number|null)[], o: {log: boolean}) => string[], yTicks?: same,
 *   xInteger?: boolean,
 *   sync?: string, onCursor?: (idx: number|null) => void,
 *   onPick?: (pick: {idx: number, x: number, values: (number|null)[]}) => void,
 *   onZoom?: (range: [number, number]|null) => void,
 *   dragPick?: boolean,
 *   yRange?: (min: number, max: number) => ([number, number]|null),
 *   onDraw?: (ranges: {x: number[], y: number[], logY: boolean, logX: boolean}) => void}} ChartOptions
 */

export class Chart {
  /** @param {HTMLElement} host @param {ChartOptions} opts */
  constructor(host, opts) {
    this.host = host;
    this.opts = { height: 180, logX: false, logY: false, ...opts };
    /** @type {number[]} */
    this.marks = [];
    /** @type {Marker[]} */
    this.markers = [];
    /** @type {Dot[]} */
    this.dots = [];
    /** current data as given (x, then one array per series) */
    this._x = new Float64Array(0);
    /** @type {ArrayLike<number>[]} */
    this._ys = opts.series.map(() => new Float64Array(0));
    /** @type {[number, number]|null} a fixed x range (zoom), or null */
    this.xRange = null;
    /** show only the last `xWindow` units of x, following new data; null: all */
    this.xWindow = null;
    /** what the last setData did, for tests and the view */
    this.info = { points: 0, gaps: 0, dropped: 0, marksDrawn: 0 };
    this.plot = null;
    this._downAt = null;
    // the chart behind a figure, for the browser's console and benchmarks/chart_draw.py
    host.nnxChart = this;
    this._build();
    this._ro = null;
    if (typeof ResizeObserver !== "undefined") {
      this._ro = new ResizeObserver(() => this._resize());
      this._ro.observe(host);
    }
    // a theme switch: new colours and fonts (a rebuild), and the size read again
    this._offTheme = onThemeChange(() => this.refreshTheme());
  }

  /** The host's width; while it has none (hidden: a background tab, JupyterLab's shell
   * during a theme switch) the width the plot has, so it is not drawn at a made-up one. */
  _width() {
    const w = this.host.clientWidth;
    if (w > 0) return Math.max(120, Math.floor(w));
    return this.plot ? this.plot.width : 600;
  }

  _build() {
    const host = this.host;
    const o = this.opts;
    // Colours are read from the theme when uPlot draws (a function per style), so a
    // chart built before it is in the page, or redrawn after a theme switch, is right.
    const color = (c, fallback) => () => resolveColor(host, c, fallback);
    const text = color("--jp-ui-font-color2", "#616161");
    const grid = color("--jp-border-color2", "#e0e0e0");
    const family = () => cssVar(host, "--jp-ui-font-family", "system-ui, sans-serif");
    const font = `11px ${family()}`;
    const labelFont = `600 11px ${family()}`;
    const series = [{ label: o.xLabel, value: (_u, v) => (v == null ? "–" : (o.xFormat || String)(v)) }];
    for (const s of o.series) {
      const stroke = color(s.color, "#888");
      /** @type {any} */
      const spec = {
        label: s.label,
        stroke: s.hidden ? "transparent" : stroke,
        width: s.hidden ? 0 : (s.width ?? 1.5),
        dash: s.dash,
        show: s.show ?? true,
        spanGaps: Boolean(s.spanGaps),
        points: { show: Boolean(s.points), size: 5, fill: stroke, stroke },
        value: (_u, v) => (v == null ? "–" : (o.yFormat || String)(v)),
      };
      if (s.fill) spec.fill = color(s.fill, "rgba(128,128,128,0.2)");
      if (s.bars) {
        spec.paths = uPlot.paths.bars({ size: [0.8, 64] });
        spec.fill = spec.fill || stroke;
        spec.points = { show: false };
      }
      series.push(spec);
    }
    // one format for every label of an axis (ticks), else each label formatted alone
    const labels = (ticks, fmt, scale) => {
      if (ticks) return (u, splits) => ticks(splits, { log: u.scales[scale].distr === 3 });
      return fmt ? (_u, splits) => splits.map((v) => (v == null ? "" : fmt(v))) : undefined;
    };
    const axis = (label, values) => ({
      label,
      stroke: text,
      font,
      labelFont,
      labelSize: 14,
      labelGap: 0,
      gap: 3,
      grid: { stroke: grid, width: 1 },
      ticks: { stroke: grid, width: 1, size: 4 },
      values,
    });
    /** @type {any} */
    const options = {
      width: this._width(),
      height: o.height,
      title: undefined,
      legend: { show: false },
      series,
      bands: (o.bands || []).map((b) => ({ series: [b.upper + 1, b.lower + 1], fill: color(b.fill, "rgba(128,128,128,0.2)") })),
      scales: {
        x: { time: false, distr: o.logX ? 3 : 1, log: 10, range: (_u, min, max) => this._xRange(min, max) },
        y: { distr: o.logY ? 3 : 1, log: 10, range: (_u, min, max) => this._yRange(min, max) },
      },
      axes: [
        { ...axis(o.xLabel, labels(o.xTicks, o.xFormat, "x")), size: 34, ...(o.xInteger ? { incrs: INTEGER_INCRS } : {}) },
        { ...axis(o.yLabel, labels(o.yTicks, o.yFormat, "y")), size: 56 },
      ],
      cursor: {
        drag: o.dragPick ? { x: false, y: false, setScale: false } : { x: true, y: false, setScale: true },
        points: { size: 6 },
        sync: o.sync ? { key: o.sync, setSeries: false, scales: ["x", null] } : undefined,
        bind: {
          mousedown: (u, _targ, handler) => (e) => {
            this._downAt = [e.clientX, e.clientY];
            if (e.shiftKey) {
              this._startPan(e);
              return null;
            }
            if (o.dragPick && e.button === 0) this._startDragPick(e);
            return handler(e);
          },
        },
      },
      hooks: {
        setCursor: [(u) => o.onCursor && o.onCursor(u.cursor.idx ?? null)],
        setSelect: [(u) => this._onSelect(u)],
        draw: [(u) => drawOverlay(this, u), (u) => o.onDraw && o.onDraw(this.ranges(u))],
        ready: [(u) => this._bindClick(u)],
      },
    };
    const data = this._plotData();
    // a rebuild (log scale, theme) keeps the plot where it was among the host's children
    const anchor = this.plot ? this.plot.root.nextSibling : null;
    if (this.plot) this.plot.destroy();
    this.plot = new uPlot(options, data, host);
    if (anchor && anchor.parentNode === host) host.insertBefore(this.plot.root, anchor);
    this.plot.root.setAttribute("role", "img");
    this.plot.root.setAttribute("aria-label", o.title);
    this._applyX();
  }

  /** x range from the data; a fixed one while there is none (uPlot needs a range to draw axes). */
  _xRange(min, max) {
    if (this.opts.xDomain) return [...this.opts.xDomain];
    const log = this.opts.logX;
    if (min == null || max == null || !Number.isFinite(min) || !Number.isFinite(max)) return log ? [1, 10] : [0, 1];
    if (log) return logRange(min, max);
    return min === max ? [min - 1, max + 1] : [min, max];
  }

  /** y range from the data shown, padded; a log range fits the data (ticks.js logRange). */
  _yRange(min, max) {
    if (this.opts.yDomain) return [...this.opts.yDomain];
    const log = this.opts.logY;
    const given = this.opts.yRange ? this.opts.yRange(min, max) : null;
    if (given) return given;
    if (min == null || max == null || !Number.isFinite(min) || !Number.isFinite(max)) return log ? [0.1, 1] : [0, 1];
    if (log) return logRange(min, max);
    return uPlot.rangeNum(min, max, 0.1, true);
  }

  _bindClick(u) {
    u.over.addEventListener("click", (e) => {
      const down = this._downAt;
      this._downAt = null;
      // a click, not the end of a drag (zoom) or a pan
      if (down && Math.hypot(e.clientX - down[0], e.clientY - down[1]) > 3) return;
      if (this.opts.dragPick) return; // picked on mouseup (_startDragPick)
      const idx = u.cursor.idx;
      if (idx == null || !this.opts.onPick) return;
      this.opts.onPick({ idx, x: Number(u.data[0][idx]), values: u.data.slice(1).map((d) => d[idx] ?? null) });
    });
    u.over.addEventListener("dblclick", () => this.resetZoom());
  }

  /** The point under the mouse (nearest x), as onPick reports it; null when no data. */
  _pickAt(clientX, dragging) {
    const u = this.plot;
    if (!u || !u.data[0].length || !this.opts.onPick) return;
    const rect = u.over.getBoundingClientRect();
    const idx = u.posToIdx(clientX - rect.left);
    if (idx == null || idx < 0 || idx >= u.data[0].length) return;
    this.opts.onPick({ idx, x: Number(u.data[0][idx]), values: u.data.slice(1).map((d) => d[idx] ?? null), dragging });
  }

  /** dragPick: the pick follows the mouse while the button is held; the last one is final. */
  _startDragPick(e) {
    const x0 = e.clientX;
    let moved = false;
    const move = (ev) => {
      moved = moved || Math.abs(ev.clientX - x0) > 3;
      if (moved) this._pickAt(ev.clientX, true);
    };
    const up = (ev) => {
      document.removeEventListener("mousemove", move);
      document.removeEventListener("mouseup", up);
      this._pickAt(ev.clientX, false);
    };
    document.addEventListener("mousemove", move);
    document.addEventListener("mouseup", up);
  }

  _startPan(e) {
    const u = this.plot;
    if (!u) return;
    const x0 = e.clientX;
    const min0 = u.scales.x.min;
    const max0 = u.scales.x.max;
    const width = u.over.clientWidth || u.bbox.width / (window.devicePixelRatio || 1);
    const log = this.opts.logX;
    const fwd = (v) => (log ? Math.log10(v) : v);
    const bwd = (v) => (log ? 10 ** v : v);
    const move = (ev) => {
      const dx = ((ev.clientX - x0) / Math.max(1, width)) * (fwd(max0) - fwd(min0));
      this.setXRange(bwd(fwd(min0) - dx), bwd(fwd(max0) - dx));
    };
    const up = () => {
      document.removeEventListener("mousemove", move);
      document.removeEventListener("mouseup", up);
    };
    document.addEventListener("mousemove", move);
    document.addEventListener("mouseup", up);
  }

  _onSelect(u) {
    // a drag selected an x range: uPlot zooms to it; keep it until resetZoom()
    const { left, width } = u.select;
    if (!(width > 0)) return;
    this.xRange = [u.posToVal(left, "x"), u.posToVal(left + width, "x")];
    if (this.opts.onZoom) this.opts.onZoom(this.xRange);
  }

  _plotData() {
    const logY = this.opts.logY;
    let gaps = 0;
    let dropped = 0;
    let shown = null;
    const ys = this._ys.map((y, i) => {
      // a hidden series draws nothing: hand uPlot any array of the right length
      if (this.opts.series[i].show === false && shown) return shown;
      const r = toPlotValues(y, logY);
      gaps += r.gaps;
      dropped += r.dropped;
      shown = shown || r.data;
      return r.data;
    });
    const x = this.opts.logX ? toPlotValues(this._x, true).data : Array.from(this._x);
    this.info.points = this._x.length;
    this.info.gaps = gaps;
    this.info.dropped = dropped;
    return [x, ...ys];
  }

  /**
   * Replace the data. `x` ascending; one array per series, same length as x.
   * @param {ArrayLike<number>} x @param {ArrayLike<number>[]} ys
   */
  setData(x, ys) {
    this._x = x;
    this._ys = ys;
    if (!this.plot) return;
    this.plot.setData(this._plotData(), this.xRange === null && this.xWindow === null);
    this._applyX();
  }

  /** The x range to show: fixed (zoom), the newest `xWindow` units, or everything. */
  _applyX() {
    const u = this.plot;
    if (!u) return;
    const n = this._x.length;
    let range = this.xRange;
    if (range === null && this.xWindow !== null && n) {
      const last = this._x[n - 1];
      range = [Math.max(this._x[0], last - this.xWindow), last];
      if (range[1] <= range[0]) range = [range[0] - 1, range[1] + 1];
    }
    if (range === null) return;
    u.setScale("x", { min: range[0], max: range[1] });
  }

  /** Zoom to [min, max] of x (until resetZoom(); a window of steps stays set beneath). */
  setXRange(min, max) {
    if (!(max > min)) return;
    this.xRange = [min, max];
    this._applyX();
    if (this.opts.onZoom) this.opts.onZoom(this.xRange);
  }

  /** Show the newest `n` units of x and follow new data (null: everything). */
  setXWindow(n) {
    this.xWindow = n;
    this.xRange = null;
    if (n === null && this.plot) this.plot.setData(this._plotData(), true);
    else this._applyX();
  }

  /** Undo a zoom: back to the window of newest x (setXWindow) if one is set, else all. */
  resetZoom() {
    this.xRange = null;
    if (this.plot) {
      this.plot.setData(this._plotData(), this.xWindow === null);
      this._applyX();
    }
    if (this.opts.onZoom) this.opts.onZoom(null);
  }

  /** Show or hide series (indices into opts.series); a hidden one costs no drawing. */
  showSeries(indices, on) {
    let changed = false;
    for (const i of indices) {
      if ((this.opts.series[i].show ?? true) === on) continue;
      this.opts.series[i].show = on;
      changed = true;
    }
    if (!changed || !this.plot) return;
    this.plot.batch(() => {
      for (const i of indices) this.plot.setSeries(i + 1, { show: on });
      this.plot.setData(this._plotData(), this.xRange === null && this.xWindow === null);
    });
    this._applyX();
  }

  /** Switch the y axis between linear and log (rebuilds the plot). */
  setLogY(on) {
    if (this.opts.logY === Boolean(on)) return;
    this.opts.logY = Boolean(on);
    this._build();
  }

  setLogX(on) {
    if (this.opts.logX === Boolean(on)) return;
    this.opts.logX = Boolean(on);
    this._build();
  }

  /** Dashed vertical marks at these x values (thinned when dense). */
  setMarks(xs) {
    this.marks = xs;
    if (this.plot) this.plot.redraw(false, false);
  }

  /** A fixed y domain ([min, max]), or null to follow the data again. */
  setYDomain(domain) {
    const same = (a, b) => a === b || (a && b && a[0] === b[0] && a[1] === b[1]);
    if (same(this.opts.yDomain || null, domain || null)) return;
    this.opts.yDomain = domain || undefined;
    if (this.plot) this.plot.setData(this._plotData(), this.xRange === null && this.xWindow === null);
  }

  /** Points drawn on top of the series (e.g. the current operating point). */
  setDots(dots) {
    this.dots = dots;
    if (this.plot) this.plot.redraw(false, false);
  }

  /** Labelled vertical markers (e.g. "loss non-finite since step N"). */
  setMarkers(markers) {
    this.markers = markers;
    if (this.plot) this.plot.redraw(false, false);
  }

  _resize() {
    if (!this.plot) return;
    const width = this._width();
    if (width !== this.plot.width) this.plot.setSize({ width, height: this.opts.height });
  }

  /** Rebuild with the current theme's colours and fonts, at the host's current width. */
  refreshTheme() {
    this._build();
  }

  /** The plot's canvas (axes included), for a PNG export. */
  canvas() {
    return this.plot ? this.plot.ctx.canvas : null;
  }

  /** The scale ranges in use, for tests and readouts. */
  ranges(u = this.plot) {
    return u
      ? { x: [u.scales.x.min, u.scales.x.max], y: [u.scales.y.min, u.scales.y.max], logY: u.scales.y.distr === 3, logX: u.scales.x.distr === 3 }
      : null;
  }

  destroy() {
    if (this.host.nnxChart === this) delete this.host.nnxChart;
    this._offTheme();
    if (this._ro) this._ro.disconnect();
    this._ro = null;
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }
}
