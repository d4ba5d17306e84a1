// Test doubles: an anywidget model, kernel-style series messages, a manual clock; the
// page a file's views are drawn in; the built bundles.
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { afterEach, beforeEach, expect } from "vitest";
import { emptyTraits } from "../../js/lab/run_state.js";

/**
 * A widget's built bundle (nnx_lab/static/<name>.js) as anywidget loads it: its default
 * export, after checking that it exports nothing else and only render (anywidget warns
 * about a direct render export).
 */
export async function builtWidget(name) {
  const bundle = resolve(`nnx_lab/static/${name}.js`);
  expect(existsSync(bundle), "run `npm run build` first").toBe(true);
  const mod = await import(/* @vite-ignore */ bundle);
  expect(Object.keys(mod)).toEqual(["default"]);
  expect(Object.keys(mod.default)).toEqual(["render"]);
  return mod.default;
}

/**
 * The element a test file draws its views in: in the page during each test, emptied
 * and out of it after.
 */
export function testHost() {
  const el = document.createElement("div");
  beforeEach(() => document.body.append(el));
  afterEach(() => {
    el.replaceChildren();
    el.remove();
  });
  return el;
}

/** `q(id)`: the element with that data-testid under `el` (or under the root given). */
export function byTestId(el) {
  return (id, root = el) => root.querySelector(`[data-testid="${id}"]`);
}

/** Dispose a test's view unless the test did; undefined, for `view = disposeView(view)`. */
export function disposeView(view) {
  if (view && !view._disposed) view.dispose();
  return undefined;
}

/** A fake anywidget model: get/set/on/off/save_changes/send, plus test helpers. */
export function fakeModel(initial = {}) {
  // the monitor's traits before a run (what the labextension's model starts from too)
  const state = {
    ...emptyTraits(),
    can_stop: false,
    from_log: false,
    smoothing: 0.9,
    snapshot_of: "",
    ...initial,
  };
  /** @type {Map<string, Set<Function>>} */
  const handlers = new Map();
  const sent = [];
  const model = {
    get: (name) => state[name],
    set(name, value) {
      state[name] = value;
      model.emit(`change:${name}`, value);
    },
    on(event, cb) {
      if (!handlers.has(event)) handlers.set(event, new Set());
      handlers.get(event).add(cb);
    },
    off(event, cb) {
      if (!handlers.has(event)) return;
      if (cb) handlers.get(event).delete(cb);
      else handlers.delete(event);
    },
    saves: 0,
    save_changes() {
      model.saves += 1;
    },
    send(content, _callbacks, buffers) {
      sent.push({ content, buffers });
    },
    emit(event, ...args) {
      for (const cb of [...(handlers.get(event) || [])]) cb(...args);
    },
    /** deliver a kernel -> view custom message */
    custom(content, buffers = []) {
      model.emit("msg:custom", content, buffers);
    },
    listenerCount() {
      let n = 0;
      for (const set of handlers.values()) n += set.size;
      return n;
    },
    /** the last hello this model sent */
    lastHello() {
      const hellos = sent.filter((m) => m.content.kind === "hello");
      return hellos.length ? hellos[hellos.length - 1].content : null;
    },
    sent,
    state,
  };
  return model;
}

/** Bytes of a typed array at an odd offset of a bigger buffer, as a wire buffer may be. */
function wireView(arr) {
  const bytes = new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength);
  const big = new Uint8Array(bytes.byteLength + 3);
  big.set(bytes, 3);
  return new DataView(big.buffer, 3, bytes.byteLength);
}

const ARRAYS = { int32: Int32Array, float32: Float32Array, float64: Float64Array };

/**
 * One op and its buffers.
 * @param {string} series
 * @param {number} at
 * @param {Record<string, [string, number[]]>} columns  field -> [dtype, values]
 * @param {{width?: number, total?: number}} [meta]
 */
