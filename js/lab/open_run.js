// The way into a run's panel from a notebook. nnx_lab.open_in_panel(run_id) displays
// an output of type OPEN_MIME; its renderer opens the panel once (a reopened notebook
// shows the link again without opening anything) and leaves a link for later. The
// TrainingMonitor's header link sends OPEN_EVENT up the page instead (an anywidget
// view has no handle on the application).
import { Widget } from "@lumino/widgets";
import { h } from "../shared/dom.js";

export const OPEN_MIME = "application/vnd.nnx-lab.open-run+json";
export const OPEN_EVENT = "nnx-lab:open-run";

const SEEN_KEY = "nnx-lab:opened-outputs";
const SEEN_MAX = 200;

/** Whether an output (by its nonce) has opened its panel already; records it if not. */
export function firstTime(nonce, storage = globalThis.localStorage) {
  if (typeof nonce !== "string" || !nonce) return false;
  let seen = [];
  try {
    seen = JSON.parse((storage && storage.getItem(SEEN_KEY)) || "[]");
    if (!Array.isArray(seen)) seen = [];
  } catch {
    seen = [];
  }
  if (seen.includes(nonce)) return false;
  seen.push(nonce);
  try {
    if (storage) storage.setItem(SEEN_KEY, JSON.stringify(seen.slice(-SEEN_MAX)));
  } catch {
    // storage full or refused: opening again on a reload is the lesser harm
  }
  return true;
}

export class OpenRunRenderer extends Widget {
  constructor(options, { app, command, inLab }) {
    super();
    this.mimeType = options.mimeType;
    this.app = app;
    this.command = command;
    this.inLab = inLab;
    this.addClass("nnx-open-run");
  }

  async renderModel(model) {
    const data = model.data[this.mimeType] || {};
    const runId = typeof data.run_id === "string" ? data.run_id : "";
    const path = typeof data.runs_root === "string" ? data.runs_root : "";
    const args = { runId, path };
    this.node.replaceChildren();
    if (!runId) {
      this.node.textContent = "nnx-lab: this output names no run";
      return;
    }
    if (!this.inLab) {
      this.node.append(
        h("span", { text: `nnx-lab run ${runId.slice(0, 8)}: open JupyterLab (` }),
        h("a", { href: "../lab", target: "_blank", text: "/lab" }),
        h("span", { text: ") to see it in the nnx-lab runs panel." }),
      );
      return;
    }
    const button = h("button", { type: "button", class: "nnx-tool", "data-testid": "open-run-link", text: `Open run ${runId.slice(0, 8)} in a panel` });
    button.addEventListener("click", () => this.app.commands.execute(this.command, args));
    this.node.append(h("span", { class: "nnx-label", text: "nnx-lab " }), button);
    if (model.trusted && data.open !== false && firstTime(data.nonce)) this.app.commands.execute(this.command, args);
  }
}
