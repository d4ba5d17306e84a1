// The monitor's header: the run (id, status, the reason it stopped, the link to open it
// in a panel of its own), the non-finite warning, the counters and Stop; in a race, the
// line that sums up the runs instead.
import { h } from "../shared/dom.js";
import { fmtDuration, fmtInt, fmtRate, fmtValue } from "../shared/format.js";
import { STOP } from "../shared/protocol.js";
import { raceSummary } from "./race.js";

/** @typedef {import("./view.js").MonitorView} MonitorView */

export const TERMINAL = new Set(["finished", "stopped", "failed", "interrupted"]);
const STAT_KEYS = ["epoch", "step", "throughput", "elapsed", "eta", "loss"];
const STAT_LABELS = { epoch: "Epoch", step: "Step", throughput: "Samples/s", elapsed: "Elapsed", eta: "ETA", loss: "Loss" };
const STOP_TITLE = "Stop training after the current step (writes the LAST checkpoint)";
// The JupyterLab extension (js/lab) marks <body> and listens for this event: the link
// to open the run in a panel of its own shows only where someone will answer it.
const OPEN_EVENT = "nnx-lab:open-run";

/** The header's elements (on the view: stopButton, status, stat, ...); returns the header. @param {MonitorView} v */
export function buildHeader(v) {
  v.stopButton = h("button", { type: "button", class: "nnx-btn nnx-stop", "data-testid": "stop", text: "Stop" });
  v.stopButton.addEventListener("click", () => stop(v));
  v.runId = h("code", { class: "nnx-run-id", "data-testid": "run-id" });
  v.status = h("span", { class: "nnx-status", "data-testid": "status", role: "status" });
  v.reason = h("span", { class: "nnx-reason", "data-testid": "reason" });
  v.nonfinite = h("span", { class: "nnx-nonfinite", "data-testid": "nonfinite", role: "alert" });
  v.openLink = h("button", {
    type: "button",
    class: "nnx-tool nnx-open-panel",
    "data-testid": "open-in-panel",
    title: "Open this run in a JupyterLab panel of its own (nnx-lab runs), which follows it without this kernel",
    text: "Open in panel",
  });
  v.openLink.hidden = true;
  v.openLink.addEventListener("click", () => openInPanel(v));
  v.stats = h("dl", { class: "nnx-stats" });
  /** @type {Record<string, HTMLElement>} */
  v.stat = {};
  for (const key of STAT_KEYS) {
    v.stat[key] = h("dd", { "data-testid": key, text: "–" });
    v.stats.append(h("div", { class: "nnx-stat" }, [h("dt", { text: STAT_LABELS[key] }), v.stat[key]]));
  }
  v.raceStatus = h("span", { class: "nnx-race-status", "data-testid": "race-status" });
  v.raceStatus.hidden = true;
  v.runTitle = h("div", { class: "nnx-title" }, [h("span", { class: "nnx-label", text: "Run" }), v.runId, v.status, v.reason, v.openLink]);
  return h("div", { class: "nnx-header" }, [v.raceStatus, v.runTitle, v.stats, v.stopButton]);
}

/** Draw the header from the model's traits. @param {MonitorView} v */
export function renderHeader(v) {
  const m = v.model;
  const race = v._lanes.length > 0;
  // a comparison of finished runs has no current run: no run line, no counters
  const comparing = race && Boolean(m.get("from_log")) && !m.get("run_id");
  v.raceStatus.hidden = !race;
  v.raceStatus.textContent = race ? raceSummary(v._lanes, comparing) : "";
  v.runTitle.hidden = comparing;
  v.stats.hidden = comparing;
  const st = String(m.get("status") || "created");
  v.status.textContent = st;
  v.status.dataset.status = st;
  v.root.dataset.status = st;
  const reason = m.get("stop_reason") || "";
  v.reason.textContent = reason;
  v.reason.hidden = !reason;
  v.runId.textContent = m.get("run_id") || "–";
  v.runId.title = m.get("run_id") || "";
  v.openLink.hidden = !(m.get("run_id") && m.get("runs_root") && document.body && document.body.dataset.nnxLabRuns);
  const nEpochs = m.get("n_epochs");
  const epoch = m.get("epoch");
  v.stat.epoch.textContent = nEpochs ? `${fmtInt(epoch)} / ${fmtInt(nEpochs)}` : fmtInt(epoch);
  const total = m.get("total_steps");
  const step = m.get("step");
  v.stat.step.textContent = total ? `${fmtInt(step)} / ${fmtInt(total)}` : fmtInt(step);
  v.stat.throughput.textContent = fmtRate(m.get("samples_per_sec"));
  v.stat.elapsed.textContent = fmtDuration(m.get("elapsed"));
  v.stat.eta.textContent = TERMINAL.has(st) ? "–" : fmtDuration(m.get("eta"));
  renderLoss(v);
  renderStop(v, st);
}

