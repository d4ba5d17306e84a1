// The "nnx-lab runs" side panel: every run the server found, with its name, status,
// epochs, best value (which metric, which way is better), start and duration; sorted,
// filtered by text and status, refreshed while shown. A click opens a run's panel;
// ticking two or more runs offers a comparison.
import { h } from "../shared/dom.js";
import { fmtDuration, fmtInt, fmtValue } from "../shared/format.js";

export const STATUSES = ["running", "finished", "stopped", "failed", "interrupted", "damaged", "created"];

export const SORTS = {
  newest: { label: "newest first", cmp: (a, b) => num(b.started_at) - num(a.started_at) },
  oldest: { label: "oldest first", cmp: (a, b) => num(a.started_at) - num(b.started_at) },
  status: { label: "status", cmp: (a, b) => statusRank(a.status) - statusRank(b.status) || num(b.started_at) - num(a.started_at) },
  // like with like: runs grouped by their best's metric (and direction), best first in each
  best: { label: "best value (by metric)", cmp: (a, b) => bestGroup(a).localeCompare(bestGroup(b)) || bestKey(a) - bestKey(b) || num(b.started_at) - num(a.started_at) },
  duration: { label: "longest first", cmp: (a, b) => num(b.duration_s) - num(a.duration_s) },
};

function num(v) {
  return typeof v === "number" && Number.isFinite(v) ? v : -Infinity;
}

// The direction of the metrics whose name says it, for records older than best.mode.
const HIGHER = /(^|_)(accuracy|precision|recall|f1|auc|auroc|roc_auc|r2|iou|dice|map)(_|$)/;
const LOWER = /(^|_)(error|loss|nll|mse|mae|rmse|ece|brier|perplexity)(_|$)/;

/**
 * The metric a run's best value is of, as a person says it: "val loss", "train error",
 * "val mae", and its direction: "min" (lower is better), "max", or "" when unknown.
 * @param {{best_source?: string|null, best_mode?: string|null}} r
 */
export function bestMetric(r) {
  const source = typeof r.best_source === "string" ? r.best_source : "";
  if (!source) return { label: "", mode: "" };
  const [split, ...rest] = source.split(".");
  const name = rest.filter((p) => p !== "metrics").join(".") || split;
  const part = split.replace(/_edp$/, "");
  const label = rest.length ? `${part} ${name}` : name;
  let mode = r.best_mode === "min" || r.best_mode === "max" ? r.best_mode : "";
  if (!mode) mode = HIGHER.test(name) ? "max" : LOWER.test(name) ? "min" : "";
  return { label, mode };
}

/** "val loss ↓": the metric and which way is better. */
export function bestLabel(r) {
  const { label, mode } = bestMetric(r);
  return `${label}${mode === "min" ? " ↓" : mode === "max" ? " ↑" : ""}`;
}

function hasBest(r) {
  return typeof r.best_value === "number" && Number.isFinite(r.best_value);
}

/** The group a run's best is sorted in (runs without one last). */
function bestGroup(r) {
  if (!hasBest(r)) return "\uffff";
  const { label, mode } = bestMetric(r);
  return `${label}\u0000${mode}`;
}

/** Within a group the best first: the lowest, or the highest where higher is better. */
function bestKey(r) {
  if (!hasBest(r)) return Infinity;
  return bestMetric(r).mode === "max" ? -r.best_value : r.best_value;
}

function statusRank(s) {
  const i = STATUSES.indexOf(s);
  return i < 0 ? STATUSES.length : i;
}

/** The stable key of a run in the panel: its folder's key and its id. */
export function runKey(row) {
  return `${row.folder}/${row.run_id}`;
}

/**
 * Rows that match the filter, sorted.
 * @param {any[]} rows
 * @param {{text?: string, status?: string, sort?: string, folders?: Record<string, {label: string}>}} opts
 */
export function visibleRows(rows, { text = "", status = "all", sort = "newest", folders = {} } = {}) {
  const words = text.toLowerCase().split(/\s+/).filter(Boolean);
  const out = rows.filter((r) => {
    if (status !== "all" && r.status !== status) return false;
    if (!words.length) return true;
    const hay = [r.name, r.run_id, r.status, r.best_source, r.error, r.parent_run_id, folders[r.folder] ? folders[r.folder].label : ""]
      .filter((x) => typeof x === "string")
      .join(" ")
      .toLowerCase();
    return words.every((w) => hay.includes(w));
  });
  const cmp = (SORTS[sort] || SORTS.newest).cmp;
  return out.sort((a, b) => cmp(a, b) || String(a.run_id).localeCompare(String(b.run_id)));
}

/** "2 / 10" epochs. */
export function fmtEpochs(r) {
  const done = typeof r.epochs_completed === "number" ? r.epochs_completed : null;
  const planned = typeof r.planned_epochs === "number" ? r.planned_epochs : null;
  if (done === null && planned === null) return "–";
  return planned === null ? fmtInt(done ?? 0) : `${fmtInt(done ?? 0)} / ${fmtInt(planned)}`;
}

