// A bounded, decimated column series built in the browser, sent to views as the
// kernel's series are: the same ops (keep the first `at` rows, append these), the same
// merge rules as nnx_lab/widgets/_series.py. The JupyterLab runs panel reads a run's
// log through the server and builds its series here, so its views (the monitor's own
// view, store and transport) cannot tell them from a kernel's.
//
// At most `capacity` rows; each row is a bucket of `width` raw points (1 until the
// series first fills up, then neighbouring buckets merge in pairs and `width` doubles).
// A value column keeps the mean of its finite values and their minimum and maximum
// (`v`, `v:min`, `v:max`), so a spike survives any merging; non-finite values never
// enter them, and the `bad` column counts the points whose first value was not finite.

export const Reduce = Object.freeze({
  FIRST: "first", // the first step of a bucket
  LAST: "last", // the last step, the learning rate in use at the end
  SUM: "sum", // counts
  MAX: "max", // flags (became BEST in any of the merged epochs)
  MEAN: "mean", // a value: mean of the finite values, with :min and :max columns
});

const WIRE = { int32: Int32Array, float32: Float32Array };

// A value column's :min / :max partners, filled by their value column's own merge. Their
// tags differ from every Reduce: a partner tagged "max" was once taken for Reduce.MAX,
// and the flag column (became BEST) was skipped with the partners, so it stayed 0.
const LOW = "partner:min";
const HIGH = "partner:max";
const partner = (spec) => spec.reduce === LOW || spec.reduce === HIGH;

/**
 * @typedef {{name: string, dtype: "int32"|"float32", reduce: string}} ColumnSpec
 * @typedef {{at: number, count: number}} Change
 */

export class BucketSeries {
  /**
   * @param {ColumnSpec[]} columns
   * @param {{capacity: number, weight?: string, bad?: string|null}} opts
   */
  constructor(columns, { capacity, weight = "n", bad = null }) {
    if (!(capacity >= 4) || capacity % 2) throw new Error(`capacity=${capacity}: pass an even number of rows >= 4`);
    this.capacity = capacity;
    this.weight = weight;
    this.bad = bad;
    /** @type {ColumnSpec[]} */
    this.specs = [];
    /** @type {Record<string, Float64Array>} */
    this.data = {};
    /** finite values per bucket of each MEAN column (its mean's weight) */
    this._count = {};
    this.width = 1;
    this.length = 0;
    this.total = 0;
    this._dirtyFrom = 0;
    this._synced = 0;
    for (const spec of columns) this._addColumn(spec);
    this._badOf = (this.specs.find((s) => s.reduce === Reduce.MEAN) || {}).name || null;
    if (!(weight in this.data)) throw new Error(`weight column ${weight} is not among the columns`);
  }

  _addColumn(spec) {
    const parts = [spec];
    if (spec.reduce === Reduce.MEAN) {
      parts.push({ name: `${spec.name}:min`, dtype: spec.dtype, reduce: LOW }, { name: `${spec.name}:max`, dtype: spec.dtype, reduce: HIGH });
      this._count[spec.name] = new Float64Array(this.capacity);
    }
    for (const p of parts) {
      if (p.name in this.data) throw new Error(`column ${p.name} exists already`);
      this.data[p.name] = new Float64Array(this.capacity).fill(p.dtype === "float32" ? NaN : 0);
      this.specs.push(p);
    }
  }

  /** A new value column (a metric first seen after the first rows): every row is resent. */
  addValue(name, reduce = Reduce.MEAN) {
    this._addColumn({ name, dtype: "float32", reduce });
    this._dirtyFrom = 0;
  }

  has(name) {
    return name in this.data;
  }

  get fields() {
    return this.specs.map((s) => s.name);
  }

  get dtypes() {
    return this.specs.map((s) => s.dtype);
  }

  /** Names of the value columns, without their :min / :max partners. */
  get values() {
    return this.specs.filter((s) => s.reduce === Reduce.MEAN).map((s) => s.name);
  }

  /** The held rows of one column (a view). */
  column(name) {
    return this.data[name].subarray(0, this.length);
  }

  /**
   * Add raw points: `columns` maps names to equal-length arrays (missing: NaN / 0).
   * A value column takes its raw values; the weight and bad columns are derived.
   * @param {Record<string, ArrayLike<number>>} columns
   */
  extend(columns) {
    const names = Object.keys(columns);
    const k = names.length ? columns[names[0]].length : 0;
    for (let i = 0; i < k; i++) {
      if (this.length && this.data[this.weight][this.length - 1] < this.width) {
        this._mergePoint(this.length - 1, columns, i);
        continue;
      }
      if (this.length === this.capacity) this._compact();
      if (this.length && this.data[this.weight][this.length - 1] < this.width) {
        this._mergePoint(this.length - 1, columns, i);
        continue;
      }
      this._newRow(this.length, columns, i);
      this.length += 1;
    }
    this.total += k;
  }

  _raw(columns, name, i, spec) {
    const col = columns[name];
    const v = col === undefined ? (spec.dtype === "float32" ? NaN : 0) : Number(col[i]);
    return v;
  }

  _newRow(r, columns, i) {
    for (const spec of this.specs) {
      const name = spec.name;
      if (partner(spec)) continue;
      if (name === this.weight) {
        this.data[name][r] = 1;
        continue;
      }
      if (name === this.bad) continue;
      const v = this._raw(columns, name, i, spec);
      if (spec.reduce === Reduce.MEAN) {
        const finite = Number.isFinite(v);
        this.data[name][r] = finite ? v : NaN;
        this.data[`${name}:min`][r] = finite ? v : NaN;
        this.data[`${name}:max`][r] = finite ? v : NaN;
        this._count[name][r] = finite ? 1 : 0;
      } else {
        this.data[name][r] = v;
      }
    }
    if (this.bad) {
      const first = this._badOf === null ? 0 : this._raw(columns, this._badOf, i, { dtype: "float32" });
      this.data[this.bad][r] = this._badOf !== null && !Number.isFinite(first) ? 1 : 0;
    }
    this._dirtyFrom = Math.min(this._dirtyFrom, r);
  }