export function op(series, at, columns, meta = {}) {
  const fields = Object.keys(columns);
  const dtypes = fields.map((f) => columns[f][0]);
  const count = fields.length ? columns[fields[0]][1].length : 0;
  const buffers = fields.map((f) => wireView(ARRAYS[columns[f][0]].from(columns[f][1])));
  return {
    op: { series, at, count, fields, dtypes, width: meta.width ?? 1, total: meta.total ?? at + count, buffer: 0 },
    buffers,
  };
}

/** Join ops into one message's ops list and buffer list. */
function pack(ops) {
  const list = [];
  const buffers = [];
  for (const o of ops) {
    list.push({ ...o.op, buffer: buffers.length });
    buffers.push(...o.buffers);
  }
  return { ops: list, buffers };
}

export function update(seq, ops) {
  const { ops: list, buffers } = pack(ops);
  return { content: { kind: "update", version: 2, seq, ops: list }, buffers };
}

export function snapshot(to, req, seq, ops, part = 0, parts = 1) {
  const { ops: list, buffers } = pack(ops);
  return { content: { kind: "snapshot", version: 2, seq, to, req, part, parts, ops: list }, buffers };
}

/** Step-series columns for steps `from..to` (inclusive) with loss f(step). */
export function stepColumns(from, to, loss = (s) => 1 / s, lr = () => 0.01) {
  const steps = range(from, to + 1);
  const losses = steps.map(loss);
  return {
    first: ["int32", steps],
    step: ["int32", steps],
    loss: ["float32", losses],
    "loss:min": ["float32", losses],
    "loss:max": ["float32", losses],
    lr: ["float32", steps.map(lr)],
    n: ["int32", steps.map(() => 1)],
    bad: ["int32", losses.map((v) => (Number.isFinite(v) ? 0 : 1))],
  };
}

/** Epoch-series columns for epochs `from..to`. */
export function epochColumns(from, to, { stepsPerEpoch = 10, val = true } = {}) {
  const epochs = range(from, to + 1);
  const cols = {
    first: ["int32", epochs],
    epoch: ["int32", epochs],
    step: ["int32", epochs.map((e) => e * stepsPerEpoch)],
    lr: ["float32", epochs.map(() => 1e-5)],
    seconds: ["float32", epochs.map(() => 1.5)],
    "seconds:min": ["float32", epochs.map(() => 1.5)],
    "seconds:max": ["float32", epochs.map(() => 1.5)],
    improved: ["int32", epochs.map((e) => (e === 2 ? 1 : 0))],
    n: ["int32", epochs.map(() => 1)],
  };
  const metric = (name, f) => {
    const v = epochs.map(f);
    cols[name] = ["float32", v];
    cols[`${name}:min`] = ["float32", v];
    cols[`${name}:max`] = ["float32", v];
  };
  metric("train.loss", (e) => 2 / e);
  if (val) {
    metric("val.loss", (e) => 1 / e);
    metric("val.accuracy", (e) => 0.5 + e / 1000);
  }
  return cols;
}

export function range(a, b) {
  return Array.from({ length: b - a }, (_, i) => a + i);
}

/** A clock whose timers fire only when the test advances it. */
export function manualClock() {
  let now = 0;
  let next = 1;
  const timers = new Map();
  return {
    now: () => now,
    setTimeout(fn, ms) {
      const id = next++;
      timers.set(id, { at: now + ms, fn });
      return id;
    },
    clearTimeout(id) {
      timers.delete(id);
    },
    advance(ms) {
      now += ms;
      for (const [id, t] of [...timers]) {
        if (t.at <= now) {
          timers.delete(id);
          t.fn();
        }
      }
    },
    pending: () => timers.size,
  };
}

/**
 * Wait for animation frames and timers queued by the code under test. The frame and
 * the timer at the end make it wait for what was queued before, however long a busy
 * machine held it back (frames run in the order they were asked for).
 */
export async function settle(ms = 40) {
  await new Promise((resolve) => setTimeout(resolve, ms));
  if (typeof requestAnimationFrame === "function") await new Promise((resolve) => requestAnimationFrame(() => resolve()));
  await new Promise((resolve) => setTimeout(resolve, 0));
}
