// Following a run through the server: its log read page by page from a byte offset
// (a live run's panel then fetches only the new lines), its status checked now and
// then ("interrupted" when its writer died), and the TrainingMonitor's model interface
// on top, so the monitor's own view draws it (RunModel).
import { download } from "../shared/dom.js";
import { PROTOCOL_VERSION, REPORT, REPORT_DONE, SNAPSHOT, STOP, UPDATE } from "../shared/protocol.js";
import { RunState } from "./run_state.js";

const TERMINAL = new Set(["finished", "stopped", "failed", "interrupted"]);

const realClock = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (id) => clearTimeout(id),
  now: () => Date.now(),
};

/** Reads one run's log into a RunState and keeps reading while the run goes on. */
export class RunFollower {
  /**
   * @param {import("./api.js").RunsApi} api
   * @param {string} folder  the runs folder's key
   * @param {string} runId
   * @param {{state?: RunState, pollMs?: number, statusEveryMs?: number, pageBytes?: number,
   *   clock?: typeof realClock, onUpdate?: () => void, maxPoints?: number}} [opts]
   */
  constructor(api, folder, runId, opts = {}) {
    this.api = api;
    this.folder = folder;
    this.runId = runId;
    this.clock = opts.clock || realClock;
    this.state = opts.state || new RunState({ maxPoints: opts.maxPoints, now: () => this.clock.now() });
    this.state.traits.run_id = runId;
    this.pollMs = opts.pollMs ?? 1000;
    this.statusEveryMs = opts.statusEveryMs ?? 3000;
    this.pageBytes = opts.pageBytes;
    this.onUpdate = opts.onUpdate || (() => {});
    this.offset = 0;
    this.size = 0;
    this.inLine = false;
    this.badLines = 0;
    /** @type {{offset: number, reason: string}[]} the first damaged lines */
    this.damage = [];
    this.pages = 0;
    this.summary = null;
    /** the problem the follower ran into (the server out of reach, the run deleted) */
    this.problem = "";
    this.done = false;
    this._serverTime = null;
    this._serverAt = 0;
    this._lastStatusAt = -Infinity;
    this._disposed = false;
    this._timer = null;
    this._wake = null;
  }

  /** The server's clock now, in seconds (its last answer, moved on by our clock). */
  serverNow() {
    if (this._serverTime === null) return this.clock.now() / 1000;
    return this._serverTime + (this.clock.now() - this._serverAt) / 1000;
  }

  _sawServer(t) {
    if (typeof t === "number") {
      this._serverTime = t;
      this._serverAt = this.clock.now();
    }
  }

  start() {
    if (!this._running) {
      this._running = true;
      this._loop();
    }
    return this;
  }

  _sleep(ms) {
    return new Promise((resolve) => {
      this._wake = resolve;
      this._timer = this.clock.setTimeout(() => {
        this._timer = null;
        this._wake = null;
        resolve();
      }, ms);
    });
  }

  /** Read now instead of at the next poll (after a Stop, say). */
  poke() {
    if (this._timer !== null) this.clock.clearTimeout(this._timer);
    this._timer = null;
    const wake = this._wake;
    this._wake = null;
    if (wake) wake();
  }

  async _status() {
    this._lastStatusAt = this.clock.now();
    const s = await this.api.run(this.folder, this.runId);
    this.summary = s;
    this._sawServer(s.server_time);
    return s;
  }

  /** One page of the log; true when more complete lines wait. */
  async _page() {
    const page = await this.api.log(this.folder, this.runId, this.offset, { maxBytes: this.pageBytes, inLine: this.inLine });
    this._sawServer(page.server_time);
    this.pages += 1;
    if (page.reset) {
      // the log shrank: it was replaced (a rerun); start again from its beginning
      this.state.reset(this.runId);
      this.offset = 0;
      this.inLine = false;
      this.badLines = 0;
      this.damage = [];
      return page.more;
    }
    this.state.apply(page.events || []);
    this.offset = page.next_offset;
    this.size = page.size;
    this.inLine = Boolean(page.in_line);
    this.badLines += page.bad_lines || 0;
    for (const d of page.damage || []) if (this.damage.length < 20) this.damage.push(d);
    return Boolean(page.more);
  }

