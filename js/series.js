// The front end's copy of the step series and epoch rows, grown in place.
import { decodeColumns, RESET } from "./protocol.js";

/** @typedef {import("./protocol.js").EpochRow} EpochRow */

/**
 * @template {Int32Array|Float32Array} T
 * @param {T} arr
 * @param {number} need
 * @returns {T}
 */
function grow(arr, need) {
  if (need <= arr.length) return arr;
  let size = Math.max(1024, arr.length);
  while (size < need) size *= 2;
  const Ctor = /** @type {any} */ (arr.constructor);
  const next = new Ctor(size);
  next.set(arr);
  return next;
}

export class StepStore {
  constructor(smoothing = 0.9) {
    this.step = new Int32Array(0);
    this.loss = new Float32Array(0);
    this.lr = new Float32Array(0);
    this.ema = new Float32Array(0);
    /** number of points held */
    this.length = 0;
    /** kernel index one past the last point held (gaps are kept, not filled) */
    this.end = 0;
    /** @type {EpochRow[]} */
    this.epochs = [];
    this.smoothing = smoothing;
    this._emaRaw = 0;
    this._emaCount = 0;
    /** true when a message skipped points this view never received */
    this.gap = false;
  }

  clear() {
    this.length = 0;
    this.end = 0;
    this.epochs = [];
    this._emaRaw = 0;
    this._emaCount = 0;
    this.gap = false;
  }

  /**
   * Apply a reset/append message. Returns the number of points added.
   * @param {import("./protocol.js").SeriesPayload} msg
   * @param {any[]} buffers
   */
  apply(msg, buffers) {
    const cols = decodeColumns(msg, buffers || []);
    if (msg.kind === RESET) this.clear();
    // points: skip what this view already holds (a hello reply may overlap an append)
    let from = 0;
    if (msg.start < this.end) from = this.end - msg.start;
    else if (msg.start > this.end) this.gap = true;
    const n = Math.max(0, msg.count - from);
    if (n > 0) {
      const need = this.length + n;
      this.step = grow(this.step, need);
      this.loss = grow(this.loss, need);
      this.lr = grow(this.lr, need);
      this.ema = grow(this.ema, need);
      this.step.set(cols.step.subarray(from, from + n), this.length);
      this.loss.set(cols.loss.subarray(from, from + n), this.length);
      this.lr.set(cols.lr.subarray(from, from + n), this.length);
      this._extendEma(this.length, need);
      this.length = need;
      this.end = msg.start + msg.count;
    } else if (msg.start + msg.count > this.end) {
      this.end = msg.start + msg.count;
    }
    // epoch rows, with the same overlap rule
    const rows = msg.epochs || [];
    const skip = Math.max(0, this.epochs.length - msg.epochs_start);
    for (let i = skip; i < rows.length; i++) this.epochs.push(rows[i]);
    return n;
  }

  /** Exponential moving average of the loss, debiased (as TensorBoard's smoothing). */
  _extendEma(from, to) {
    const a = this.smoothing;
    for (let i = from; i < to; i++) {
      const y = this.loss[i];
      if (Number.isFinite(y)) {
        this._emaRaw = a * this._emaRaw + (1 - a) * y;
        this._emaCount += 1;
      }
      this.ema[i] = this._emaCount ? this._emaRaw / (1 - Math.pow(a, this._emaCount)) : NaN;
    }
  }

  /** @param {number} smoothing */
  setSmoothing(smoothing) {
    if (smoothing === this.smoothing) return;
    this.smoothing = smoothing;
    this._emaRaw = 0;
    this._emaCount = 0;
    this._extendEma(0, this.length);
  }

  /** The last finite raw loss, or null. */
  lastLoss() {
    for (let i = this.length - 1; i >= 0; i--) if (Number.isFinite(this.loss[i])) return this.loss[i];
    return null;
  }
}
