// The PlanBuilder view: a form made from the field descriptions, debounced edits, the
// kernel's errors next to their field, the run id, the buttons, the monitor drawn inside.
import { afterEach, describe, expect, it, vi } from "vitest";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { boundText, fieldTitle, inputKind, limitText, valueText } from "../../js/plan_builder/fields.js";
import { PlanBuilderView } from "../../js/plan_builder/view.js";
import { builtWidget, byTestId, disposeView, fakeModel, settle, testHost } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => {
  view = disposeView(view);
  vi.useRealTimers();
});

function field(path, type, extra = {}) {
  const name = path.split(".").pop();
  return {
    path,
    section: path.startsWith("net.") ? "net" : "optim",
    name,
    label: name.replace(/_/g, " "),
    owner: `X.${name}`,
    type,
    default: null,
    required: false,
    nullable: false,
    choices: null,
    custom_allowed: false,
    in_run_id: true,
    toggle: null,
    ...extra,
  };
}

const FIELDS = [
  field("net.input_dim", "int", { required: true }),
  field("net.hidden_dims", "int_list", { default: [] }),
  field("train.optim.name", "choice", { choices: ["adam", "sgd"], default: "adam" }),
  field("train.optim.max_lr", "float", { default: 0.001 }),
  field("train.scheduler", "bool", { default: false, section: "scheduler" }),
  field("train.scheduler.patience", "int", { default: 10, section: "scheduler", toggle: "train.scheduler" }),
];

function builderModel(extra = {}) {
  return fakeModel({
    fields: FIELDS,
    sections: [
      { id: "net", title: "Network", open: true },
      { id: "optim", title: "Optimizer", open: true },
      { id: "scheduler", title: "Scheduler", open: false },
    ],
    values: { "net.input_dim": 8, "net.hidden_dims": [32, 16], "train.optim.name": "adam", "train.optim.max_lr": 0.001, "train.scheduler": false, "train.scheduler.patience": 10 },
    set_paths: ["net.input_dim", "net.hidden_dims"],
    drafts: {},
    errors: {},
    problems: [],
    objects: [{ what: "data.train", description: "factory toy.make, called once per fit", via: "with_data" }],
    run_id: "ab".repeat(16),
    run_state: "ready",
    run_note: "new: runs/abab",
    run_exists: "",
    branch_list: [],
    busy: "",
    processes: 1,
    processes_error: "",
    monitor: null,
    error: "",
    ...extra,
  });
}

const input = (path) => q(`field-${path}`);
const edits = (model) => model.sent.filter((m) => m.content.kind === "edit").map((m) => m.content);