  /** Merge the raw point `i` of `columns` into row `r`. */
  _mergePoint(r, columns, i) {
    for (const spec of this.specs) {
      const name = spec.name;
      if (partner(spec)) continue;
      const d = this.data[name];
      if (name === this.weight) {
        d[r] += 1;
        continue;
      }
      if (name === this.bad) continue;
      const v = this._raw(columns, name, i, spec);
      this._combine(spec, r, v, Number.isFinite(v) ? 1 : 0, v, v);
    }
    if (this.bad && this._badOf !== null) {
      const first = this._raw(columns, this._badOf, i, { dtype: "float32" });
      if (!Number.isFinite(first)) this.data[this.bad][r] += 1;
    }
    this._dirtyFrom = Math.min(this._dirtyFrom, r);
  }

  /** Fold a value (a mean `v` of `n` finite values, within [lo, hi]) into row r. */
  _combine(spec, r, v, n, lo, hi) {
    const name = spec.name;
    const d = this.data[name];
    switch (spec.reduce) {
      case Reduce.FIRST:
        break;
      case Reduce.LAST:
        d[r] = v;
        break;
      case Reduce.SUM:
        d[r] += v;
        break;
      case Reduce.MAX:
        d[r] = Math.max(d[r], v);
        break;
      default: {
        if (!(n > 0) || !Number.isFinite(v)) break;
        const c = this._count[name];
        const m = c[r] > 0 ? (d[r] * c[r] + v * n) / (c[r] + n) : v;
        d[r] = m;
        c[r] += n;
        const mn = this.data[`${name}:min`];
        const mx = this.data[`${name}:max`];
        mn[r] = Number.isFinite(mn[r]) ? Math.min(mn[r], lo) : lo;
        mx[r] = Number.isFinite(mx[r]) ? Math.max(mx[r], hi) : hi;
      }
    }
  }

  /** Merge neighbouring rows in pairs: half the rows, twice the width. */
  _compact() {
    const n = this.length - (this.length % 2);
    for (let j = 0; j < n; j += 2) {
      const dst = j / 2;
      for (const spec of this.specs) {
        const name = spec.name;
        if (partner(spec)) continue;
        const d = this.data[name];
        const a = d[j];
        const b = d[j + 1];
        if (spec.reduce === Reduce.MEAN) {
          const c = this._count[name];
          const mn = this.data[`${name}:min`];
          const mx = this.data[`${name}:max`];
          const ca = c[j];
          const cb = c[j + 1];
          const lo = Math.min(Number.isFinite(mn[j]) ? mn[j] : Infinity, Number.isFinite(mn[j + 1]) ? mn[j + 1] : Infinity);
          const hi = Math.max(Number.isFinite(mx[j]) ? mx[j] : -Infinity, Number.isFinite(mx[j + 1]) ? mx[j + 1] : -Infinity);
          d[dst] = ca + cb > 0 ? ((ca ? a * ca : 0) + (cb ? b * cb : 0)) / (ca + cb) : NaN;
          c[dst] = ca + cb;
          mn[dst] = Number.isFinite(lo) ? lo : NaN;
          mx[dst] = Number.isFinite(hi) ? hi : NaN;
        } else if (spec.reduce === Reduce.FIRST) d[dst] = a;
        else if (spec.reduce === Reduce.LAST) d[dst] = b;
        else if (spec.reduce === Reduce.SUM) d[dst] = a + b;
        else d[dst] = Math.max(a, b);
      }
    }
    const half = n / 2;
    if (this.length % 2) {
      // an odd last bucket moves down as it is
      for (const name of Object.keys(this.data)) this.data[name][half] = this.data[name][n];
      for (const name of Object.keys(this._count)) this._count[name][half] = this._count[name][n];
    }
    this.length = half + (this.length % 2);
    for (const spec of this.specs) this.data[spec.name].fill(spec.dtype === "float32" ? NaN : 0, this.length);
    for (const c of Object.values(this._count)) c.fill(0, this.length);
    this.width *= 2;
    this._dirtyFrom = 0;
  }

  /** What changed since the last call, as one splice; null when nothing did. @returns {Change|null} */
  takeChange() {
    if (this._dirtyFrom >= this.length && this._synced === this.length) return null;
    const at = Math.min(this._dirtyFrom, this.length, this._synced);
    this._dirtyFrom = this.length;
    this._synced = this.length;
    return { at, count: this.length - at };
  }

  /**
   * One wire op of rows [at, at + count) for the series `name`, with its buffers
   * (one per field, in the wire dtypes), to be placed from `bufferIndex` on.
   */
  op(name, at, count, bufferIndex) {
    const buffers = this.specs.map((spec) => {
      const Ctor = WIRE[spec.dtype];
      return Ctor.from(this.data[spec.name].subarray(at, at + count));
    });
    return {
      op: { series: name, at, count, fields: this.fields, dtypes: this.dtypes, width: this.width, total: this.total, buffer: bufferIndex },
      buffers,
    };
  }

  clear() {
    for (const spec of this.specs) this.data[spec.name].fill(spec.dtype === "float32" ? NaN : 0);
    for (const c of Object.values(this._count)) c.fill(0);
    this.length = 0;
    this.total = 0;
    this.width = 1;
    this._dirtyFrom = 0; // _synced stays: the next change removes what the views hold
  }
}
