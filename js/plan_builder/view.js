// PlanBuilder's view: a form generated from the plan's fields (one input per field,
// grouped in sections), each field's problem next to it, the run id the plan would get,
// Fit (in the kernel, or launched as N processes) / Branch / Fit branches / Reset, the
// kept branches, and the builder's TrainingMonitor drawn below (a child widget). The plan lives in the kernel: the view
// sends each edit (debounced while typing) and shows what the kernel says back.
import { h } from "../shared/dom.js";
import { WidgetView } from "../shared/view.js";
import { choiceKey, choiceLabel, fieldTitle, inputKind, isOff, placeholder, shortValue, valueText } from "./fields.js";

export const TYPING_DEBOUNCE_MS = 350;

const TRAITS = ["values", "drafts", "errors", "problems", "set_paths", "objects", "run_id", "run_state", "run_note", "run_exists", "branch_list", "busy", "processes", "processes_error"];

export class PlanBuilderView extends WidgetView {
  /**
   * @param {import("../shared/view.js").Model} model
   * @param {HTMLElement} el
   * @param {{host?: any, signal?: AbortSignal, debounceMs?: number}} [opts]
   */
  constructor(model, el, opts = {}) {
    super(model, el);
    this.host = opts.host;
    this.signal = opts.signal;
    this.debounceMs = opts.debounceMs ?? TYPING_DEBOUNCE_MS;
    /** @type {Map<string, {field: any, row: HTMLElement, input: any, error: HTMLElement}>} */
    this.inputs = new Map();
    /** @type {Map<string, ReturnType<typeof setTimeout>>} edits waiting for the typing to rest */
    this._pending = new Map();
    this._monitorRef = null;
    this._monitorAbort = null;
    this._onDispose(() => {
      for (const t of this._pending.values()) clearTimeout(t);
      this._pending.clear();
      if (this._monitorAbort) this._monitorAbort.abort();
    });
    this._build();
    this._on("change:fields", () => this._buildForm());
    this._on("change:sections", () => this._buildForm());
    for (const name of TRAITS) this._on(`change:${name}`, () => this._refresh());
    this._on("change:error", () => this._error());
    this._on("change:monitor", () => this._showMonitor());
    this._on("change:preflight_report", () => this._preflight());
    this._buildForm();
    this._showMonitor();
    this._preflight();
  }

  /** The last pre-flight's report: one row per check, a pass or its problem and fix. */
  _preflight() {
    const report = this.model.get("preflight_report") || {};
    const checks = report.checks || [];
    this.preflightBox.hidden = !checks.length;
    this.preflightBox.replaceChildren(
      h("caption", { text: `Pre-flight: ${report.passed ? "pass" : "problems"}` }),
      ...checks.map((c) =>
        h("tr", { "data-testid": `preflight-${c.name}`, class: c.passed ? "nnx-pb-pass" : "nnx-pb-fail" }, [
          h("td", { text: c.passed ? "✓" : "✗" }),
          h("th", { text: c.name }),
          h("td", { text: c.passed ? "pass" : `${c.problem}${c.fix ? ` — ${c.fix}` : ""}` }),
        ]),
      ),
    );
  }

  _send(content) {
    this.model.send(content);
  }

  // ------------------------------------------------------------------ DOM