describe("the form", () => {
  it("has one input per field, of the field's kind, in its section", () => {
    const model = builderModel();
    view = new PlanBuilderView(model, el);
    expect([...el.querySelectorAll(".nnx-pb-section")].map((s) => s.dataset.section)).toEqual(["net", "optim", "scheduler"]);
    for (const f of FIELDS) expect(input(f.path), f.path).not.toBeNull();
    expect(input("net.hidden_dims").value).toBe("32, 16");
    expect(input("train.optim.name").tagName).toBe("SELECT");
    expect(input("train.optim.name").value).toBe('"adam"');
    expect(input("train.scheduler").type).toBe("checkbox");
    expect(input("net.input_dim").closest(".nnx-pb-field").classList.contains("nnx-pb-default")).toBe(false);
    expect(input("train.optim.max_lr").closest(".nnx-pb-field").classList.contains("nnx-pb-default")).toBe(true);
    // a field whose section is switched off is disabled
    expect(input("train.scheduler.patience").disabled).toBe(true);
    expect(q("plan-run-id").textContent).toBe("ab".repeat(16));
    expect(q("plan-run-state").textContent).toBe("new");
    expect(q("objects").textContent).toContain("factory toy.make");
  });

  it("grows an input for a field the kernel adds, with no change to the view", () => {
    const model = builderModel();
    view = new PlanBuilderView(model, el);
    model.set("fields", [...FIELDS, field("train.optim.warmup_steps", "int", { default: 0 })]);
    const added = input("train.optim.warmup_steps");
    expect(added).not.toBeNull();
    expect(added.placeholder).toBe("default 0");
    expect(added.closest(".nnx-pb-section").dataset.section).toBe("optim");
  });

  it("sends what is typed once the typing rests, and at once on Enter", () => {
    vi.useFakeTimers();
    const model = builderModel();
    view = new PlanBuilderView(model, el);
    const lr = input("train.optim.max_lr");
    for (const text of ["0", "0.", "0.0", "0.01"]) {
      lr.value = text;
      lr.dispatchEvent(new Event("input"));
      vi.advanceTimersByTime(100);
    }
    expect(edits(model)).toEqual([]); // still typing
    expect(lr.closest(".nnx-pb-field").dataset.state).toBe("pending");
    vi.advanceTimersByTime(400);
    expect(edits(model)).toEqual([{ kind: "edit", path: "train.optim.max_lr", text: "0.01" }]);
    lr.value = "0.02";
    lr.dispatchEvent(new Event("input"));
    lr.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
    expect(edits(model).at(-1)).toEqual({ kind: "edit", path: "train.optim.max_lr", text: "0.02" });
    vi.advanceTimersByTime(1000);
    expect(edits(model)).toHaveLength(2); // nothing sent twice
  });

  it("sends a select's and a checkbox's value at once", () => {
    const model = builderModel();
    view = new PlanBuilderView(model, el);
    const name = input("train.optim.name");
    name.value = '"sgd"';
    name.dispatchEvent(new Event("change"));
    const sched = input("train.scheduler");
    sched.checked = true;
    sched.dispatchEvent(new Event("change"));
    expect(edits(model)).toEqual([
      { kind: "edit", path: "train.optim.name", value: "sgd" },
      { kind: "edit", path: "train.scheduler", value: true },
    ]);
  });

  it("shows a refused value as typed, with the kernel's message next to it", () => {
    const model = builderModel();
    view = new PlanBuilderView(model, el);
    const msg = "train.optim.max_lr='abc': pass a learning rate > 0";
    model.set("drafts", { "train.optim.max_lr": "abc" });
    model.set("errors", { "train.optim.max_lr": msg });
    const row = input("train.optim.max_lr").closest(".nnx-pb-field");
    expect(input("train.optim.max_lr").value).toBe("abc");
    expect(q("error-train.optim.max_lr").textContent).toBe(msg);
    expect(q("error-train.optim.max_lr").hidden).toBe(false);
    expect(row.dataset.state).toBe("refused");
    expect(input("train.optim.max_lr").getAttribute("aria-invalid")).toBe("true");
    // the kernel accepted a new value: the message goes, the field shows the value
    model.set("errors", {});
    model.set("drafts", {});
    model.set("values", { ...model.get("values"), "train.optim.max_lr": 0.01 });
    expect(input("train.optim.max_lr").value).toBe("0.01");
    expect(q("error-train.optim.max_lr").hidden).toBe(true);
    expect(row.dataset.state).toBe("ok");
  });

  it("keeps a field's text while it is typed in, and shows the plan's problems by field", () => {
    const model = builderModel();
    view = new PlanBuilderView(model, el);
    const lr = input("train.optim.max_lr");
    lr.focus();
    lr.value = "0.0";
    lr.dispatchEvent(new Event("input"));
    model.set("values", { ...model.get("values"), "train.optim.max_lr": 0.5 }); // from Python
    expect(lr.value).toBe("0.0");
    model.set("problems", [
      { field: "net.input_dim", value: null, fix: "set it", text: "net.input_dim=None: set it" },
      { field: "data.train", value: null, fix: "give the data", text: "data.train=None: give the data" },
    ]);
    expect(q("error-net.input_dim").textContent).toBe("net.input_dim=None: set it");
    expect(q("plan-problems").textContent).toBe("data.train=None: give the data"); // no field for it
    expect(q("fit").disabled).toBe(true);
    expect(q("fit").title).toBe("Fix the 2 problems first");
  });
});

