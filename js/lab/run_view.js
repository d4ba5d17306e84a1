// A run's main-area panel: where the run lives and what of its files could not be
// read, above the TrainingMonitor's own view (header, loss per step, per-epoch
// metrics, learning rate, epoch table, Stop), drawn from the run's log through the
// server and following it while it runs. No kernel is involved.
import { MonitorView } from "../monitor/view.js";
import { h } from "../shared/dom.js";
import { fmtInt } from "../shared/format.js";
import { shownBytes } from "./format_lab.js";
import { RunFollower, RunModel } from "./run_follow.js";

export class RunView {
  /**
   * @param {HTMLElement} host
   * @param {{api: import("./api.js").RunsApi, folder: string, runId: string,
   *   folderLabel?: string, pollMs?: number, pageBytes?: number}} opts
   */
  constructor(host, { api, folder, runId, folderLabel = "", pollMs, pageBytes }) {
    this.host = host;
    this.folder = folder;
    this.runId = runId;
    this.node = h("div", { class: "nnx-run-panel", "data-testid": "run-panel" });
    this.node.dataset.runId = runId;
    this.node.dataset.folder = folder;
    this.where = h("div", { class: "nnx-run-where", "data-testid": "run-where" }, [
      h("span", { class: "nnx-label", text: "Run" }),
      h("code", { text: runId }),
      h("span", { class: "nnx-label", text: "in" }),
    ]);
    this.folderLabel = h("code", { text: folderLabel || folder, "data-testid": "run-folder" });
    this.where.append(this.folderLabel);
    this.progress = h("span", { class: "nnx-run-progress", "data-testid": "run-progress" });
    this.where.append(this.progress);
    this.problems = h("div", { class: "nnx-run-problems", role: "status", "data-testid": "run-problems" });
    this.problems.hidden = true;
    this.monitorHost = h("div", { class: "nnx-run-monitor" });
    this.node.append(this.where, this.problems, this.monitorHost);
    host.append(this.node);
    this.follower = new RunFollower(api, folder, runId, { pollMs, pageBytes });
    this.model = new RunModel(this.follower);
    const flush = this.model.flush.bind(this.model);
    this.model.flush = () => {
      flush();
      this._info();
    };
    this.view = new MonitorView(this.model, this.monitorHost);
    this.follower.start();
  }

  /** The lines under the title: reading progress, damaged lines, unreadable files. */
  _info() {
    const f = this.follower;
    const s = f.summary;
    if (s && s.folder && s.folder.label) this.folderLabel.textContent = s.folder.label;
    const reading = f.size > 0 && f.offset < f.size && !f.done;
    this.progress.textContent = reading ? `reading the log: ${shownBytes(f.offset)} of ${shownBytes(f.size)}` : "";
    this.node.dataset.offset = String(f.offset);
    this.node.dataset.following = f.done ? "done" : "live";
    const lines = [];
    if (s && Array.isArray(s.problems)) for (const p of s.problems) lines.push(String(p));
    if (f.badLines) {
      const first = f.damage[0];
      lines.push(
        `${fmtInt(f.badLines)} damaged line${f.badLines === 1 ? "" : "s"} of metrics.jsonl skipped` +
          (first ? ` (the first at byte ${fmtInt(first.offset)}: ${first.reason})` : ""),
      );
    }
    this.problems.textContent = lines.join("\n");
    this.problems.hidden = lines.length === 0;
    this.node.dataset.badLines = String(f.badLines);
  }

  dispose() {
    this.view.dispose();
    this.model.dispose();
    this.node.remove();
  }
}
