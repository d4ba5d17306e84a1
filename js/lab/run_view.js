// A run's main-area panel: its name (renamed here), where the run lives and what of
// its files could not be read, above the TrainingMonitor's own view (header, loss per step, per-epoch
// metrics, learning rate, epoch table, Stop, Report), Export bundle, drawn from the run's log through the
// server and following it while it runs. No kernel is involved.
import { MonitorView } from "../monitor/view.js";
import { download, h } from "../shared/dom.js";
import { fmtInt } from "../shared/format.js";
import { shownBytes } from "./format_lab.js";
import { RunFollower, RunModel } from "./run_follow.js";

export class RunView {
  /**
   * @param {HTMLElement} host
   * @param {{api: import("./api.js").RunsApi, folder: string, runId: string,
   *   folderLabel?: string, pollMs?: number, pageBytes?: number,
   *   onName?: (name: string) => void, save?: (name: string, blob: Blob) => void}} opts
   *   `onName`: the run's name, as it is known; `save`: how the Report page and the
   *   exported bundle are saved (a download)
   */
  constructor(host, { api, folder, runId, folderLabel = "", pollMs, pageBytes, onName = () => {}, save }) {
    this.host = host;
    this.api = api;
    this.folder = folder;
    this.runId = runId;
    this.onName = onName;
    this.name = null; // null: not known yet; "": the run has no name
    this.node = h("div", { class: "nnx-run-panel", "data-testid": "run-panel" });
    this.node.dataset.runId = runId;
    this.node.dataset.folder = folder;
    this.nameText = h("span", { class: "nnx-run-name", "data-testid": "run-name" });
    this.renameButton = h("button", { type: "button", class: "nnx-tool", text: "Rename", title: "Give the run a name (not part of its id)", "data-testid": "run-rename" });
    this.renameButton.addEventListener("click", () => this.startRename());
    this.renameBox = h("span", { class: "nnx-run-rename", "data-testid": "run-rename-box" });
    this.renameBox.hidden = true;
    this.renameError = h("span", { class: "nnx-run-rename-error", role: "alert", "data-testid": "run-rename-error" });
    this.renameError.hidden = true;
    // Export bundle: the server builds the run's bundle (a zip) and the browser saves it
    this.save = save || download;
    this.exportButton = h("button", { type: "button", class: "nnx-tool", text: "Export bundle", title: "Download the run's LAST checkpoint and record as a bundle (a zip of safetensors and JSON)", "data-testid": "run-export" });
    this.exportButton.addEventListener("click", () => this.exportBundle());
    this.exportStatus = h("span", { class: "nnx-run-export-status", role: "status", "data-testid": "run-export-status" });
    this.exportStatus.hidden = true;
    this.where = h("div", { class: "nnx-run-where", "data-testid": "run-where" }, [
      this.nameText,
      this.renameBox,
      this.renameButton,
      h("span", { class: "nnx-label", text: "run" }),
      h("code", { text: runId }),
      h("span", { class: "nnx-label", text: "in" }),
    ]);
    this.folderLabel = h("code", { text: folderLabel || folder, "data-testid": "run-folder" });
    this.where.append(this.folderLabel);
    this.progress = h("span", { class: "nnx-run-progress", "data-testid": "run-progress" });
    this.where.append(this.exportButton, this.exportStatus, this.progress, this.renameError);
    this.problems = h("div", { class: "nnx-run-problems", role: "status", "data-testid": "run-problems" });
    this.problems.hidden = true;
    this.monitorHost = h("div", { class: "nnx-run-monitor" });
    this.node.append(this.where, this.problems, this.monitorHost);
    host.append(this.node);
    this.follower = new RunFollower(api, folder, runId, { pollMs, pageBytes });
    this.model = new RunModel(this.follower, { save });
    const flush = this.model.flush.bind(this.model);
    this.model.flush = () => {
      flush();
      this._info();
    };
    this.view = new MonitorView(this.model, this.monitorHost);
    this.follower.start();
  }

  /** Show the run's name (or that it has none); the panel's title follows it. */
  _showName(name) {
    this.name = name;
    this.nameText.textContent = name || "unnamed";
    this.nameText.dataset.empty = String(!name);
    this.nameText.title = name ? "the run's name (not part of its id)" : "this run has no name: Rename gives it one";
    this.onName(name);
  }

  /** Edit the name in place: Enter (or Save) renames, Escape (or Cancel) leaves it. */
  startRename() {
    if (!this.renameBox.hidden) return;
    const input = h("input", { type: "text", class: "nnx-input", value: this.name || "", "aria-label": "The run's name", "data-testid": "run-name-input" });
    const save = h("button", { type: "button", class: "nnx-tool", text: "Save", "data-testid": "run-name-save" });
    const cancel = h("button", { type: "button", class: "nnx-tool", text: "Cancel", "data-testid": "run-name-cancel" });
    const done = () => {
      this.renameBox.hidden = true;
      this.renameBox.replaceChildren();
      this.nameText.hidden = false;
      this.renameButton.hidden = false;
    };
    const submit = async () => {
      save.disabled = true;
      try {
        const reply = await this.api.rename(this.folder, this.runId, input.value);
        this.renameError.hidden = true;
        const name = reply && typeof reply.name === "string" ? reply.name : "";
        const s = this.follower.summary;
        if (s && s.run) s.run.name = name; // until the next status read says the same
        this._showName(name);
        done();
      } catch (err) {
        this.renameError.textContent = `Not renamed: ${err && err.message ? err.message : err}`;
        this.renameError.hidden = false;
        save.disabled = false;
        input.focus();
      }
    };
    save.addEventListener("click", submit);
    cancel.addEventListener("click", () => {
      this.renameError.hidden = true;
      done();
    });
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") submit();
      else if (e.key === "Escape") cancel.click();
    });
    this.renameBox.replaceChildren(input, save, cancel);
    this.renameBox.hidden = false;
    this.nameText.hidden = true;
    this.renameButton.hidden = true;
    input.focus();
    input.select();
  }

  /** Export bundle: busy while the server builds the zip, then saved; a refusal is
   * shown beside the button (the run view stays as it is). */
  async exportBundle() {
    if (this.exportButton.disabled) return;
    this.exportButton.disabled = true;
    this.exportButton.textContent = "Exporting…";
    this.exportStatus.hidden = true;
    this.exportStatus.dataset.state = "busy";
    try {
      const { blob, filename } = await this.api.exportBundle(this.folder, this.runId);
      this.save(filename, blob);
      this.exportStatus.textContent = `Saved ${filename}`;
      this.exportStatus.dataset.state = "done";
    } catch (err) {
      this.exportStatus.textContent = `Not exported: ${err && err.message ? err.message : err}`;
      this.exportStatus.dataset.state = "error";
    }
    this.exportStatus.hidden = false;
    this.exportButton.disabled = false;
    this.exportButton.textContent = "Export bundle";
  }

  /** The lines under the title: reading progress, damaged lines, unreadable files. */
  _info() {
    const f = this.follower;
    const s = f.summary;
    const known = s && s.run ? (typeof s.run.name === "string" ? s.run.name : "") : null;
    if (known !== null && this.renameBox.hidden && known !== this.name) this._showName(known);
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