/** A start time: "14:03:12" today, "2024-05-01 14:03" before. */
export function fmtStart(t, nowS) {
  if (typeof t !== "number" || !Number.isFinite(t)) return "–";
  const d = new Date(t * 1000);
  const today = new Date(nowS * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  if (d.toDateString() === today.toDateString()) return `${time}:${pad(d.getSeconds())}`;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}`;
}

/** How long a run took, or has been running (by the server's clock). */
export function runDuration(r, serverNow) {
  if (typeof r.duration_s === "number" && Number.isFinite(r.duration_s)) return r.duration_s;
  if (r.status === "running" && typeof r.started_at === "number") return Math.max(0, serverNow - r.started_at);
  return null;
}

/** The cells of one row, as text. */
export function rowCells(r, serverNow) {
  return {
    status: String(r.status || "–"),
    name: typeof r.name === "string" ? r.name : "",
    id: String(r.run_id).slice(0, 8),
    epochs: fmtEpochs(r),
    best: typeof r.best_value === "number" ? fmtValue(r.best_value) : "–",
    bestLabel: bestLabel(r),
    start: fmtStart(r.started_at, serverNow),
    duration: fmtDuration(runDuration(r, serverNow)),
  };
}

/**
 * The side panel's content. `api` is a RunsApi; `onOpen(row)` opens a run's panel,
 * `onCompare(rows)` a comparison of the ticked runs.
 */
export class RunsList {
  /**
   * @param {{api: import("./api.js").RunsApi, onOpen: (row: any) => void,
   *   onCompare: (rows: any[]) => void, pollMs?: number}} opts
   */
  constructor({ api, onOpen, onCompare, pollMs = 2000 }) {
    this.api = api;
    this.onOpen = onOpen;
    this.onCompare = onCompare;
    this.pollMs = pollMs;
    /** @type {any[]} */
    this.rows = [];
    this.folders = {};
    this.selected = new Set();
    this.serverTime = Date.now() / 1000;
    this.serverAt = Date.now();
    this.loaded = false;
    this._timer = null;
    this._active = false;
    this._build();
  }

  _build() {
    this.node = h("div", { class: "nnx-runs", "data-testid": "runs-panel" });
    this.filter = h("input", { type: "search", class: "nnx-runs-filter", placeholder: "Filter runs", "aria-label": "Filter runs by text", "data-testid": "runs-filter" });
    this.filter.addEventListener("input", () => this.render());
    this.statusSelect = h("select", { "aria-label": "Show runs of status", "data-testid": "runs-status" }, [
      h("option", { value: "all", text: "all statuses" }),
      ...STATUSES.map((s) => h("option", { value: s, text: s })),
    ]);
    this.statusSelect.addEventListener("change", () => this.render());
    this.sortSelect = h("select", { "aria-label": "Sort runs", "data-testid": "runs-sort" }, Object.entries(SORTS).map(([k, v]) => h("option", { value: k, text: v.label })));
    this.sortSelect.addEventListener("change", () => this.render());
    this.refreshButton = h("button", { type: "button", class: "nnx-tool", title: "Search the runs folders again", "data-testid": "runs-refresh", text: "Refresh" });
    this.refreshButton.addEventListener("click", () => this.refresh({ rescan: true }));
    this.compareButton = h("button", { type: "button", class: "nnx-btn nnx-runs-compare", "data-testid": "runs-compare", text: "Compare" });
    this.compareButton.addEventListener("click", () => {
      const rows = this.rows.filter((r) => this.selected.has(runKey(r)));
      if (rows.length >= 2) this.onCompare(rows);
    });
    const bar = h("div", { class: "nnx-runs-bar" }, [this.filter, this.statusSelect, this.sortSelect, this.refreshButton, this.compareButton]);
    this.count = h("div", { class: "nnx-runs-count", "data-testid": "runs-count", "aria-live": "polite" });
    this.body = h("div", { class: "nnx-runs-list", role: "list", "data-testid": "runs-table" });
    this.notes = h("div", { class: "nnx-runs-notes", "data-testid": "runs-notes" });
    this.error = h("div", { class: "nnx-runs-error", role: "alert", "data-testid": "runs-error" });
    this.error.hidden = true;
    this.empty = h("p", { class: "nnx-runs-empty", "data-testid": "runs-empty" });
    this.node.append(h("div", { class: "nnx-runs-title", text: "nnx-lab runs" }), bar, this.count, this.error, this.body, this.empty, this.notes);
    this.render();
  }

  serverNow() {
    return this.serverTime + (Date.now() - this.serverAt) / 1000;
  }

  /** Start (or stop) refreshing every pollMs, as the panel is shown (or hidden). */
  setActive(on) {
    this._active = on;
    if (on) this.refresh();
    else if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
  }

  async refresh({ rescan = false } = {}) {
    if (this._timer !== null) clearTimeout(this._timer);
    this._timer = null;
    try {
      const data = await this.api.listRuns({ refresh: rescan });
      this.setListing(data);
      this.error.hidden = true;
    } catch (err) {
      this.error.textContent = `Cannot list the runs: ${err && err.message ? err.message : err}`;
      this.error.hidden = false;
    }
    if (this._active && !this._disposed) this._timer = setTimeout(() => this.refresh(), this.pollMs);
  }

  /** Take a listing from the server. */
  setListing(data) {
    this.rows = Array.isArray(data.runs) ? data.runs : [];
    this.folders = {};
    for (const f of data.folders || []) this.folders[f.key] = f;
    if (typeof data.server_time === "number") {
      this.serverTime = data.server_time;
      this.serverAt = Date.now();
    }
    const keys = new Set(this.rows.map(runKey));
    for (const k of [...this.selected]) if (!keys.has(k)) this.selected.delete(k);
    this.notesText = (data.notes || []).join(" · ");
    this.loaded = true;
    this.render();
  }

  render() {
    const rows = visibleRows(this.rows, {
      text: this.filter.value,
      status: this.statusSelect.value,
      sort: this.sortSelect.value,
      folders: this.folders,
    });
    const now = this.serverNow();
    const many = Object.keys(this.folders).length > 1;
    this.body.replaceChildren(...rows.map((r) => this._row(r, now, many)));
    this.count.textContent = this.loaded ? `${rows.length} of ${this.rows.length} runs` : "loading…";
    const n = this.selected.size;
    this.compareButton.disabled = n < 2;
    this.compareButton.textContent = n >= 2 ? `Compare ${n}` : "Compare";
    this.compareButton.title = n >= 2 ? "Overlay the ticked runs' curves and list how their configurations differ" : "Tick two or more runs to compare them";
    this.empty.hidden = !this.loaded || rows.length > 0;
    this.empty.textContent = this.rows.length
      ? "No run matches the filter."
      : "No runs yet. Runs are read from the runs/ folders under the server's root (see docs/lab_extension.md).";
    this.notes.textContent = this.notesText || "";
    this.notes.hidden = !this.notesText;
  }

  _row(r, now, many) {
    const c = rowCells(r, now);
    const key = runKey(r);
    const pick = h("input", { type: "checkbox", "aria-label": `Select run ${c.name || c.id} for comparison`, "data-testid": "run-pick" });
    pick.checked = this.selected.has(key);
    pick.disabled = r.status === "damaged";
    pick.addEventListener("click", (e) => e.stopPropagation());
    pick.addEventListener("change", () => {
      if (pick.checked) this.selected.add(key);
      else this.selected.delete(key);
      this.render();
    });
    const folder = this.folders[r.folder];
    const pill = h("span", { class: "nnx-status", text: c.status, "data-testid": "run-status" });
    pill.dataset.status = c.status;
    const title = [c.name, `run ${r.run_id}`, folder ? `in ${folder.label}` : "", r.error ? `error: ${r.error}` : "", r.best_source ? `best: ${r.best_source}` : ""]
      .filter(Boolean)
      .join("\n");
    const cell = (cls, text, tip) => h("span", { class: cls, text, title: tip || "" });
    // the name first (what a person called the run), the id after it
    const named = c.name ? [h("span", { class: "nnx-runs-name", text: c.name, title: c.name, "data-testid": "run-name" })] : [];
    const top = h("div", { class: "nnx-runs-line" }, [
      pill,
      ...named,
      h("code", { class: "nnx-runs-id", text: c.id, "data-testid": "run-id" }),
      cell("nnx-runs-epochs", c.epochs, "epochs done / planned"),
    ]);
    const bestText = c.bestLabel ? `best ${c.bestLabel} ${c.best}` : `best ${c.best}`;
    const bestTip = r.best_source ? `the best epoch's ${r.best_source}${bestMetric(r).mode ? ` (${bestMetric(r).mode === "min" ? "lower" : "higher"} is better)` : ""}` : "no selection value yet";
    const best = h("span", { class: "nnx-runs-best", text: bestText, title: bestTip, "data-testid": "run-best" });
    const details = [best, cell("", c.start, "started"), cell("", c.duration, r.status === "running" ? "running for" : "took")];
    if (many && folder) details.push(cell("nnx-runs-folder", folder.label, "runs folder"));
    const bottom = h("div", { class: "nnx-runs-line nnx-runs-details" }, details);
    if (r.error) bottom.append(cell("nnx-runs-err", r.error, r.error));
    const tr = h("div", { class: "nnx-runs-row", role: "listitem", tabindex: "0", title, "data-testid": "run-row" }, [
      h("div", { class: "nnx-runs-pick" }, [pick]),
      h("div", { class: "nnx-runs-main" }, [top, bottom]),
    ]);
    tr.dataset.runId = String(r.run_id);
    tr.dataset.folder = String(r.folder);
    tr.dataset.status = c.status;
    const open = () => {
      if (!r.refused) this.onOpen(r); // a damaged run opens on what can be read of it
    };
    tr.addEventListener("click", open);
    tr.addEventListener("keydown", (e) => {
      if (e.key === "Enter") open();
    });
    if (r.status === "damaged") tr.classList.add("nnx-runs-damaged");
    return tr;
  }

  dispose() {
    this._disposed = true;
    if (this._timer !== null) clearTimeout(this._timer);
    this._timer = null;
    this.node.remove();
  }
}