  _build() {
    this._makeRoot("nnx-plan-builder", "Experiment plan builder");
    this.runId = h("code", { class: "nnx-pb-run-id", "data-testid": "plan-run-id" });
    this.runState = h("span", { class: "nnx-pb-run-state", "data-testid": "plan-run-state" });
    this.runNote = h("span", { class: "nnx-pb-run-note", "data-testid": "plan-run-note" });
    const header = h("div", { class: "nnx-pb-header" }, [
      h("span", { class: "nnx-pb-title", text: "Experiment plan" }),
      h("span", { class: "nnx-pb-run" }, [h("span", { class: "nnx-label", text: "run id " }), this.runId, this.runState, this.runNote]),
    ]);
    this.problemBox = h("div", { class: "nnx-pb-problems", "data-testid": "plan-problems", role: "status" });
    this.objectsBox = h("ul", { class: "nnx-pb-objects", "data-testid": "objects" });
    this.form = h("div", { class: "nnx-pb-form", "data-testid": "form" });

    const button = (label, testid, fn, cls = "nnx-btn") => {
      const b = h("button", { type: "button", class: cls, "data-testid": testid, text: label });
      b.addEventListener("click", fn);
      return b;
    };
    this.fitButton = button("Fit", "fit", () => this._action("fit"), "nnx-btn nnx-btn-primary");
    this.processesInput = h("input", { type: "text", class: "nnx-input nnx-pb-processes", "data-testid": "processes", inputmode: "numeric", spellcheck: "false", autocomplete: "off", "aria-label": "Processes" });
    // sent when committed (Enter or leaving the box), not per keystroke: the kernel checks it
    this.processesInput.addEventListener("change", () => this._send({ kind: "set_processes", text: this.processesInput.value }));
    this.processesInput.addEventListener("keydown", (e) => {
      if (e.key === "Enter") this.processesInput.blur();
    });
    const processes = h("label", { class: "nnx-pb-processes-box", title: "1: train in the kernel; N > 1: launch N processes (nnx_lab.launch)" }, [h("span", { class: "nnx-label", text: "processes" }), this.processesInput]);
    this.processesError = h("div", { class: "nnx-pb-processes-error", "data-testid": "processes-error", role: "alert" });
    this.processesError.hidden = true;
    this.blockedNote = h("div", { class: "nnx-pb-blocked", "data-testid": "fit-blocked", role: "status" });
    this.blockedNote.hidden = true;
    this.branchName = h("input", { type: "text", class: "nnx-input nnx-pb-branch-name", "data-testid": "branch-name", placeholder: "branch name", "aria-label": "Branch name", maxlength: "40" });
    this.branchButton = button("Branch", "branch", () => this._branch());
    this.branchName.addEventListener("keydown", (e) => {
      if (e.key === "Enter") this._branch();
    });
    this.fitBranchesButton = button("Fit branches", "fit-branches", () => this._action("fit_branches"));
    this.preflightButton = button("Pre-flight", "preflight", () => this._action("preflight"));
    this.preflightButton.title = "Quick checks before a long fit: data, gradients, overfit one batch, LR sweep (nothing written)";
    this.preflightBox = h("table", { class: "nnx-pb-preflight", "data-testid": "preflight-report", "aria-label": "Pre-flight report" });
    this.preflightBox.hidden = true;
    this.resetButton = button("Reset", "reset", () => this._action("reset"));
    this.resetButton.title = "Back to the plan the builder started from (branches are kept)";
    const actions = h("div", { class: "nnx-pb-actions", role: "toolbar", "aria-label": "Plan actions" }, [
      this.fitButton,
      this.preflightButton,
      processes,
      h("span", { class: "nnx-pb-sep" }),
      this.branchName,
      this.branchButton,
      this.fitBranchesButton,
      h("span", { class: "nnx-spacer" }),
      this.resetButton,
    ]);
    this.branchBox = h("ul", { class: "nnx-pb-branches", "data-testid": "branches", "aria-label": "Branches" });
    this._makeError("plan-error");
    this.monitorSlot = h("div", { class: "nnx-pb-monitor", "data-testid": "monitor-slot" });
    this.root.append(header, this.problemBox, this.objectsBox, this.form, actions, this.blockedNote, this.processesError, this.preflightBox, this.branchBox, this.error, this.monitorSlot);
  }

  /** One input per field, in sections; rebuilt only when the fields themselves change. */
  _buildForm() {
    const fields = this.model.get("fields") || [];
    const sections = this.model.get("sections") || [];
    const key = JSON.stringify([fields.map((f) => [f.path, f.type, f.choices]), sections]);
    if (key === this._formKey) return;
    this._formKey = key;
    for (const t of this._pending.values()) clearTimeout(t);
    this._pending.clear();
    this.inputs.clear();
    const bySection = new Map();
    for (const s of sections) bySection.set(s.id, { ...s, fields: [] });
    for (const f of fields) {
      if (!bySection.has(f.section)) bySection.set(f.section, { id: f.section, title: f.section, open: true, fields: [] });
      bySection.get(f.section).fields.push(f);
    }
    const blocks = [];
    for (const s of bySection.values()) {
      if (!s.fields.length) continue;
      const grid = h("div", { class: "nnx-pb-grid" });
      for (const f of s.fields) grid.append(this._fieldRow(f));
      const box = h("details", { class: "nnx-pb-section", "data-section": s.id }, [h("summary", { text: s.title }), grid]);
      box.open = Boolean(s.open);
      blocks.push(box);
    }
    this.form.replaceChildren(...blocks);
    this._refresh();
  }

