// A run as the runs panel knows it from its log: the TrainingMonitor's counters (the
// traits its view reads) and its two series, built from the log's events as the
// kernel-side monitor builds them (nnx_lab/widgets/_monitor.py).
import { BucketSeries, Reduce } from "../shared/buckets.js";

const NOT_METRICS = new Set(["samples"]);
const TERMINAL = new Set(["stopped", "finished", "failed"]);
// Rates are measured over at least this much of the writer's clock (the log's times).
const RATE_WINDOW_S = 10;

/** A log value as a number: the server sends non-finite floats as text. */
export function num(v) {
  if (typeof v === "number") return v;
  if (v === "NaN") return NaN;
  if (v === "Infinity") return Infinity;
  if (v === "-Infinity") return -Infinity;
  return NaN;
}

function finiteOrNull(v) {
  return Number.isFinite(v) ? v : null;
}

export function stepSeries(capacity) {
  return new BucketSeries(
    [
      { name: "first", dtype: "int32", reduce: Reduce.FIRST },
      { name: "step", dtype: "int32", reduce: Reduce.LAST },
      { name: "loss", dtype: "float32", reduce: Reduce.MEAN },
      { name: "lr", dtype: "float32", reduce: Reduce.LAST },
      { name: "n", dtype: "int32", reduce: Reduce.SUM },
      { name: "bad", dtype: "int32", reduce: Reduce.SUM },
    ],
    { capacity, bad: "bad" },
  );
}

export function epochSeries(capacity) {
  return new BucketSeries(
    [
      { name: "first", dtype: "int32", reduce: Reduce.FIRST },
      { name: "epoch", dtype: "int32", reduce: Reduce.LAST },
      { name: "step", dtype: "int32", reduce: Reduce.LAST },
      { name: "lr", dtype: "float32", reduce: Reduce.LAST },
      { name: "seconds", dtype: "float32", reduce: Reduce.MEAN },
      { name: "improved", dtype: "int32", reduce: Reduce.MAX },
      { name: "n", dtype: "int32", reduce: Reduce.SUM },
    ],
    { capacity },
  );
}

/** The traits a run shows before anything is known of it. */
export function emptyTraits(runId = "") {
  return {
    run_id: runId,
    status: "created",
    stop_reason: "",
    error: "",
    epoch: 0,
    n_epochs: 0,
    step: 0,
    total_steps: null,
    samples: 0,
    samples_per_sec: null,
    elapsed: 0,
    eta: null,
    last_loss: null,
    last_finite_loss: null,
    last_finite_step: null,
    loss_nonfinite_since: null,
    loss_nonfinite_steps: 0,
  };
}

export class RunState {
  /**
   * @param {{maxPoints?: number, maxEpochs?: number, now?: () => number}} [opts]  `now`:
   *   the browser's clock (ms), which no counter reads: rates and the ETA are measured
   *   on the log's clock (the tests move `now` to show it)
   */
  constructor({ maxPoints = 20_000, maxEpochs = 5_000, now = () => Date.now() } = {}) {
    this.maxPoints = maxPoints + (maxPoints % 2);
    this.maxEpochs = maxEpochs + (maxEpochs % 2);
    this.now = now;
    this.steps = stepSeries(this.maxPoints);
    this.epochs = epochSeries(this.maxEpochs);
    this.reset("");
  }

  reset(runId = this.traits ? this.traits.run_id : "") {
    this.steps.clear();
    this.epochs.clear();
    this.traits = emptyTraits(runId);
    this.finished = false;
    this.config = null;
    this._startStep = 0;
    this._stepsPerEpoch = null;
    this._nEpochsRun = 0;
    this._startedAt = null; // seconds (the writer's clock)
    this._finishedAt = null;
    this._samples = 0;
    this._lastLoss = null;
    this._lastFinite = null;
    this._nonfiniteSince = null;
    this._nonfiniteSteps = 0;
    this._epochSeconds = 0;
    // [writer's clock s, step, samples]: the run's start, each epoch's end (its start
    // plus the epochs' seconds), and the server's clock at ticks that found the log read
    // to its end. Never our own clock while the log is replayed: a replay reads minutes
    // of steps in milliseconds, and a rate over it was wildly high (91,190 samples/s).
    this._clock = [];
    // the same points kept whole, [step, s], for the compare panel's time axes, and
    // [step, epoch] at each epoch's end; `_live` is the latest [step, s] of a live run
    this._times = [];
    this._epochEnds = [];
    this._live = null;
    this._startEpoch = 1;
  }

  /** Apply events from the log (objects as the server sends them). */
  apply(events) {
    for (const ev of events) {
      switch (ev.event) {
        case "run_started":
          this._runStarted(ev);
          break;
        case "step":
          this._records([ev]);
          break;
        case "step_metrics":
          this._records(Array.isArray(ev.records) ? ev.records : []);
          break;
        case "epoch_ended":
          this._epochEnded(ev);
          break;
        case "run_finished":
          this._runFinished(ev);
          break;
        default:
          break; // checkpoint_written and what a newer engine adds
      }
    }
  }

