// A view's side of the series transport: say hello, take the snapshot meant for this
// view (in parts), then apply the numbered updates every view receives. Any sign of a
// missed message (a jump in the sequence, an op beyond the rows held) or no answer in
// time makes the view say hello again, with a growing pause between tries.
import { HELLO, PROTOCOL_VERSION, SNAPSHOT, UPDATE, versionMismatch } from "./protocol.js";
import { ColumnStore } from "./store.js";

let viewCounter = 0;

/** A view id unique in this page (and across reloads, thanks to the random part). */
export function newViewId() {
  viewCounter += 1;
  return `v${viewCounter}-${Math.random().toString(36).slice(2, 10)}`;
}

/**
 * @typedef {{send(content: any, callbacks?: any, buffers?: any[]): void}} Sender
 * @typedef {{setTimeout: typeof setTimeout, clearTimeout: typeof clearTimeout,
 *   now(): number}} Clock
 */

export class ViewSync {
  /**
   * @param {Sender} model  the anywidget model (only send() is used)
   * @param {{series: string[], onChange: (names: Set<string>) => void,
   *   onError?: (message: string) => void, viewId?: string, clock?: Clock,
   *   firstTimeoutMs?: number, maxTimeoutMs?: number,
   *   accept?: (name: string) => boolean}} opts
   *   accept: series the kernel may add later (e.g. one pair per run of a race); a
   *   store is made for them on their first op and dropped at the next snapshot.
   */
  constructor(model, opts) {
    this.model = model;
    this.view = opts.viewId || newViewId();
    /** @type {Record<string, ColumnStore>} */
    this.stores = {};
    for (const name of opts.series) this.stores[name] = new ColumnStore();
    this._fixed = new Set(opts.series);
    this.accept = opts.accept || (() => false);
    this.onChange = opts.onChange;
    this.onError = opts.onError || (() => {});
    this.clock = opts.clock || {
      setTimeout: (fn, ms) => setTimeout(fn, ms),
      clearTimeout: (id) => clearTimeout(id),
      now: () => Date.now(),
    };
    this.firstTimeoutMs = opts.firstTimeoutMs ?? 2000;
    this.maxTimeoutMs = opts.maxTimeoutMs ?? 30000;
    /** true once a whole snapshot arrived and no update was missed since */
    this.synced = false;
    /** the sequence number of the last update applied */
    this.seq = 0;
    this.req = 0;
    this.hellos = 0;
    this._timeoutMs = this.firstTimeoutMs;
    this._timer = null;
    /** @type {{req: number, next: number, parts: number, seq: number}|null} */
    this._incoming = null;
    this._disposed = false;
  }

  /** Say hello (again), and try again later if no snapshot comes. */
  hello() {
    if (this._disposed) return;
    this.req += 1;
    this.hellos += 1;
    this.synced = false;
    this._arm();
    try {
      this.model.send({ kind: HELLO, version: PROTOCOL_VERSION, view: this.view, req: this.req });
    } catch (err) {
      // no kernel to talk to (a notebook opened without one): try again later
      this.onError(`nnx-lab: cannot reach the kernel (${err && err.message ? err.message : err}); retrying`);
    }
  }

  _arm() {
    if (this._timer !== null) this.clock.clearTimeout(this._timer);
    const wait = this._timeoutMs;
    this._timeoutMs = Math.min(this.maxTimeoutMs, this._timeoutMs * 2);
    this._timer = this.clock.setTimeout(() => {
      this._timer = null;
      if (!this.synced) this.hello();
    }, wait);
  }

  /**
   * Handle a kernel message; returns true when it was a series message.
   * @param {any} msg @param {Array<DataView|ArrayBuffer|ArrayBufferView>} buffers
   */
  handle(msg, buffers) {
    if (this._disposed || !msg || (msg.kind !== UPDATE && msg.kind !== SNAPSHOT)) return false;
    if (msg.version !== PROTOCOL_VERSION) {
      this.onError(versionMismatch(msg.version));
      return true;
    }
    if (msg.kind === SNAPSHOT) this._snapshot(msg, buffers || []);
    else this._update(msg, buffers || []);
    return true;
  }

  _snapshot(msg, buffers) {
    if (msg.to !== this.view) return; // another view's; every view receives it
    if (msg.part === 0) {
      // series added later come back with the snapshot if the kernel still has them
      for (const name of Object.keys(this.stores)) if (!this._fixed.has(name)) delete this.stores[name];
      for (const store of Object.values(this.stores)) store.clear();
      this._incoming = { req: msg.req, next: 0, parts: msg.parts, seq: msg.seq };
      this.synced = false;
    }
    const inc = this._incoming;
    if (!inc || inc.req !== msg.req || inc.next !== msg.part) return; // a part of an abandoned reply
    if (!this._applyOps(msg.ops, buffers, null)) {
      this._incoming = null;
      this.hello();
      return;
    }
    inc.next += 1;
    if (inc.next === inc.parts) {
      this._incoming = null;
      this.synced = true;
      this.seq = inc.seq;
      this._timeoutMs = this.firstTimeoutMs;
      if (this._timer !== null) this.clock.clearTimeout(this._timer);
      this._timer = null;
      this.onChange(new Set(Object.keys(this.stores)));
    }
  }

  _update(msg, buffers) {
    if (!this.synced) return; // our snapshot is on its way (or we asked again)
    if (msg.seq <= this.seq) return; // already in the snapshot
    if (msg.seq !== this.seq + 1) {
      this.hello(); // missed an update
      return;
    }
    const changed = new Set();
    if (!this._applyOps(msg.ops, buffers, changed)) {
      this.hello();
      return;
    }
    this.seq = msg.seq;
    if (changed.size) this.onChange(changed);
  }

  /** @returns {boolean} false when an op does not fit what the view holds */
  _applyOps(ops, buffers, changed) {
    for (const op of ops) {
      let store = this.stores[op.series];
      if (!store && this.accept(op.series)) store = this.stores[op.series] = new ColumnStore();
      if (!store) continue; // a series this view does not show
      if (!store.apply(op, buffers)) return false;
      if (changed) changed.add(op.series);
    }
    return true;
  }

  /** Forget a series added later (the kernel dropped it). */
  drop(name) {
    if (!this._fixed.has(name)) delete this.stores[name];
  }

  dispose() {
    this._disposed = true;
    if (this._timer !== null) this.clock.clearTimeout(this._timer);
    this._timer = null;
  }
}