  _fieldRow(f) {
    const id = `nnx-pb-${Math.random().toString(36).slice(2)}-${f.path.replace(/\W/g, "-")}`;
    const kind = inputKind(f);
    let input;
    if (kind === "checkbox") {
      input = h("input", { type: "checkbox", id });
      input.addEventListener("change", () => this._send({ kind: "edit", path: f.path, value: input.checked }));
    } else if (kind === "select") {
      input = h("select", { id, class: "nnx-input" });
      for (const c of f.choices) input.append(h("option", { value: choiceKey(c), text: choiceLabel(c) }));
      input.addEventListener("change", () => {
        if (input.value === "__custom__") return;
        this._send({ kind: "edit", path: f.path, value: JSON.parse(input.value) });
      });
    } else {
      input = h("input", { type: "text", id, class: "nnx-input", spellcheck: "false", autocomplete: "off", placeholder: placeholder(f) });
      input.addEventListener("input", () => this._typed(f.path));
      input.addEventListener("blur", () => {
        this._flush(f.path);
        this._refresh();
      });
      input.addEventListener("keydown", (e) => {
        if (e.key === "Enter") this._flush(f.path);
      });
    }
    input.dataset.testid = `field-${f.path}`;
    input.setAttribute("aria-describedby", `${id}-error`);
    const error = h("div", { class: "nnx-pb-error", id: `${id}-error`, "data-testid": `error-${f.path}`, role: "alert" });
    const label = h("label", { for: id, text: f.label, title: fieldTitle(f) });
    if (f.in_run_id) label.append(h("span", { class: "nnx-pb-id-mark", title: "changes the run id", text: " #" }));
    const row = h("div", { class: "nnx-pb-field", "data-path": f.path, "data-kind": kind }, [label, input, error]);
    this.inputs.set(f.path, { field: f, row, input, error });
    return row;
  }

  // ------------------------------------------------------------------ editing

  _typed(path) {
    const entry = this.inputs.get(path);
    if (!entry) return;
    entry.row.dataset.state = "pending";
    clearTimeout(this._pending.get(path));
    this._pending.set(
      path,
      setTimeout(() => this._flush(path), this.debounceMs),
    );
  }

  /** Send what was typed into `path` now (the typing rested, Enter, or the field lost focus). */
  _flush(path) {
    if (!this._pending.has(path)) return;
    clearTimeout(this._pending.get(path));
    this._pending.delete(path);
    const entry = this.inputs.get(path);
    if (!entry) return;
    this._send({ kind: "edit", path, text: entry.input.value });
  }

  _action(kind) {
    // edits still waiting go first: Fit fits what the form shows
    for (const path of [...this._pending.keys()]) this._flush(path);
    this._send({ kind });
  }

  _branch() {
    if (this.branchButton.disabled) return; // Enter in the name box: the button's reason holds
    for (const path of [...this._pending.keys()]) this._flush(path);
    this._send({ kind: "branch", name: this.branchName.value.trim() || null });
    this.branchName.value = "";
  }

  // ------------------------------------------------------------------ kernel -> form