  async _loop() {
    let backoff = this.pollMs;
    try {
      await this._status();
    } catch (err) {
      if (this._fatal(err)) return;
    }
    while (!this._disposed) {
      try {
        const more = await this._page();
        this.problem = "";
        backoff = this.pollMs;
        this.state.tick(this.serverNow(), !more);
        this.onUpdate();
        if (more) {
          await this._sleep(0); // let the page draw between pages of a long log
          continue;
        }
        if (this.state.finished) break;
        if (this.clock.now() - this._lastStatusAt >= this.statusEveryMs) {
          const s = await this._status();
          const st = s && s.run ? s.run.status : null;
          if (st && TERMINAL.has(st)) {
            // a run with no last line (killed, or its last line is still coming): one
            // more read takes that line if it is there, else the recorded status stands
            const again = await this._page();
            if (!this.state.finished && !again) {
              this.state.traits.status = st;
              if (st === "interrupted") this.state.traits.stop_reason = "its writer ended without a word (killed, crashed)";
            }
            this.state.tick(this.serverNow(), !again);
            this.onUpdate();
            if (!again) break;
            continue;
          }
        }
        await this._sleep(this.pollMs);
      } catch (err) {
        if (this._fatal(err)) return;
        this.onUpdate();
        await this._sleep(backoff);
        backoff = Math.min(30_000, backoff * 2);
      }
    }
    this.done = true;
    this.onUpdate();
  }

  /** Note a failed request; true when following must end (the run is gone). */
  _fatal(err) {
    const status = err && err.status;
    const text = err && err.message ? err.message : String(err);
    if (status === 404 || status === 403 || status === 400) {
      this.problem = text;
      this.done = true;
      if (!TERMINAL.has(this.state.traits.status)) this.state.traits.status = "failed";
      this.onUpdate();
      return true;
    }
    this.problem = `the server did not answer (${text}); trying again`;
    return false;
  }

  dispose() {
    this._disposed = true;
    this.poke();
  }
}

/**
 * The TrainingMonitor's model interface (what js/monitor/view.js reads) for a run
 * followed through the server: traits from the RunState, the series sent to the view
 * as the kernel sends them (a snapshot on hello, numbered updates after).
 */
export class RunModel {
  /**
   * @param {RunFollower} follower
   * @param {{throttleMs?: number, clock?: typeof realClock, save?: (name: string, blob: Blob) => void}} [opts]
   *   `save`: how the Report button's page is saved (a download)
   */
  constructor(follower, opts = {}) {
    this.follower = follower;
    this.clock = opts.clock || realClock;
    this.throttleMs = opts.throttleMs ?? 100;
    this.save = opts.save || download;
    /** @type {Record<string, any>} */
    this.values = {
      ...follower.state.traits,
      can_stop: false,
      from_log: false,
      smoothing: 0.9,
      snapshot_of: "",
      runs_root: "",
    };
    /** @type {Map<string, Set<Function>>} */
    this._handlers = new Map();
    this.seq = 0;
    this._stopping = false;
    this._stopError = "";
    this._timer = null;
    this._last = -Infinity;
    follower.onUpdate = () => this._schedule();
  }

  // ------------------------------------------------------------- the model interface

  get(name) {
    return this.values[name];
  }

  set(name, value) {
    if (this.values[name] === value) return;
    this.values[name] = value;
    this._emit(`change:${name}`, value);
  }

  on(event, cb) {
    if (!this._handlers.has(event)) this._handlers.set(event, new Set());
    this._handlers.get(event).add(cb);
  }

