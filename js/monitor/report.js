// The monitor's Report button: the run's one-file HTML report. The view asks its model
// ({kind: "report", view}); the kernel's TrainingMonitor writes the file and answers the
// view that asked ({kind: "report_done", to, path} or {error}); in the runs panel the
// RunModel answers the same way after the server sent the page as a download. The note
// beside the button says where it went, or why not.
import { h } from "../shared/dom.js";
import { REPORT, REPORT_DONE } from "../shared/protocol.js";

/** @typedef {import("./view.js").MonitorView} MonitorView */

/** The button and its note (on the view: reportButton, reportNote). @param {MonitorView} v */
export function buildReport(v) {
  v.reportButton = h("button", {
    type: "button",
    class: "nnx-tool",
    "data-testid": "report",
    title: "Write the run's report: one HTML file that opens anywhere, without a server",
    text: "Report",
  });
  v.reportButton.addEventListener("click", () => askReport(v));
  v.reportNote = h("span", { class: "nnx-report-note", role: "status", "data-testid": "report-note" });
  v.reportNote.hidden = true;
  return [v.reportButton, v.reportNote];
}

/** Enabled while one run is shown (not a race, not before a run started). @param {MonitorView} v */
export function renderReport(v) {
  if (!v.reportButton || v._reportBusy) return;
  const one = Boolean(v.model.get("run_id")) && !(v.model.get("runs") || []).length;
  v.reportButton.disabled = !one;
}

/** @param {MonitorView} v */
function askReport(v) {
  if (!v.sync || v._reportBusy) return;
  v._reportBusy = true;
  v.reportButton.disabled = true;
  v.reportNote.hidden = false;
  v.reportNote.dataset.state = "busy";
  v.reportNote.textContent = "writing the report…";
  v.model.send({ kind: REPORT, view: v.sync.view });
}

/** The answer to this view's request; other views' answers and other messages pass. @param {MonitorView} v */
export function onReportMessage(v, msg) {
  if (!msg || msg.kind !== REPORT_DONE || !v.sync || msg.to !== v.sync.view) return;
  v._reportBusy = false;
  v.reportNote.hidden = false;
  if (msg.error) {
    v.reportNote.dataset.state = "error";
    v.reportNote.textContent = `No report: ${msg.error}`;
  } else {
    v.reportNote.dataset.state = "done";
    v.reportNote.textContent = msg.download ? `Report downloaded as ${msg.path}` : `Report written to ${msg.path}`;
  }
  renderReport(v);
}