  _runStarted(ev) {
    this.reset(typeof ev.run_id === "string" ? ev.run_id : this.traits.run_id);
    this.config = ev.config && typeof ev.config === "object" ? ev.config : null;
    this._startStep = Number(ev.start_step) || 0;
    this._stepsPerEpoch = Number.isFinite(ev.steps_per_epoch) ? ev.steps_per_epoch : null;
    this._startedAt = Number.isFinite(ev.time) ? ev.time : null;
    if (this._startedAt !== null) this._clock.push([this._startedAt, this._startStep, 0]);
    if (this._startedAt !== null) this._times.push([this._startStep, this._startedAt]);
    const startEpoch = Number(ev.start_epoch) || 1;
    this._startEpoch = startEpoch;
    this._nEpochsRun = Number(ev.n_epochs) || 0;
    const t = this.traits;
    t.status = "running";
    t.step = this._startStep;
    t.epoch = startEpoch;
    t.n_epochs = startEpoch + this._nEpochsRun - 1;
    t.total_steps = this._expectedTotal();
  }

  _expectedTotal() {
    return this._stepsPerEpoch === null ? null : this._startStep + this._stepsPerEpoch * this._nEpochsRun;
  }

  _records(records) {
    if (!records.length) return;
    const steps = [];
    const losses = [];
    const lrs = [];
    for (const r of records) {
      const step = Number(r.step);
      if (!Number.isFinite(step)) continue;
      const loss = r.loss === null || r.loss === undefined ? NaN : num(r.loss);
      steps.push(step);
      losses.push(loss);
      lrs.push(r.lr === null || r.lr === undefined ? NaN : num(r.lr));
      if (Number.isFinite(loss)) {
        this._lastFinite = [step, loss];
        this._nonfiniteSince = null;
      } else {
        if (this._nonfiniteSince === null) this._nonfiniteSince = step;
        this._nonfiniteSteps += 1;
      }
      this._samples += Number(r.samples) || 0;
      if (step > this.traits.step) {
        this.traits.step = step;
        this.traits.epoch = Number(r.epoch) || this.traits.epoch;
      }
    }
    if (!steps.length) return;
    this._lastLoss = losses[losses.length - 1];
    this.steps.extend({ first: steps, step: steps, loss: losses, lr: lrs, ...this._namedColumns(records) });
  }

  /** A composite loss's parts as step columns, as the kernel names them (term.<name>,
   * aux.<name>: means; lr.<name>: the last), NaN where a record lacks one. */
  _namedColumns(records) {
    const kept = records.filter((r) => Number.isFinite(Number(r.step)));
    const out = {};
    for (const [field, prefix, reduce] of [["terms", "term.", Reduce.MEAN], ["aux", "aux.", Reduce.MEAN], ["lrs", "lr.", Reduce.LAST]]) {
      kept.forEach((r, i) => {
        const parts = r[field];
        if (!parts || typeof parts !== "object") return;
        for (const [name, value] of Object.entries(parts)) {
          const key = prefix + name;
          if (!out[key]) {
            if (!this.steps.has(key)) this.steps.addValue(key, reduce);
            out[key] = new Array(kept.length).fill(NaN);
          }
          out[key][i] = value === null || value === undefined ? NaN : num(value);
        }
      });
    }
    return out;
  }

  _epochEnded(ev) {
    const row = {
      first: [Number(ev.epoch)],
      epoch: [Number(ev.epoch)],
      step: [Number(ev.step)],
      lr: [num(ev.lr)],
      seconds: [num(ev.seconds)],
      improved: [ev.improved ? 1 : 0],
    };
    for (const [part, values] of [["train", ev.train], ["val", ev.val]]) {
      if (!values || typeof values !== "object") continue;
      for (const [name, value] of Object.entries(values)) {
        if (NOT_METRICS.has(name) || name === "extra") continue;
        // registry metrics, a network's aux terms and an objective's terms are flat
        // columns, as the kernel's monitor has them (a term named like a field: term.<name>)
        const flat = value && typeof value === "object" && ["metrics", "aux", "terms"].includes(name);
        const entries = flat ? Object.entries(value).map(([k, v]) => [name === "terms" && k in values ? `term.${k}` : k, v]) : [[name, value]];
        for (const [metric, v] of entries) {
          const key = `${part}.${metric}`;
          if (!this.epochs.has(key)) this.epochs.addValue(key);
          row[key] = [v === null ? NaN : num(v)];
        }
      }
    }
    this.epochs.extend(row);
    const secs = num(ev.seconds);
    if (this._startedAt !== null && Number.isFinite(secs) && secs >= 0) {
      this._epochSeconds += secs;
      this._mark(this._startedAt + this._epochSeconds, Number(ev.step) || 0);
      this._time(Number(ev.step) || 0, this._startedAt + this._epochSeconds);
    }
    const last = this._epochEnds[this._epochEnds.length - 1];
    if (Number.isFinite(Number(ev.step)) && (!last || Number(ev.step) >= last[0])) this._epochEnds.push([Number(ev.step), Number(ev.epoch)]);
    const t = this.traits;
    t.step = Math.max(t.step, Number(ev.step) || 0);
    t.epoch = Math.max(t.epoch, Number(ev.epoch) || 0);
    if (this._stepsPerEpoch === null && this.epochs.length === 1) {
      this._stepsPerEpoch = (Number(ev.step) || 0) - this._startStep;
      t.total_steps = this._expectedTotal();
    }
  }

