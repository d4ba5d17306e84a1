// The report's chart code (nnx_lab/reports, docs/report.md): plain JavaScript drawing SVG
// line charts with a hover readout, drag-to-zoom (double-click resets) and a log-scale
// toggle. It is inlined into every report, so a report opens from a file with no network
// and no library; uPlot, the widgets' chart library, ships inside the widget bundle as an
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
    const cursor = el("line", {y1: T, y2: H - B, class: "cursor", visibility: "hidden"}, svg);
    const sel = el("rect", {y: T, height: H - T - B, class: "selection", visibility: "hidden"}, svg);
    const readout = box.querySelector(".readout");
    const toX = ev => { const r = svg.getBoundingClientRect(); return x0 + ((ev.clientX - r.left) * W / r.width - L) / (W - L - R) * (x1 - x0); };
    let drag = null;
    svg.addEventListener("mousemove", ev => {
      const x = toX(ev);
      cursor.setAttribute("x1", sx(x)); cursor.setAttribute("x2", sx(x)); cursor.setAttribute("visibility", "visible");
      readout.textContent = chart.xlabel + " " + fmt(Math.round(x)) + ": " + chart.series.map((s, k) => {
        let best = null;
        s.x.forEach((v, i) => { if (s.y[i] !== null && (best === null || Math.abs(v - x) < Math.abs(s.x[best] - x))) best = i; });
        return best === null ? s.name + " -" : s.name + " " + fmt(s.y[best]);
      }).join("   ");
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
  const charts = JSON.parse(document.getElementById("nnx-report-data").textContent).charts;
  const root = document.getElementById("charts");
  charts.forEach(chart => {
    const box = document.createElement("div"); box.className = "chart-box"; box.dataset.chart = chart.id;
    const head = document.createElement("div"); head.className = "chart-head";
    const title = document.createElement("strong"); title.textContent = chart.title; head.appendChild(title);
    chart.series.forEach((s, k) => { const key = document.createElement("span"); key.className = "key"; key.style.color = COLORS[k % COLORS.length]; key.textContent = " \u25a0 " + s.name; head.appendChild(key); });
    const label = document.createElement("label"); const log = document.createElement("input"); log.type = "checkbox"; log.className = "log";
    label.appendChild(log); label.appendChild(document.createTextNode(" log scale")); head.appendChild(label);
    box.appendChild(head);
    const readout = document.createElement("div"); readout.className = "readout"; readout.textContent = "hover for values; drag to zoom, double-click to reset";
    box.appendChild(readout); root.appendChild(box);
    const all = chart.series.flatMap(s => s.x);
    const state = {log: false, full: [Math.min(...all), Math.max(...all)]};
    state.x0 = state.full[0]; state.x1 = state.full[1];
    log.addEventListener("change", () => { state.log = log.checked; draw(box, chart, state); });
    draw(box, chart, state);
  });
})();