  _refresh() {
    const m = this.model;
    const values = m.get("values") || {};
    const drafts = m.get("drafts") || {};
    const errors = m.get("errors") || {};
    const set = new Set(m.get("set_paths") || []);
    const problems = m.get("problems") || [];
    const byField = new Map(problems.map((p) => [p.field, p]));
    const active = typeof document !== "undefined" ? document.activeElement : null;
    for (const [path, { field, row, input, error }] of this.inputs) {
      const draft = Object.prototype.hasOwnProperty.call(drafts, path) ? drafts[path] : undefined;
      const value = values[path];
      const kind = inputKind(field);
      if (kind === "checkbox") input.checked = Boolean(value);
      else if (kind === "select") this._select(input, field, value);
      // a field being typed in keeps its text; it takes the kernel's when left
      else if (!this._pending.has(path) && input !== active) input.value = draft !== undefined ? draft : valueText(field, value);
      const message = errors[path] || (byField.has(path) ? byField.get(path).text : "");
      error.textContent = message;
      error.hidden = !message;
      if (!this._pending.has(path)) row.dataset.state = errors[path] ? "refused" : message ? "problem" : "ok";
      input.setAttribute("aria-invalid", message ? "true" : "false");
      row.classList.toggle("nnx-pb-default", !set.has(path));
      const off = isOff(field, values);
      input.disabled = off;
      row.classList.toggle("nnx-pb-off", off);
    }
    // problems of the plan that belong to no field of the form (data, callbacks)
    const loose = problems.filter((p) => !this.inputs.has(p.field));
    this.problemBox.replaceChildren(...loose.map((p) => h("div", { class: "nnx-pb-problem", "data-field": p.field, text: p.text })));
    this.problemBox.hidden = loose.length === 0;
    const objects = m.get("objects") || [];
    this.objectsBox.replaceChildren(...objects.map((o) => h("li", {}, [h("code", { text: o.what }), ` ${o.description}`])));
    this.objectsBox.hidden = objects.length === 0;
    this._runLine();
    this._actions(problems);
    this._branches();
  }

  _select(input, field, value) {
    const key = choiceKey(value);
    const known = [...input.options].some((o) => o.value === key);
    let custom = input.querySelector('option[value="__custom__"]');
    if (!known && field.custom_allowed && value !== null && value !== undefined) {
      if (!custom) {
        custom = h("option", { value: "__custom__" });
        input.append(custom);
      }
      custom.textContent = `custom: ${valueText(field, value)}`;
      input.value = "__custom__";
      return;
    }
    if (custom) custom.remove();
    input.value = key;
  }

  _runLine() {
    const m = this.model;
    const state = m.get("run_state") || "pending";
    const id = m.get("run_id") || "";
    this.runId.textContent = id || "–";
    this.runId.title = id;
    this.runState.textContent = m.get("run_exists") ? `exists (${m.get("run_exists")})` : state === "ready" ? "new" : state === "large" ? "at Fit" : state;
    this.runState.dataset.state = m.get("run_exists") ? "exists" : state;
    this.runNote.textContent = m.get("run_note") || "";
  }

  /**
   * The fields that show a refused value (the kernel's `errors`, and the processes box):
   * the plan still holds their last valid value, which the form no longer shows.
   * @returns {string[]} their labels
   */
  _refusedFields() {
    const errors = this.model.get("errors") || {};
    const labels = Object.keys(errors).map((path) => {
      const entry = this.inputs.get(path);
      return entry ? `${entry.field.label} (${path})` : path;
    });
    if (this.model.get("processes_error")) labels.push("processes");
    return labels;
  }

