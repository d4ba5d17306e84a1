// Test doubles: an anywidget model and a recording 2D canvas context.

/** A fake anywidget model: get/set/on/off/save_changes/send, plus test helpers. */
export function fakeModel(initial = {}) {
  const state = {
    run_id: "",
    status: "created",
    stop_reason: "",
    epoch: 0,
    n_epochs: 0,
    step: 0,
    total_steps: null,
    samples: 0,
    samples_per_sec: null,
    elapsed: 0,
    eta: null,
    can_stop: false,
    smoothing: 0.9,
    error: "",
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
    save_changes() {},
    send(content, _callbacks, buffers) {
      sent.push({ content, buffers });
    },
    // helpers
    emit(event, ...args) {
      for (const cb of [...(handlers.get(event) || [])]) cb(...args);
    },
    /** deliver a kernel -> front-end custom message */
    custom(content, buffers = []) {
      model.emit("msg:custom", content, buffers);
    },
    listenerCount() {
      let n = 0;
      for (const set of handlers.values()) n += set.size;
      return n;
    },
    sent,
    state,
  };
  return model;
}

/**
 * A kernel-style series message, with buffers as DataViews (as anywidget delivers them).
 * @param {"reset"|"append"} kind
 */
export function seriesMessage(kind, start, steps, losses, lrs, epochs = [], epochsStart = 0) {
  const count = steps.length;
  const toView = (arr) => {
    // put the bytes at an odd offset inside a larger buffer, as a real wire buffer may be
    const bytes = new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength);
    const big = new Uint8Array(bytes.byteLength + 3);
    big.set(bytes, 3);
    return new DataView(big.buffer, 3, bytes.byteLength);
  };
  const buffers = [
    toView(Int32Array.from(steps)),
    toView(Float32Array.from(losses)),
    toView(Float32Array.from(lrs ?? steps.map(() => 0.01))),
  ];
  return {
    content: {
      kind,
      version: 1,
      start,
      count,
      fields: ["step", "loss", "lr"],
      dtypes: ["int32", "float32", "float32"],
      epochs_start: epochsStart,
      epochs,
    },
    buffers,
  };
}

export function range(a, b) {
  return Array.from({ length: b - a }, (_, i) => a + i);
}

/** A 2D context that records calls instead of drawing. */
export function recordingContext() {
  const calls = { lineTo: 0, moveTo: 0, arc: 0, fillText: [], stroke: 0 };
  const ctx = new Proxy(
    {},
    {
      get(_t, prop) {
        if (prop === "calls") return calls;
        if (prop === "lineTo") return () => (calls.lineTo += 1);
        if (prop === "moveTo") return () => (calls.moveTo += 1);
        if (prop === "arc") return () => (calls.arc += 1);
        if (prop === "stroke") return () => (calls.stroke += 1);
        if (prop === "fillText") return (text) => calls.fillText.push(String(text));
        if (prop === "measureText") return (text) => ({ width: 6 * String(text).length });
        return () => {};
      },
      set() {
        return true;
      },
    },
  );
  return ctx;
}
