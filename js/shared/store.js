// A view's copy of one kernel-side series: named typed-array columns, grown in place.
// The kernel sends every change as "keep the first `at` rows, append these" (an op).
import { DTYPES, toTypedArray } from "./protocol.js";

/**
 * @template {Int32Array|Float32Array|Float64Array} T
 * @param {T} arr @param {number} need @param {number} keep rows to copy over
 * @returns {T}
 */
function grow(arr, need, keep) {
  if (need <= arr.length) return arr;
  let size = Math.max(256, arr.length);
  while (size < need) size *= 2;
  const Ctor = /** @type {any} */ (arr.constructor);
  const next = new Ctor(size);
  next.set(arr.subarray(0, keep));
  return next;
}

export class ColumnStore {
  constructor() {
    /** @type {string[]} */
    this.fields = [];
    /** @type {string[]} */
    this.dtypes = [];
    /** @type {Record<string, Int32Array|Float32Array|Float64Array>} */
    this._cols = {};
    /** rows held */
    this.length = 0;
    /** raw points per full bucket (1 until the kernel decimated the series) */
    this.width = 1;
    /** raw points the kernel's series has seen */
    this.total = 0;
    /** lowest row changed since the last takeChangedFrom() (Infinity: none) */
    this._changedFrom = Infinity;
  }

  clear() {
    this.length = 0;
    this.width = 1;
    this.total = 0;
    this._changedFrom = 0;
  }

  /**
   * Apply one op. Returns false (and changes nothing) when the store holds fewer
   * than `op.at` rows: the view missed data and must ask for everything again.
   * @param {{at: number, count: number, fields: string[], dtypes: string[], width: number,
   *   total: number, buffer: number}} op
   * @param {Array<DataView|ArrayBuffer|ArrayBufferView>} buffers  the message's buffers
   */
  apply(op, buffers) {
    if (op.at > this.length) return false;
    const sameSchema = op.fields.length === this.fields.length && op.fields.every((f, i) => f === this.fields[i]);
    if (!sameSchema) {
      if (op.at !== 0) return false; // a new schema always comes with every row
      this.fields = [...op.fields];
      this.dtypes = [...op.dtypes];
      this._cols = {};
      op.fields.forEach((name, i) => {
        const Ctor = DTYPES[/** @type {keyof typeof DTYPES} */ (op.dtypes[i])];
        if (!Ctor) throw new Error(`nnx-lab: unknown buffer dtype ${op.dtypes[i]}`);
        this._cols[name] = new Ctor(0);
      });
    }
    const need = op.at + op.count;
    op.fields.forEach((name, i) => {
      const values = toTypedArray(buffers[op.buffer + i], op.dtypes[i]);
      if (values.length !== op.count) {
        throw new Error(`nnx-lab: column ${name} carries ${values.length} rows, the op says ${op.count}`);
      }
      const col = grow(this._cols[name], need, op.at);
      col.set(values, op.at);
      this._cols[name] = col;
    });
    this.length = need;
    this.width = op.width;
    this.total = op.total;
    this._changedFrom = Math.min(this._changedFrom, op.at);
    return true;
  }

  /** The held rows of one column (a view, not a copy); an empty array if absent. */
  column(name) {
    const col = this._cols[name];
    return col ? col.subarray(0, this.length) : new Float32Array(0);
  }

  has(name) {
    return name in this._cols;
  }

  /** Value of a column at the last row, or null. */
  last(name) {
    return this.length && this.has(name) ? this._cols[name][this.length - 1] : null;
  }

  /** The lowest row changed since the previous call (this.length when none), and reset. */
  takeChangedFrom() {
    const from = Math.min(this._changedFrom, this.length);
    this._changedFrom = Infinity;
    return from;
  }
}
