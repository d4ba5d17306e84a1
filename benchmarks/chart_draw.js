// The page side of benchmarks/chart_draw.py (run in headless Chromium by Playwright).
// A function of [bundle, css, points, repeats] that returns the timings in ms.
async ([bundle, css, n, repeats]) => {
  document.getElementById('css').textContent = css;
  const mod = await import(URL.createObjectURL(new Blob([bundle], {type: 'text/javascript'})));
  const handlers = {};
  const state = {status: 'running', smoothing: 0.9, run_id: 'bench', can_stop: true};
  const sent = [];
  const model = {
    get: (k) => state[k], set: (k, v) => { state[k] = v; }, save_changes() {},
    on: (e, cb) => { (handlers[e] ||= []).push(cb); }, off() {},
    send: (c) => sent.push(c),
  };
  const el = document.getElementById('el');
  el.replaceChildren();
  mod.default.render({model, el});
  const hello = sent.find((c) => c.kind === 'hello');
  const cols = (from, to) => {
    const k = to - from;
    const step = new Int32Array(k), loss = new Float32Array(k), lr = new Float32Array(k);
    const one = new Int32Array(k).fill(1), zero = new Int32Array(k);
    for (let i = 0; i < k; i++) {
      const s = from + i + 1;
      step[i] = s;
      loss[i] = Math.exp(-s / (n / 3)) + 0.1 + 0.05 * Math.sin(s * 12.9898) * Math.sin(s * 78.233);
      lr[i] = 1e-3 * (1 + Math.cos(Math.PI * s / n)) / 2 + 1e-6;
    }
    return {first: step, step, loss, 'loss:min': loss, 'loss:max': loss, lr, n: one, bad: zero};
  };
  const op = (series, at, columns, total) => {
    const fields = Object.keys(columns);
    return {op: {series, at, count: columns[fields[0]].length, fields,
                 dtypes: fields.map((f) => columns[f] instanceof Int32Array ? 'int32' : 'float32'),
                 width: 1, total}, buffers: fields.map((f) => columns[f])};
  };
  const message = (head, ops) => {
    const buffers = [];
    const list = ops.map((o) => { const b = buffers.length; buffers.push(...o.buffers); return {...o.op, buffer: b}; });
    return [{...head, version: 2, ops: list}, buffers];
  };
  const epochs = Math.max(1, Math.floor(n / 1000));
  const ecols = {first: new Int32Array(epochs), epoch: new Int32Array(epochs), step: new Int32Array(epochs),
                 lr: new Float32Array(epochs).fill(1e-3), n: new Int32Array(epochs).fill(1),
                 'val.loss': new Float32Array(epochs)};
  for (let e = 0; e < epochs; e++) {
    ecols.first[e] = ecols.epoch[e] = e + 1;
    ecols.step[e] = (e + 1) * 1000;
    ecols['val.loss'][e] = 0.5 / (e + 1);
  }
  const [snap, sbuf] = message({kind: 'snapshot', seq: 1, to: hello.view, req: hello.req, part: 0, parts: 1},
                               [op('steps', 0, cols(0, n), n), op('epochs', 0, ecols, epochs)]);
  for (const cb of handlers['msg:custom']) cb(snap, sbuf);
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 50)));

  const fig = el.querySelector('[data-testid="loss-chart"]');
  const ms = async (fn) => { const t0 = performance.now(); await fn(); return performance.now() - t0; };
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  const micro = () => new Promise((r) => queueMicrotask(r));
  // draw: the loss chart's uPlot with the data it has, from setData to the end of its draw
  const chart = fig.nnxChart;
  const draws = [];
  for (let r = 0; r < repeats; r++) {
    draws.push(await ms(async () => { chart.setData(chart._x, chart._ys); await micro(); }));
  }
  // zoom/pan: a new x range, redrawn
  const zooms = [];
  const x0 = chart._x[0];
  const x1 = chart._x[chart._x.length - 1];
  for (let r = 0; r < repeats; r++) {
    const a = x0 + ((x1 - x0) * r) / (2 * repeats);
    zooms.push(await ms(async () => { chart.setXRange(a, a + (x1 - x0) / 2); await micro(); }));
  }
  chart.resetZoom();
  await micro();
  // update: 500 new steps through the transport, and the frame that draws them
  const updates = [];
  let total = n;
  for (let r = 0; r < repeats; r++) {
    const [upd, ubuf] = message({kind: 'update', seq: 2 + r}, [op('steps', total, cols(total, total + 500), total + 500)]);
    total += 500;
    updates.push(await ms(async () => { for (const cb of handlers['msg:custom']) cb(upd, ubuf); await frame(); await micro(); }));
  }
  // hover: pointer moves over the loss chart
  const over = fig.querySelector('.u-over');
  const box = over.getBoundingClientRect();
  const hovers = [];
  for (let r = 0; r < repeats; r++) {
    const x = box.left + box.width * (0.1 + 0.8 * r / repeats);
    hovers.push(await ms(async () => {
      over.dispatchEvent(new MouseEvent('mousemove', {clientX: x, clientY: box.top + box.height / 2, bubbles: true}));
      await micro();
    }));
  }
  return {draws, zooms, updates, hovers, points: Number(fig.dataset.points),
          readout: fig.querySelector('[data-testid="readout"]').textContent};
}
