// The way into a run's panel from a notebook. nnx_lab.open_in_panel(run_id) displays
// an output of type OPEN_MIME; its renderer (plugin.js) opens the panel once (a
// reopened notebook shows the link again without opening anything) and leaves a link
// for later. The TrainingMonitor's header link sends OPEN_EVENT up the page instead
// (an anywidget view has no handle on the application).
import { h } from "../shared/dom.js";

export const OPEN_MIME = "application/vnd.nnx-lab.open-run+json";
export const OPEN_EVENT = "nnx-lab:open-run";

const SEEN_KEY = "nnx-lab:opened-outputs";
const SEEN_MAX = 200;

/** Whether an output (by its nonce) opens its panel now: true the first time only. */
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

/**
 * Render an open_in_panel output into `node`; returns whether it asked to open now.
 * @param {HTMLElement} node
 * @param {any} data  the output's OPEN_MIME data: {run_id, runs_root, nonce}
 * @param {{open: (args: {runId: string, path: string}) => void, inLab: boolean,
 *   trusted: boolean, storage?: Storage}} opts
 */
export function renderOpenRun(node, data, { open, inLab, trusted, storage }) {
  const runId = data && typeof data.run_id === "string" ? data.run_id : "";
  const path = data && typeof data.runs_root === "string" ? data.runs_root : "";
  node.replaceChildren();
  if (!runId || !path) {
    node.textContent = "nnx-lab: this output names no run";
    return false;
  }
  if (!inLab) {
    node.append(
      h("span", { text: `nnx-lab run ${runId.slice(0, 8)}: open JupyterLab (` }),
      h("a", { href: "../lab", target: "_blank", text: "/lab" }),
      h("span", { text: ") to see it in the nnx-lab runs panel." }),
    );
    return false;
  }
  const button = h("button", { type: "button", class: "nnx-tool", "data-testid": "open-run-link", text: `Open run ${runId.slice(0, 8)} in a panel` });
  button.addEventListener("click", () => open({ runId, path }));
  node.append(h("span", { class: "nnx-label", text: "nnx-lab " }), button);
  if (trusted && firstTime(data.nonce, storage)) {
    open({ runId, path });
    return true;
  }
  return false;
}
