// Sending a control's value to the kernel while it moves, one request at a time.
//
// A slider fires an input event per pixel; the kernel answers each value it gets
// (the explorers recompute and bump their `revision` trait). Sending every value
// would queue work in the kernel and the picture would trail the pointer further and
// further. So only one value is in flight: while it is, a newer value waits, and a
// value replaced by a still newer one before it left is never sent. The view calls
// answered() when the kernel's answer arrives; a lost answer is given up on after
// `timeoutMs`, so the control never stays stuck.

/**
 * @typedef {{setTimeout: typeof setTimeout, clearTimeout: typeof clearTimeout}} Timers
 */

export class LatestRequest {
  /**
   * @param {(value: any) => void} send  sends one value (e.g. model.set + save_changes)
   * @param {{timeoutMs?: number, timers?: Timers, same?: (a: any, b: any) => boolean}} [opts]
   */
  constructor(send, opts = {}) {
    this._send = send;
    this.timeoutMs = opts.timeoutMs ?? 2000;
    this.timers = opts.timers || { setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: (id) => clearTimeout(id) };
    this.same = opts.same || ((a, b) => a === b);
    this.inFlight = false;
    /** the value waiting for the one in flight, or undefined */
    this.pending = undefined;
    /** the last value sent */
    this.last = undefined;
    this.sent = 0;
    this._timer = null;
  }

  /** Ask for `value`: sent now if nothing is in flight, else once the answer comes. */
  request(value) {
    if (this.inFlight) {
      this.pending = value;
      return;
    }
    this._go(value);
  }

  _go(value) {
    this.pending = undefined;
    this.inFlight = true;
    this.last = value;
    this.sent += 1;
    this._arm();
    this._send(value);
  }

  _arm() {
    if (this._timer !== null) this.timers.clearTimeout(this._timer);
    this._timer = this.timers.setTimeout(() => {
      this._timer = null;
      this.answered();
    }, this.timeoutMs);
  }

  /** The kernel answered: send the newest waiting value, if it differs from the last. */
  answered() {
    if (this._timer !== null) this.timers.clearTimeout(this._timer);
    this._timer = null;
    this.inFlight = false;
    const next = this.pending;
    this.pending = undefined;
    if (next !== undefined && !this.same(next, this.last)) this._go(next);
  }

  /** Whether the control shows a value the kernel has not answered yet. */
  get busy() {
    return this.inFlight || this.pending !== undefined;
  }

  dispose() {
    if (this._timer !== null) this.timers.clearTimeout(this._timer);
    this._timer = null;
    this.pending = undefined;
  }
}

/**
 * Write trait `name` for `request` (the kernel answers a new value by bumping its
 * `revision`). A value the kernel holds already changes nothing, sends nothing and
 * gets no answer: the request counts as answered at once instead of waiting for one.
 * @param {import("./view.js").Model} model @param {string} name @param {any} value
 * @param {LatestRequest} request
 */
export function writeAnswered(model, name, value, request) {
  if (model.get(name) === value) {
    queueMicrotask(() => request.answered());
    return;
  }
  model.set(name, value);
  model.save_changes();
}
