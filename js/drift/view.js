// DriftReport's view: the engine's config-drift report (drift_report(...).to_json()) as a
// side-by-side table. Changed rows are highlighted, rows that change the run id are
// marked, "changed only" hides the rest (a synced trait: it survives a reload). The view
// computes nothing: it draws what the kernel sent.
import { h } from "../shared/dom.js";
import { WidgetView } from "../shared/view.js";

/** A cell's text for a value of one side ("–" where the side has none). */
export function cellText(value, absent) {
  if (absent) return "–";
  if (value === null || value === undefined) return "null";
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

/** "changes", "same" or "depends" for a row's changes_run_id. */
export function idWord(changesRunId) {
  if (changesRunId === null || changesRunId === undefined) return "depends";
  return changesRunId ? "changes" : "same";
}

export class DriftView extends WidgetView {
  /** @param {import("../shared/view.js").Model} model @param {HTMLElement} el */
  constructor(model, el) {
    super(model, el);
    /** what each row said in the previous report, and the rows that differ from it */
    this._last = new Map();
    this._moved = new Set();
    this._build();
    this._onData();
    this._on("change:data", () => {
      this._onData();
      this._render();
    });
    for (const name of ["changed_only", "side_names", "waiting", "version"]) this._on(`change:${name}`, () => this._render());
    this._on("change:error", () => this._error());
    this._render();
  }

  _build() {
    this._makeRoot("nnx-drift", "Config-drift report");
    this.sides = h("div", { class: "nnx-dr-sides", "data-testid": "sides" });
    this.counts = h("span", { class: "nnx-dr-counts", "data-testid": "counts", role: "status" });
    this.filter = h("input", { type: "checkbox", "data-testid": "changed-only" });
    this.filter.addEventListener("change", () => {
      this._setTrait("changed_only", this.filter.checked);
      this._render();
    });
    const bar = h("div", { class: "nnx-dr-bar" }, [this.counts, h("label", { class: "nnx-dr-filter" }, [this.filter, "changed only"])]);
    this.waiting = h("p", { class: "nnx-dr-waiting", "data-testid": "waiting" });
    this.thead = h("thead");
    this.tbody = h("tbody");
    this.table = h("table", { class: "nnx-dr-table", "data-testid": "drift-table" }, [this.thead, this.tbody]);
    this.empty = h("p", { class: "nnx-dr-empty", "data-testid": "empty" });
    this.limits = h("ul", { class: "nnx-dr-limits", "data-testid": "limits" });
    this.root.append(
      h("div", { class: "nnx-dr-title", text: "Config drift" }),
      this.sides,
      bar,
      this.waiting,
      h("div", { class: "nnx-dr-box" }, [this.table]),
      this.empty,
      this.limits,
      this._makeError(),
    );
  }

  /** A new report: the rows whose values moved since the previous one are marked. */
  _onData() {
    const rows = (this.model.get("data") || {}).rows || [];
    const next = new Map(rows.map((r) => [r.what, JSON.stringify([r.then, r.now, r.changed])]));
    this._moved = new Set(this._last.size ? rows.filter((r) => this._last.get(r.what) !== next.get(r.what)).map((r) => r.what) : []);
    this._last = next;
  }

  _render() {
    const m = this.model;
    const data = m.get("data") || {};
    const rows = data.rows || [];
    const labels = data.labels || ["A", "B"];
    const sides = data.sides || [];
    const names = m.get("side_names") || [];
    const changedOnly = Boolean(m.get("changed_only"));
    this.filter.checked = changedOnly;
    this.sides.replaceChildren(
      ...labels.map((label, i) =>
        h("span", { class: "nnx-dr-side" }, [h("b", { text: `${label}` }), ` = ${sides[i] || "–"}`, names[i] ? h("span", { class: "nnx-dr-what", text: ` (${names[i]})` }) : ""]),
      ),
    );
    const changed = rows.filter((r) => r.changed);
    const ids = changed.filter((r) => r.changes_run_id === true).length;
    this.counts.textContent = rows.length
      ? `${changed.length} of ${rows.length} rows differ; ${ids} change${ids === 1 ? "s" : ""} the run id`
      : "no report yet";
    const waiting = m.get("waiting") || "";
    this.waiting.textContent = waiting;
    this.waiting.hidden = !waiting;
    this.thead.replaceChildren(
      h("tr", {}, ["what", labels[0], labels[1], "run id", "what to do"].map((t) => h("th", { scope: "col", text: t }))),
    );
    const shown = changedOnly ? changed : rows;
    const version = m.get("version") || 0;
    this.tbody.replaceChildren(
      ...shown.map((r) => {
        const moved = this._moved.has(r.what);
        const id = idWord(r.changes_run_id);
        const mark = r.changed && r.changes_run_id ? h("span", { class: "nnx-dr-id", title: "changes the run id", text: "● " }) : "";
        const what = h("td", { class: "nnx-dr-path" }, [mark, h("code", { text: r.what })]);
        const action = h("td", { class: "nnx-dr-action" }, [r.changed ? r.action : ""]);
        if (r.note) {
          action.append(h("div", { class: "nnx-dr-note", text: r.note }));
          action.title = r.note;
        }
        const tr = h(
          "tr",
          {
            "data-what": r.what,
            "data-changed": r.changed ? "true" : "false",
            "data-changes-id": r.changed ? id : "same",
            "data-kind": r.kind,
          },
          [
            what,
            h("td", { class: "nnx-dr-value", text: cellText(r.then, r.then_absent) }),
            h("td", { class: "nnx-dr-value", text: cellText(r.now, r.now_absent) }),
            h("td", { class: "nnx-dr-idcol", text: r.changed ? id : "" }),
            action,
          ],
        );
        if (r.changed) tr.classList.add("nnx-dr-changed");
        if (r.changed && r.changes_run_id) tr.classList.add("nnx-dr-changes-id");
        if (moved) {
          tr.classList.add("nnx-dr-moved");
          tr.dataset.moved = String(version);
        }
        return tr;
      }),
    );
    this.table.hidden = shown.length === 0;
    this.empty.textContent = rows.length && !shown.length ? "Nothing differs." : "";
    this.empty.hidden = !(rows.length && !shown.length);
    const limits = data.limits || [];
    this.limits.replaceChildren(...limits.map((t) => h("li", { text: t })));
    this.limits.hidden = limits.length === 0;
    this.root.dataset.version = String(version);
  }
}