describe("the buttons", () => {
  it("send Fit, Branch (with its name), Fit branches and Reset, edits first", () => {
    vi.useFakeTimers();
    const model = builderModel({ branch_list: [{ name: "fast", changes: [{ path: "train.optim.max_lr", value: 0.01 }], problems: 0, current: false }] });
    view = new PlanBuilderView(model, el);
    const lr = input("train.optim.max_lr");
    lr.value = "0.3";
    lr.dispatchEvent(new Event("input"));
    q("fit").click();
    expect(model.sent.map((m) => m.content.kind)).toEqual(["edit", "fit"]);
    q("branch-name").value = " slow ";
    q("branch").click();
    expect(model.sent.at(-1).content).toEqual({ kind: "branch", name: "slow" });
    expect(q("branch-name").value).toBe("");
    q("branch").click();
    expect(model.sent.at(-1).content).toEqual({ kind: "branch", name: null });
    q("fit-branches").click();
    q("reset").click();
    expect(model.sent.slice(-2).map((m) => m.content.kind)).toEqual(["fit_branches", "reset"]);
    const chip = el.querySelector('[data-branch="fast"]');
    expect(chip.textContent).toContain("max_lr 0.01");
    chip.querySelector('[data-testid="load-branch"]').click();
    chip.querySelector('[data-testid="drop-branch"]').click();
    expect(model.sent.slice(-2).map((m) => m.content)).toEqual([
      { kind: "load_branch", name: "fast" },
      { kind: "drop_branch", name: "fast" },
    ]);
  });

  it("are off while a fit runs, and Fit branches without branches", () => {
    const model = builderModel();
    view = new PlanBuilderView(model, el);
    expect(q("fit").disabled).toBe(false);
    expect(q("fit-branches").disabled).toBe(true);
    model.set("busy", "fit");
    expect(q("fit").disabled).toBe(true);
    expect(q("fit").title).toMatch(/Stop it in the monitor/);
  });

  it("shows the run that exists and the kernel's error", () => {
    const model = builderModel();
    view = new PlanBuilderView(model, el);
    model.set("run_exists", "finished");
    expect(q("plan-run-state").textContent).toBe("exists (finished)");
    expect(q("plan-run-state").dataset.state).toBe("exists");
    model.set("error", "FileExistsError: run abab exists already");
    expect(q("plan-error").hidden).toBe(false);
    expect(q("plan-error").textContent).toBe("FileExistsError: run abab exists already");
  });
});