  _actions(problems) {
    const busy = this.model.get("busy") || "";
    const branches = this.model.get("branch_list") || [];
    const n = problems.length;
    const nproc = Number(this.model.get("processes")) || 1;
    const refused = this._refusedFields();
    // While a field is refused, what takes the form's plan would use a value the form
    // does not show: Fit, Fit branches and Branch wait, and say for which field.
    const blocked = refused.length
      ? `${refused.join(", ")} ${refused.length === 1 ? "shows" : "show"} a refused value: fix ${refused.length === 1 ? "it" : "them"} first (the plan still holds the last valid value)`
      : "";
    const running = "A fit is running: Stop it in the monitor below";
    this.fitButton.disabled = Boolean(busy) || Boolean(blocked) || n > 0;
    this.fitButton.title = busy
      ? running
      : blocked
        ? `Fit waits: ${blocked}`
        : n
          ? `Fix the ${n} problem${n === 1 ? "" : "s"} first`
          : nproc > 1
            ? `Launch this plan as ${nproc} processes (nnx_lab.launch; the monitor below follows the run, its Stop stops them)`
            : "Fit this plan (in the background; Stop in the monitor below)";
    this.fitButton.textContent = nproc > 1 ? `Fit × ${nproc}` : "Fit";
    this.fitBranchesButton.disabled = Boolean(busy) || Boolean(blocked) || branches.length === 0 || nproc > 1;
    this.fitBranchesButton.title = busy
      ? running
      : blocked
        ? `Fit branches waits: ${blocked}`
        : nproc > 1
          ? "Branches race in the kernel: set processes to 1"
          : branches.length
            ? `Fit the ${branches.length} branches one after another, on top of each other`
            : "Keep the plan as a branch first (Branch)";
    this.branchButton.disabled = Boolean(blocked);
    this.branchButton.title = blocked ? `Branch waits: ${blocked}` : "Keep the current plan as a named variant";
    // the reason in words too: a disabled button's tooltip is easy to miss
    this.blockedNote.textContent = blocked ? `Fit waits: ${blocked}.` : "";
    this.blockedNote.hidden = !blocked;
    // the box shows the kernel's value unless it is being typed in or was refused
    const boxRefused = this.model.get("processes_error") || "";
    const active = typeof document !== "undefined" ? document.activeElement : null;
    if (this.processesInput !== active && !boxRefused) this.processesInput.value = String(nproc);
    this.processesInput.disabled = Boolean(busy);
    this.processesInput.setAttribute("aria-invalid", boxRefused ? "true" : "false");
    this.processesError.textContent = boxRefused;
    this.processesError.hidden = !boxRefused;
    this.root.dataset.busy = busy;
    this.root.dataset.blocked = blocked ? "true" : "false";
  }

  _branches() {
    const rows = this.model.get("branch_list") || [];
    this.branchBox.replaceChildren(
      ...rows.map((b) => {
        const changes = b.changes.length ? b.changes.map((c) => `${c.path.split(".").pop()} ${shortValue(c.value)}`).join(", ") : "as started";
        const load = h("button", { type: "button", class: "nnx-pb-chip-button", "data-testid": "load-branch", title: "Show this branch in the form", text: b.name });
        load.addEventListener("click", () => this._send({ kind: "load_branch", name: b.name }));
        const drop = h("button", { type: "button", class: "nnx-pb-chip-button", "data-testid": "drop-branch", title: `Drop ${b.name}`, "aria-label": `Drop ${b.name}`, text: "×" });
        drop.addEventListener("click", () => this._send({ kind: "drop_branch", name: b.name }));
        const item = h("li", { class: "nnx-pb-chip", "data-branch": b.name, title: b.changes.map((c) => `${c.path} = ${JSON.stringify(c.value)}`).join("\n") }, [
          load,
          h("span", { class: "nnx-pb-changes", text: changes }),
          ...(b.problems ? [h("span", { class: "nnx-pb-chip-problems", text: `${b.problems} problem${b.problems === 1 ? "" : "s"}` })] : []),
          drop,
        ]);
        if (b.current) item.dataset.current = "true";
        return item;
      }),
    );
    this.branchBox.hidden = rows.length === 0;
  }

  // ------------------------------------------------------------------ the monitor

  /** Draw the builder's TrainingMonitor (a child widget) under the form. */
  async _showMonitor() {
    const ref = this.model.get("monitor");
    if (ref === this._monitorRef) return;
    this._monitorRef = ref;
    if (this._monitorAbort) this._monitorAbort.abort();
    this._monitorAbort = null;
    this.monitorSlot.replaceChildren();
    if (!ref) return;
    if (!this.host || typeof this.host.getWidget !== "function") {
      this.monitorSlot.textContent = "This front end cannot draw the monitor inside the builder: display builder.monitor in a cell.";
      return;
    }
    const controller = new AbortController();
    this._monitorAbort = controller;
    const signal = this.signal && typeof AbortSignal.any === "function" ? AbortSignal.any([this.signal, controller.signal]) : controller.signal;
    try {
      const child = await this.host.getWidget(ref);
      if (controller.signal.aborted || this._disposed) return;
      const box = h("div", { class: "nnx-pb-monitor-view" });
      this.monitorSlot.append(box);
      await child.render({ el: box, signal });
    } catch (err) {
      if (!controller.signal.aborted) this.monitorSlot.textContent = `nnx-lab: the monitor could not be drawn (${err && err.message ? err.message : err})`;
    }
  }
}