  _runFinished(ev) {
    this.finished = true;
    this._finishedAt = Number.isFinite(ev.time) ? ev.time : null;
    const t = this.traits;
    t.step = Math.max(t.step, Number(ev.steps) || 0);
    if (this._finishedAt !== null) this._time(t.step, this._finishedAt);
    t.status = TERMINAL.has(ev.status) ? ev.status : "finished";
    t.stop_reason = typeof ev.stop_reason === "string" ? ev.stop_reason : "";
    if (ev.status === "failed") {
      let text = typeof ev.error === "string" && ev.error ? ev.error : "training failed";
      if (typeof ev.traceback === "string" && ev.traceback) text += `\n\n${ev.traceback.trimEnd()}`;
      t.error = text;
    }
  }

  /** A point of the run's timeline, kept whole (forward only, as _mark). */
  _time(step, at) {
    const last = this._times[this._times.length - 1];
    if (last && (at < last[1] || step < last[0])) return;
    this._times.push([step, at]);
  }

  /**
   * Where the run's steps fall, for the compare panel's axes (compare_axes.js): its
   * first step and epoch, its latest and planned steps, and its timeline.
   * @returns {import("./compare_axes.js").AxisInfo}
   */
  axisInfo() {
    const times = [...this._times];
    const last = times[times.length - 1];
    if (!this.finished && this._live && (!last || (this._live[0] >= last[0] && this._live[1] >= last[1]))) times.push(this._live);
    return {
      startStep: this._startStep,
      startEpoch: this._startEpoch,
      lastStep: this.traits.step,
      totalSteps: this.finished ? this.traits.step : this.traits.total_steps, // a run ended early is whole
      startedAt: this._startedAt,
      times,
      epochs: [...this._epochEnds],
    };
  }

  /** A point of the writer's clock: at time `at` (s) the run had done `step`. */
  _mark(at, step) {
    const last = this._clock[this._clock.length - 1];
    if (last && (at < last[0] || step < last[1])) return; // the clock runs forward only
    this._clock.push([at, step, this._samples]);
  }

  /**
   * Refresh the counters (elapsed, rates, ETA, the loss) as of now.
   * @param {number} serverNow  the server's clock, in seconds (the writer's machine, usually)
   * @param {boolean} [caughtUp]  the log was read to its end: its last step is about now
   */
  tick(serverNow, caughtUp = true) {
    const t = this.traits;
    if (this._startedAt !== null) {
      const end = this._finishedAt ?? (this.finished ? this._startedAt : serverNow);
      t.elapsed = Math.max(0, end - this._startedAt);
    }
    t.samples = this._samples;
    const live = !this.finished && t.status === "running";
    if (live && caughtUp && Number.isFinite(serverNow)) {
      this._mark(serverNow, t.step);
      this._live = [t.step, serverNow];
    }
    let sps = null;
    let stepsPs = null;
    if (live) [sps, stepsPs] = this._liveRate();
    else if (t.elapsed > 0 && this._samples > 0) {
      sps = this._samples / t.elapsed;
      stepsPs = (t.step - this._startStep) / t.elapsed;
    }
    t.samples_per_sec = sps === null ? null : Math.round(sps * 1000) / 1000;
    t.eta = !this.finished && t.total_steps !== null && stepsPs ? Math.max(0, (t.total_steps - t.step) / stepsPs) : null;
    t.last_loss = finiteOrNull(this._lastLoss);
    if (this._lastFinite) {
      t.last_finite_step = this._lastFinite[0];
      t.last_finite_loss = this._lastFinite[1];
    }
    t.loss_nonfinite_since = this._nonfiniteSince;
    t.loss_nonfinite_steps = this._nonfiniteSteps;
  }

  /** [samples/s, steps/s] over the last RATE_WINDOW_S of the writer's clock (or all of
   * it, while the run is younger), or [null, null] before two points are known. */
  _liveRate() {
    const pts = this._clock;
    if (pts.length < 2) return [null, null];
    const now = pts[pts.length - 1][0];
    while (pts.length > 2 && pts[1][0] <= now - RATE_WINDOW_S) pts.shift();
    const [t0, step0, samples0] = pts[0];
    const [t1, step1, samples1] = pts[pts.length - 1];
    const dt = t1 - t0;
    if (!(dt >= 0.5) || step1 <= step0) return [null, null];
    return [(samples1 - samples0) / dt, (step1 - step0) / dt];
  }
}
