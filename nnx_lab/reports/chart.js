// The report's chart code (nnx_lab/reports, docs/report.md): plain JavaScript drawing SVG
// line charts with a hover readout, drag-to-zoom (double-click resets) and a log-scale
// toggle, and reliability diagrams (bars per confidence bin, hover reads a bin). It is
// inlined into every report, so a report opens from a file with no network and no
// library; uPlot, the widgets' chart library, ships inside the widget bundle as an
// ES module and is not installed with the Python package.
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const W = 640, H = 260, L = 56, R = 12, T = 12, B = 28;
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];
  function el(name, attrs, parent) {
    const e = document.createElementNS(NS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function fmt(v) { return Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(3) : (+v.toPrecision(4)).toString(); }
  function draw(box, chart, state) {
    box.querySelector("svg") && box.querySelector("svg").remove();
    const svg = el("svg", {viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: "chart"});
    box.insertBefore(svg, box.querySelector(".readout"));
    const pts = chart.series.map(s => s.x.map((x, i) => [x, s.y[i]]).filter(p => p[1] !== null && (!state.log || p[1] > 0)));
    const xs = pts.flat().map(p => p[0]).filter(x => x >= state.x0 && x <= state.x1);
    const ys = pts.flat().filter(p => p[0] >= state.x0 && p[0] <= state.x1).map(p => state.log ? Math.log10(p[1]) : p[1]);
    if (!xs.length) { el("text", {x: L, y: H / 2}, svg).textContent = "no values in this range"; return; }
    let y0 = Math.min(...ys), y1 = Math.max(...ys);
    if (y0 === y1) { y0 -= 0.5; y1 += 0.5; }
    const x0 = state.x0, x1 = state.x1 === x0 ? x0 + 1 : state.x1;
    const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R);
    const sy = y => T + (1 - ((state.log ? Math.log10(y) : y) - y0) / (y1 - y0)) * (H - T - B);
    el("rect", {x: L, y: T, width: W - L - R, height: H - T - B, class: "frame"}, svg);
    for (let i = 0; i <= 4; i++) {
      const v = y0 + (y1 - y0) * i / 4, y = T + (1 - i / 4) * (H - T - B);
      el("text", {x: L - 4, y: y + 4, "text-anchor": "end", class: "tick"}, svg).textContent = fmt(state.log ? Math.pow(10, v) : v);
      const xv = x0 + (x1 - x0) * i / 4;
      el("text", {x: sx(xv), y: H - 8, "text-anchor": "middle", class: "tick"}, svg).textContent = fmt(xv);
    }
    pts.forEach((p, k) => {
      const inside = p.filter(q => q[0] >= x0 && q[0] <= x1);
      if (!inside.length) return;
      el("polyline", {points: inside.map(q => `${sx(q[0]).toFixed(1)},${sy(q[1]).toFixed(1)}`).join(" "),
        fill: "none", stroke: COLORS[k % COLORS.length], "stroke-width": 1.5, class: "line"}, svg);
    });
    if (chart.mark && chart.mark.x >= x0 && chart.mark.x <= x1) {  // e.g. the chosen threshold
      el("line", {x1: sx(chart.mark.x), x2: sx(chart.mark.x), y1: T, y2: H - B, class: "mark"}, svg);
      el("text", {x: sx(chart.mark.x) + 4, y: T + 12, class: "tick"}, svg).textContent = chart.mark.label;
    }
    const cursor = el("line", {y1: T, y2: H - B, class: "cursor", visibility: "hidden"}, svg);
    const sel = el("rect", {y: T, height: H - T - B, class: "selection", visibility: "hidden"}, svg);
    const readout = box.querySelector(".readout");
    const toX = ev => { const r = svg.getBoundingClientRect(); return x0 + ((ev.clientX - r.left) * W / r.width - L) / (W - L - R) * (x1 - x0); };
    let drag = null;
    svg.addEventListener("mousemove", ev => {
      const x = toX(ev);
      cursor.setAttribute("x1", sx(x)); cursor.setAttribute("x2", sx(x)); cursor.setAttribute("visibility", "visible");
      let at = null;
      readout.textContent = chart.xlabel + " " + fmt(chart.xfloat ? x : Math.round(x)) + ": " + chart.series.map((s, k) => {
        let best = null;
        s.x.forEach((v, i) => { if (s.y[i] !== null && (best === null || Math.abs(v - x) < Math.abs(s.x[best] - x))) best = i; });
        if (k === 0) at = best;
        return best === null ? s.name + " -" : s.name + " " + fmt(s.y[best]);
      }).join("   ") + (chart.extra && at !== null ? "   " + chart.extra.name + " " + fmt(chart.extra.values[at]) : "");
      if (drag !== null) { sel.setAttribute("x", Math.min(sx(drag), sx(x))); sel.setAttribute("width", Math.abs(sx(x) - sx(drag))); sel.setAttribute("visibility", "visible"); }
    });
    svg.addEventListener("mousedown", ev => { drag = toX(ev); });
    svg.addEventListener("mouseup", ev => {
      const x = toX(ev);
      if (drag !== null && Math.abs(sx(x) - sx(drag)) > 4) { state.x0 = Math.min(drag, x); state.x1 = Math.max(drag, x); drag = null; draw(box, chart, state); return; }
      drag = null; sel.setAttribute("visibility", "hidden");
    });
    svg.addEventListener("dblclick", () => { state.x0 = state.full[0]; state.x1 = state.full[1]; draw(box, chart, state); });
  }
  // A reliability diagram: per confidence bin, the accuracy before and after calibration
  // as two bars, the diagonal (perfect calibration) dashed; hover names the bin.
  function drawBins(box, chart) {
    const svg = el("svg", {viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: "chart"});
    box.insertBefore(svg, box.querySelector(".readout"));
    const sx = v => L + v * (W - L - R), sy = v => T + (1 - v) * (H - T - B);
    el("rect", {x: L, y: T, width: W - L - R, height: H - T - B, class: "frame"}, svg);
    for (let i = 0; i <= 4; i++) {
      el("text", {x: L - 4, y: sy(i / 4) + 4, "text-anchor": "end", class: "tick"}, svg).textContent = fmt(i / 4);
      el("text", {x: sx(i / 4), y: H - 8, "text-anchor": "middle", class: "tick"}, svg).textContent = fmt(i / 4);
    }
    const e = chart.edges, n = chart.series.length;
    for (let b = 0; b + 1 < e.length; b++) {
      const w = (sx(e[b + 1]) - sx(e[b])) / n;
      chart.series.forEach((s, k) => {
        if (s.accuracy[b] === null) return;
        el("rect", {x: sx(e[b]) + k * w + 0.5, y: sy(s.accuracy[b]), width: Math.max(w - 1, 0.5), height: sy(0) - sy(s.accuracy[b]),
          fill: COLORS[k % COLORS.length], opacity: 0.7, class: "bin", "data-bin": b}, svg);
      });
    }
    el("line", {x1: sx(0), y1: sy(0), x2: sx(1), y2: sy(1), class: "cursor"}, svg);
    const readout = box.querySelector(".readout");
    svg.addEventListener("mousemove", ev => {
      const r = svg.getBoundingClientRect(), v = ((ev.clientX - r.left) * W / r.width - L) / (W - L - R);
      let b = 0;
      while (b + 2 < e.length && v > e[b + 1]) b++;
      readout.textContent = "confidence " + fmt(e[b]) + "-" + fmt(e[b + 1]) + ": " + chart.series.map(s =>
        s.name + " " + (s.counts[b] ? "accuracy " + fmt(s.accuracy[b]) + ", mean confidence " + fmt(s.confidence[b]) + " (" + s.counts[b] + " rows)" : "empty")).join("; ");
    });
  }
  function build(chart, parent) {
    const box = document.createElement("div"); box.className = "chart-box"; box.dataset.chart = chart.id;
    const head = document.createElement("div"); head.className = "chart-head";
    const title = document.createElement("strong"); title.textContent = chart.title; head.appendChild(title);
    chart.series.forEach((s, k) => { const key = document.createElement("span"); key.className = "key"; key.style.color = COLORS[k % COLORS.length];
      key.textContent = " \u25a0 " + s.name + (s.ece !== undefined && s.ece !== null ? " (ECE " + fmt(s.ece) + ")" : ""); head.appendChild(key); });
    box.appendChild(head);
    const readout = document.createElement("div"); readout.className = "readout";
    box.appendChild(readout); parent.appendChild(box);
    if (chart.kind === "reliability") { readout.textContent = "hover a bin for its accuracy and confidence"; drawBins(box, chart); return; }
    readout.textContent = "hover for values; drag to zoom, double-click to reset";
    const label = document.createElement("label"); const log = document.createElement("input"); log.type = "checkbox"; log.className = "log";
    label.appendChild(log); label.appendChild(document.createTextNode(" log scale")); head.appendChild(label);
    const all = chart.series.flatMap(s => s.x);
    const state = {log: false, full: [Math.min(...all), Math.max(...all)]};
    state.x0 = state.full[0]; state.x1 = state.full[1];
    log.addEventListener("change", () => { state.log = log.checked; draw(box, chart, state); });
    draw(box, chart, state);
  }
  const data = JSON.parse(document.getElementById("nnx-report-data").textContent);
  const root = document.getElementById("charts");
  data.charts.forEach(chart => build(chart, root));
  // a document's chart goes beside its table (the slot the section left for it)
  (data.documents || []).forEach(chart => build(chart, document.querySelector(`[data-slot="${chart.id}"]`) || root));
})();