/** The loss: the latest value, or loudly that it is not finite (with a marker on the chart). */
function renderLoss(v) {
  const m = v.model;
  const since = m.get("loss_nonfinite_since");
  const badSteps = m.get("loss_nonfinite_steps") || 0;
  const lastFinite = m.get("last_finite_loss");
  if (since !== null && since !== undefined) {
    const before = lastFinite === null || lastFinite === undefined ? "" : ` (last finite ${fmtValue(lastFinite)} at step ${fmtInt(m.get("last_finite_step"))})`;
    v.stat.loss.textContent = `non-finite${before}`;
    v.nonfinite.textContent = `⚠ loss non-finite since step ${fmtInt(since)}`;
    v.nonfinite.hidden = false;
    v.root.dataset.health = "nonfinite";
    v.lossFig.dataset.nonfiniteSince = String(since);
  } else {
    const last = m.get("last_loss");
    const ema = emaLast(v._smoothed);
    v.stat.loss.textContent = last === null || last === undefined ? "–" : `${fmtValue(last)}${Number.isFinite(ema) ? ` (smoothed ${fmtValue(ema)})` : ""}`;
    v.nonfinite.textContent = badSteps ? `⚠ ${fmtInt(badSteps)} steps had a non-finite loss` : "";
    v.nonfinite.hidden = !badSteps;
    if (badSteps) v.root.dataset.health = "nonfinite";
    else delete v.root.dataset.health;
    delete v.lossFig.dataset.nonfiniteSince;
  }
  const markerKey = since === null || since === undefined ? "" : String(since);
  if (markerKey !== v._markerKey) {
    v._markerKey = markerKey;
    v.lossChart.setMarkers(markerKey ? [{ x: since, label: `loss non-finite since step ${fmtInt(since)}`, color: "--jp-error-color1" }] : []);
  }
}

/** The last finite value of the smoothed loss (NaN: none). */
function emaLast(smoothed) {
  if (!smoothed) return NaN;
  for (let i = smoothed.length - 1; i >= 0; i--) if (Number.isFinite(smoothed[i])) return smoothed[i];
  return NaN;
}

/** Stop: enabled only when a click can reach the loop; the tooltip says why not. */
function renderStop(v, st) {
  const m = v.model;
  const canStop = Boolean(m.get("can_stop")) && (st === "running" || st === "created");
  const b = v.stopButton;
  b.disabled = !canStop;
  let title = STOP_TITLE;
  if (m.get("from_log")) title = "This run is read from its log: Stop reaches only runs started with monitor.fit(...) in this kernel";
  else if (TERMINAL.has(st)) title = `The run has ended (${st})`;
  else if (st === "stopping") title = "Stopping after the current step…";
  else if (st === "running" && !canStop) title = "Stop reaches only runs started with monitor.fit(...); interrupt the kernel to stop this one";
  else if (!canStop) title = "No run to stop yet";
  b.title = title;
  b.setAttribute("aria-label", title);
  b.textContent = st === "stopping" ? "Stopping…" : "Stop";
  b.setAttribute("aria-busy", st === "stopping" ? "true" : "false");
}

function stop(v) {
  v.stopButton.disabled = true;
  v.model.send({ kind: STOP });
}

function openInPanel(v) {
  const detail = { run_id: v.model.get("run_id"), runs_root: v.model.get("runs_root") };
  v.root.dispatchEvent(new CustomEvent(OPEN_EVENT, { bubbles: true, composed: true, detail }));
}