  off(event, cb) {
    if (!this._handlers.has(event)) return;
    if (cb) this._handlers.get(event).delete(cb);
    else this._handlers.delete(event);
  }

  save_changes() {}

  send(content) {
    if (!content || typeof content !== "object") return;
    if (content.kind === "hello") {
      const { view, req } = content;
      Promise.resolve().then(() => this._snapshot(view, req));
    } else if (content.kind === STOP) {
      this.stop();
    } else if (content.kind === REPORT) {
      this.report(content.view);
    }
    // snapshot_png: the panel keeps no notebook output to put a picture in
  }

  _emit(event, ...args) {
    for (const cb of [...(this._handlers.get(event) || [])]) cb(...args);
  }

  // ------------------------------------------------------------- series

  _snapshot(view, req) {
    const ops = [];
    const buffers = [];
    for (const [name, series] of this._series()) {
      const o = series.op(name, 0, series.length, buffers.length);
      ops.push(o.op);
      buffers.push(...o.buffers);
    }
    this._emit("msg:custom", { kind: SNAPSHOT, version: PROTOCOL_VERSION, seq: this.seq, to: view, req, part: 0, parts: 1, ops }, buffers);
  }

  _series() {
    return [
      ["steps", this.follower.state.steps],
      ["epochs", this.follower.state.epochs],
    ];
  }

  _schedule() {
    if (this._timer !== null) return;
    const wait = Math.max(0, this._last + this.throttleMs - this.clock.now());
    this._timer = this.clock.setTimeout(() => {
      this._timer = null;
      this.flush();
    }, wait);
  }

  /** Send what changed: the series' new rows, then the traits. */
  flush() {
    this._last = this.clock.now();
    const ops = [];
    const buffers = [];
    for (const [name, series] of this._series()) {
      const change = series.takeChange();
      if (!change) continue;
      const o = series.op(name, change.at, change.count, buffers.length);
      ops.push(o.op);
      buffers.push(...o.buffers);
    }
    if (ops.length) {
      this.seq += 1;
      this._emit("msg:custom", { kind: UPDATE, version: PROTOCOL_VERSION, seq: this.seq, ops }, buffers);
    }
    const f = this.follower;
    const traits = { ...f.state.traits };
    if (this._stopping && traits.status === "running") traits.status = "stopping";
    if (!TERMINAL.has(traits.status) && traits.status !== "running" && traits.status !== "stopping") traits.status = traits.status || "created";
    const errors = [traits.error, f.problem, this._stopError].filter(Boolean);
    traits.error = errors.join("\n\n");
    traits.can_stop = traits.status === "running" && !f.done;
    for (const [name, value] of Object.entries(traits)) this.set(name, value);
  }

  // ------------------------------------------------------------- stop

  async stop() {
    if (this._stopping) return;
    this._stopping = true;
    this._stopError = "";
    this.flush();
    try {
      await this.follower.api.stop(this.follower.folder, this.follower.runId);
    } catch (err) {
      this._stopping = false;
      this._stopError = `Stop was refused: ${err && err.message ? err.message : err}`;
    }
    this.follower.poke();
    this.flush();
  }

  // ------------------------------------------------------------- report

  /** The Report button: the server sends the run's HTML report, the browser saves it;
   * the view that asked is answered as the kernel answers it. */
  async report(view) {
    let reply;
    try {
      const r = await this.follower.api.report(this.follower.folder, this.follower.runId);
      this.save(r.filename, new Blob([r.html], { type: "text/html" }));
      reply = { kind: REPORT_DONE, to: view, path: r.filename, download: true };
    } catch (err) {
      reply = { kind: REPORT_DONE, to: view, error: String(err && err.message ? err.message : err) };
    }
    this._emit("msg:custom", reply, []);
  }

  dispose() {
    if (this._timer !== null) this.clock.clearTimeout(this._timer);
    this._timer = null;
    this.follower.dispose();
    this._handlers.clear();
  }
}