describe("a refused field", () => {
  const LR_MSG = "train.optim.max_lr=-1.0: pass a learning rate > 0 that float32 can hold (<= 3.4e38), e.g. 1e-3";
  const refuse = (model) => {
    model.set("drafts", { "train.optim.max_lr": "-1" });
    model.set("errors", { "train.optim.max_lr": LR_MSG });
  };

  it("turns Fit, Fit branches and Branch off, naming the field, until it is fixed", () => {
    const model = builderModel({ branch_list: [{ name: "fast", changes: [], problems: 0, current: false }] });
    view = new PlanBuilderView(model, el);
    expect([q("fit").disabled, q("fit-branches").disabled, q("branch").disabled]).toEqual([false, false, false]);
    expect(q("fit-blocked").hidden).toBe(true);
    refuse(model);
    expect(input("train.optim.max_lr").value).toBe("-1"); // the form shows what was refused
    expect([q("fit").disabled, q("fit-branches").disabled, q("branch").disabled]).toEqual([true, true, true]);
    const why = "max lr (train.optim.max_lr) shows a refused value: fix it first (the plan still holds the last valid value)";
    expect(q("fit").title).toBe(`Fit waits: ${why}`);
    expect(q("fit-branches").title).toBe(`Fit branches waits: ${why}`);
    expect(q("branch").title).toBe(`Branch waits: ${why}`);
    // said in words under the buttons too (a disabled button's tooltip is easy to miss)
    expect(q("fit-blocked").hidden).toBe(false);
    expect(q("fit-blocked").textContent).toBe(`Fit waits: ${why}.`);
    expect(el.querySelector(".nnx-plan-builder").dataset.blocked).toBe("true");
    // Enter in the branch name keeps nothing either
    q("branch-name").value = "new";
    q("branch-name").dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
    expect(model.sent.filter((m) => m.content.kind === "branch")).toEqual([]);
    // the kernel accepts a fixed value: everything is back
    model.set("errors", {});
    model.set("drafts", {});
    expect([q("fit").disabled, q("fit-branches").disabled, q("branch").disabled]).toEqual([false, false, false]);
    expect(q("fit-blocked").hidden).toBe(true);
    expect(q("fit").title).toMatch(/^Fit this plan/);
  });

  it("names every refused field, the processes box included", () => {
    const model = builderModel();
    view = new PlanBuilderView(model, el);
    refuse(model);
    model.set("errors", { ...model.get("errors"), "net.hidden_dims": "net.hidden_dims=[30000000]: each value at most 65,536 in this form" });
    model.set("processes_error", "processes='x': type a whole number");
    expect(q("fit").disabled).toBe(true);
    expect(q("fit-blocked").textContent).toBe(
      "Fit waits: max lr (train.optim.max_lr), hidden dims (net.hidden_dims), processes show a refused value: fix them first (the plan still holds the last valid value).",
    );
  });

  it("is drawn in the theme's error colours, its text in the theme's own", () => {
    const css = readFileSync(resolve("js/plan_builder/plan_builder.css"), "utf8");
    const theme = readFileSync(resolve("js/shared/theme.css"), "utf8");
    const rule = css.match(/\.nnx-pb-field\[data-state="refused"\] input[^{]*\{([^}]*)\}/);
    expect(rule).not.toBeNull();
    expect(rule[1]).toMatch(/background: var\(--nnx-bad-bg\)/);
    expect(rule[1]).toMatch(/color: var\(--nnx-fg\)/);
    expect(rule[1]).toMatch(/border-color: var\(--nnx-bad\)/);
    // the tint JupyterLab gives error outputs, dark in the dark theme: not --jp-error-color3,
    // which is light pink in both themes (white text on it in the dark one)
    expect(theme).toMatch(/--nnx-bad-bg: var\(--jp-rendermime-error-background, #[0-9a-f]+\);/);
    expect(theme).not.toMatch(/--nnx-bad-bg: var\(--jp-error-color3/);
  });

  it("shows a field's range and the form's own limit in its tooltip", () => {
    const bound = { low: 1, high: 2 ** 53 - 1, low_open: false, high_open: false, form_high: 100000, form_items: null, text: "1 to 2**53 - 1" };
    const f = field("train.n_epochs", "int", { bound });
    expect(boundText(f)).toBe("1 to 2**53 - 1; at most 100,000 in this form");
    expect(fieldTitle(f)).toBe("train.n_epochs (X.n_epochs); changes the run id; 1 to 2**53 - 1; at most 100,000 in this form");
    expect(boundText(field("net.hidden_dims", "int_list", { bound: { ...bound, form_high: 65536, form_items: 64 } }))).toBe(
      "1 to 2**53 - 1; at most 65,536 in this form; at most 64 items in this form",
    );
    expect(limitText(3.4028234663852886e38)).toBe("3.4e38");
    expect(fieldTitle(field("model.loss", "choice"))).toBe("model.loss (X.loss); changes the run id");
  });

  it("a network too large to preview says its id comes at Fit", () => {
    const model = builderModel();
    view = new PlanBuilderView(model, el);
    model.set("run_id", "");
    model.set("run_state", "large");
    model.set("run_note", "the network has 360,000,003 parameters: its run id ... is computed when Fit starts");
    expect(q("plan-run-state").textContent).toBe("at Fit");
    expect(q("plan-run-state").dataset.state).toBe("large");
    expect(q("plan-run-id").textContent).toBe("–");
    expect(q("fit").disabled).toBe(false);
  });
});

describe("the processes setting", () => {
  it("sends a committed number of processes, and Fit then says it launches them", () => {
    const model = builderModel({ branch_list: [{ name: "fast", changes: [], problems: 0, current: false }] });
    view = new PlanBuilderView(model, el);
    const box = q("processes");
    expect(box.value).toBe("1");
    expect(q("fit").textContent).toBe("Fit");
    expect(q("fit-branches").disabled).toBe(false);
    box.value = "2";
    box.dispatchEvent(new Event("input"));
    expect(model.sent).toEqual([]); // not per keystroke
    box.dispatchEvent(new Event("change"));
    expect(model.sent.map((m) => m.content)).toEqual([{ kind: "set_processes", text: "2" }]);
    // the kernel accepts it
    model.set("processes", 2);
    expect(box.value).toBe("2");
    expect(q("fit").textContent).toBe("Fit × 2");
    expect(q("fit").title).toMatch(/Launch this plan as 2 processes/);
    expect(q("fit-branches").disabled).toBe(true);
    expect(q("fit-branches").title).toMatch(/set processes to 1/);
    q("fit").click();
    expect(model.sent.at(-1).content.kind).toBe("fit");
  });

  it("shows a refusal beside the box, keeps the text, and takes the kernel's value once fixed", () => {
    const model = builderModel();
    view = new PlanBuilderView(model, el);
    const box = q("processes");
    expect(q("processes-error").hidden).toBe(true);
    box.value = "0";
    box.dispatchEvent(new Event("change"));
    expect(model.sent.at(-1).content).toEqual({ kind: "set_processes", text: "0" });
    const message = "processes=0: pass 1 (train in the kernel) or 2 to 64";
    model.set("processes_error", message);
    expect(q("processes-error").hidden).toBe(false);
    expect(q("processes-error").textContent).toBe(message);
    expect(box.getAttribute("aria-invalid")).toBe("true");
    expect(box.value).toBe("0"); // the refused text stays to be fixed
    expect(q("fit").textContent).toBe("Fit"); // the kernel kept 1
    model.set("processes", 3);
    model.set("processes_error", "");
    expect(q("processes-error").hidden).toBe(true);
    expect(box.value).toBe("3");
    expect(box.getAttribute("aria-invalid")).toBe("false");
  });

  it("is off while a run of the builder trains", () => {
    const model = builderModel();
    view = new PlanBuilderView(model, el);
    model.set("busy", "launch");
    expect(q("processes").disabled).toBe(true);
    model.set("busy", "");
    expect(q("processes").disabled).toBe(false);
  });
});

describe("the monitor inside the builder", () => {
  it("draws the child widget the kernel names, and a new one in its place", async () => {
    const rendered = [];
    const host = {
      async getWidget(ref) {
        return {
          async render({ el: box, signal }) {
            box.append(Object.assign(document.createElement("div"), { className: "child", textContent: ref }));
            rendered.push({ ref, signal });
          },
        };
      },
    };
    const model = builderModel();
    view = new PlanBuilderView(model, el, { host });
    expect(q("monitor-slot").children).toHaveLength(0);
    model.set("monitor", "anywidget:m1");
    await settle();
    expect(q("monitor-slot").querySelector(".child").textContent).toBe("anywidget:m1");
    model.set("monitor", "anywidget:m2");
    await settle();
    expect([...q("monitor-slot").querySelectorAll(".child")].map((c) => c.textContent)).toEqual(["anywidget:m2"]);
    expect(rendered[0].signal.aborted).toBe(true); // the first view was let go
    view.dispose();
    expect(rendered[1].signal.aborted).toBe(true);
  });

  it("says so where the front end cannot draw a child widget", async () => {
    const model = builderModel({ monitor: "anywidget:m1" });
    view = new PlanBuilderView(model, el, {});
    await settle();
    expect(q("monitor-slot").textContent).toMatch(/display builder.monitor/);
  });
});

describe("field helpers", () => {
  it("pick the input and the text of a value from the description alone", () => {
    expect(inputKind({ type: "bool" })).toBe("checkbox");
    expect(inputKind({ type: "str", choices: ["last", "best"] })).toBe("select");
    expect(inputKind({ type: "any", choices: null })).toBe("text");
    expect(valueText({ type: "any" }, [0.9, 0.999])).toBe("[0.9,0.999]");
    expect(valueText({ type: "float" }, null)).toBe("");
  });
});

describe("built plan_builder bundle", () => {
  it("exports only a default widget object with render, and cleans up", async () => {
    const widget = await builtWidget("plan_builder");
    const model = builderModel();
    const cleanup = widget.render({ model, el });
    expect(el.querySelector(".nnx-plan-builder")).not.toBeNull();
    cleanup();
    expect(el.querySelector(".nnx-plan-builder")).toBeNull();
    expect(model.listenerCount()).toBe(0);
  });
});

describe("PlanBuilder view: pre-flight", () => {
  it("the button asks the kernel; the report shows a row per check with its problem", async () => {
    const model = builderModel({ preflight_report: {} });
    view = new PlanBuilderView(model, el);
    await settle();
    expect(q("preflight-report").hidden).toBe(true);
    q("preflight").click();
    expect(model.sent.map((m) => m.content.kind)).toEqual(["preflight"]);
    model.set("preflight_report", {
      passed: false,
      checks: [
        { name: "data", passed: true, problem: null, fix: null, details: {} },
        { name: "gradients", passed: false, problem: "layers.3.weight are frozen (requires_grad=False)", fix: "unfreeze it", details: {} },
      ],
    });
    await settle();
    expect(q("preflight-report").hidden).toBe(false);
    expect(q("preflight-data").textContent).toContain("pass");
    expect(q("preflight-gradients").textContent).toBe("✗gradientslayers.3.weight are frozen (requires_grad=False) — unfreeze it");
  });
});
