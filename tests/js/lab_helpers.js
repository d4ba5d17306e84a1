// Test doubles for the JupyterLab extension's modules: a run's log as the engine
// writes it, and a fake of nnx_lab.server's API over it.

/** The log lines of a run: run_started, `steps` step lines, an epoch_ended per epoch. */
export function runLog({ runId = "a".repeat(32), steps = 20, perEpoch = 10, loss = (s) => 1 / s, finished = "finished", time = 1000 } = {}) {
  const lines = [
    { event: "run_started", run_id: runId, run_dir: `/r/${runId}`, n_epochs: Math.ceil(steps / perEpoch), start_epoch: 1, start_step: 0, steps_per_epoch: perEpoch, config: { train: { seed: 1 } }, parent_run_id: null, time },
  ];
  for (let s = 1; s <= steps; s++) {
    const epoch = Math.ceil(s / perEpoch);
    const l = loss(s);
    lines.push({ event: "step", step: s, epoch, batch: (s - 1) % perEpoch, lr: 0.01, samples: 32, loss: Number.isFinite(l) ? l : "NaN" });
    if (s % perEpoch === 0) {
      lines.push({
        event: "epoch_ended", epoch, step: s, lr: 0.01,
        train: { loss: 2 / epoch, samples: 320, accuracy: 0.5 },
        val: { loss: 1 / epoch, error: 0.5 / epoch, samples: 64 },
        signal: 0.5 / epoch, signal_source: "val_edp.error", improved: true, seconds: 1.5,
      });
    }
  }
  if (finished) {
    lines.push({ event: "run_finished", run_id: runId, status: finished, epochs_completed: Math.ceil(steps / perEpoch), steps, error: finished === "failed" ? "ValueError: boom" : null, traceback: null, stop_reason: finished === "stopped" ? "stop requested" : null, time: time + 12 });
  }
  return lines;
}

/** A fake RunsApi over a growing log text (the server's paging rules, in small). */
export function fakeApi({ lines = [], status = "running", pageBytes = 1 << 20 } = {}) {
  const api = {
    text: lines.map((l) => `${JSON.stringify(l)}\n`).join(""),
    status,
    calls: [],
    stops: [],
    stopError: null,
    compareReport: { runs: [], rows: [], unchanged: 0, limits: [] },
    listing: { server_time: 1000, folders: [], runs: [], notes: [] },
    serverTime: 1000,
    append(objs, raw = "") {
      api.text += objs.map((l) => `${JSON.stringify(l)}\n`).join("") + raw;
    },
    async listRuns(opts) {
      api.calls.push(["list", opts]);
      return api.listing;
    },
    name: null,
    renameError: null,
    async run(folder, runId) {
      api.calls.push(["run", folder, runId]);
      return { server_time: api.serverTime, run: { run_id: runId, status: api.status, name: api.name }, folder: { key: folder, label: "runs" }, problems: [] };
    },
    async rename(folder, runId, name) {
      api.calls.push(["rename", folder, runId, name]);
      if (api.renameError) throw api.renameError;
      api.name = name.trim() || null;
      return { run_id: runId, folder, name: api.name };
    },
    async log(folder, runId, offset, { maxBytes, inLine } = {}) {
      api.calls.push(["log", offset, inLine]);
      const bytes = new TextEncoder().encode(api.text);
      const size = bytes.length;
      const page = Math.min(pageBytes, maxBytes || pageBytes);
      if (offset > size) return { server_time: api.serverTime, offset, size, next_offset: 0, events: [], bad_lines: 0, damage: [], reset: true, in_line: false, more: size > 0 };
      const chunk = bytes.slice(offset, offset + page);
      const more = offset + chunk.length < size;
      const end = chunk.lastIndexOf(10) + 1;
      const events = [];
      let bad = 0;
      for (const raw of new TextDecoder().decode(chunk.slice(0, end)).split("\n").slice(0, -1)) {
        try {
          events.push(JSON.parse(raw));
        } catch {
          bad += 1;
        }
      }
      return { server_time: api.serverTime, offset, size, next_offset: offset + end, events, bad_lines: bad, damage: bad ? [{ offset, reason: "not JSON" }] : [], reset: false, in_line: false, more, pending_bytes: more ? 0 : chunk.length - end };
    },
    async stop(folder, runId) {
      api.calls.push(["stop", folder, runId]);
      if (api.stopError) throw api.stopError;
      api.stops.push([folder, runId]);
      return { requested: true };
    },
    async compare(runs) {
      api.calls.push(["compare", runs]);
      return api.compareReport;
    },
    exportError: null,
    exportGate: null, // a promise the export waits on (to see the busy state)
    async exportBundle(folder, runId) {
      api.calls.push(["export", folder, runId]);
      if (api.exportGate) await api.exportGate;
      if (api.exportError) throw api.exportError;
      return { blob: new Blob(["PK"], { type: "application/zip" }), filename: `run-${runId.slice(0, 8)}.zip` };
    },
  };
  return api;
}

/** Wait until `cond()` holds (polling the microtask and timer queues). */
export async function until(cond, ms = 2000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 5));
  }
}
