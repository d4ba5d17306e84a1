// The DriftReport view: the engine's report side by side, changed rows highlighted,
// id-changing rows marked, "changed only", updates when the kernel sends a new report.
import { afterEach, describe, expect, it } from "vitest";
import { DriftView, cellText, idWord } from "../../js/drift/view.js";
import { builtWidget, byTestId, disposeView, fakeModel, testHost } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => (view = disposeView(view)));

function row(what, then, now, extra = {}) {
  const changed = JSON.stringify(then) !== JSON.stringify(now);
  return {
    what,
    then,
    now,
    then_absent: false,
    now_absent: false,
    changed,
    changes_run_id: true,
    action: changed ? "a new run" : "nothing",
    kind: "value",
    note: "",
    ...extra,
  };
}

function report(rows) {
  return { rows, limits: ["Only the named functions are fingerprinted."], labels: ["A", "B"], sides: ["run 26c54297", "plan"], handle: "pair" };
}

const ROWS = [
  row("net.hidden_dims", [16], [16]),
  row("train.optim.max_lr", 0.001, 0.02),
  row("train.log_every", 50, 10, { changes_run_id: false, action: "nothing: does not affect results", note: "a run knob" }),
  row("code data.train", "toy.make @1a2b", null, { now_absent: true, changes_run_id: null, kind: "code", action: "rebuild the plan" }),
];

function driftModel(extra = {}) {
  return fakeModel({ data: report(ROWS), changed_only: false, side_names: ["run 26c54297", "the plan of a PlanBuilder (followed)"], waiting: "", version: 1, error: "", ...extra });
}

const rows = () => [...q("drift-table").querySelectorAll("tbody tr")];

describe("DriftReport view", () => {
  it("draws every row side by side, the changed ones highlighted and the id-changing ones marked", () => {
    view = new DriftView(driftModel(), el);
    expect([...q("drift-table").querySelectorAll("th")].map((t) => t.textContent)).toEqual(["what", "A", "B", "run id", "what to do"]);
    expect(rows().map((r) => [r.dataset.what, r.dataset.changed, r.dataset.changesId])).toEqual([
      ["net.hidden_dims", "false", "same"],
      ["train.optim.max_lr", "true", "changes"],
      ["train.log_every", "true", "same"],
      ["code data.train", "true", "depends"],
    ]);
    const lr = rows()[1];
    expect(lr.classList.contains("nnx-dr-changed")).toBe(true);
    expect(lr.classList.contains("nnx-dr-changes-id")).toBe(true);
    expect([...lr.children].map((c) => c.textContent)).toEqual(["● train.optim.max_lr", "0.001", "0.02", "changes", "a new run"]);
    expect(rows()[2].classList.contains("nnx-dr-changes-id")).toBe(false);
    expect(rows()[2].querySelector(".nnx-dr-note").textContent).toBe("a run knob");
    expect(rows()[3].children[2].textContent).toBe("–"); // absent on that side
    expect(q("counts").textContent).toBe("3 of 4 rows differ; 1 changes the run id");
    expect(q("sides").textContent).toContain("A = run 26c54297");
    expect(q("sides").textContent).toContain("(the plan of a PlanBuilder (followed))");
    expect(q("limits").textContent).toBe("Only the named functions are fingerprinted.");
  });

  it("filters to the changed rows and writes the filter to the kernel", () => {
    const model = driftModel();
    view = new DriftView(model, el);
    q("changed-only").checked = true;
    q("changed-only").dispatchEvent(new Event("change"));
    expect(model.get("changed_only")).toBe(true);
    expect(model.saves).toBe(1);
    expect(rows().map((r) => r.dataset.what)).toEqual(["train.optim.max_lr", "train.log_every", "code data.train"]);
    model.set("changed_only", false); // e.g. set from Python
    expect(q("changed-only").checked).toBe(false);
    expect(rows()).toHaveLength(4);
  });

  it("marks the rows that moved when a new report comes", () => {
    const model = driftModel();
    view = new DriftView(model, el);
    expect(el.querySelectorAll(".nnx-dr-moved")).toHaveLength(0);
    const next = ROWS.map((r) => (r.what === "net.hidden_dims" ? row("net.hidden_dims", [16], [32, 16]) : r));
    model.set("data", report(next));
    model.set("version", 2);
    expect(rows()[0].dataset.changed).toBe("true");
    expect([...el.querySelectorAll(".nnx-dr-moved")].map((r) => r.dataset.what)).toEqual(["net.hidden_dims"]);
    expect(q("counts").textContent).toBe("4 of 4 rows differ; 2 change the run id");
  });

  it("says when nothing differs, when it waits, and shows the kernel's error", () => {
    const model = driftModel({ changed_only: true, data: report([row("a", 1, 1)]) });
    view = new DriftView(model, el);
    expect(q("empty").textContent).toBe("Nothing differs.");
    expect(q("drift-table").hidden).toBe(true);
    model.set("waiting", "waiting for run 3fa2c1de to end (running)");
    expect(q("waiting").hidden).toBe(false);
    model.set("error", "FileNotFoundError: no run");
    expect(q("error").textContent).toBe("FileNotFoundError: no run");
  });

  it("formats values and run-id words", () => {
    expect(cellText([32, 16], false)).toBe("[32,16]");
    expect(cellText(null, false)).toBe("null");
    expect(cellText(5, true)).toBe("–");
    expect([idWord(true), idWord(false), idWord(null)]).toEqual(["changes", "same", "depends"]);
  });
});

describe("built drift bundle", () => {
  it("exports only a default widget object with render, and cleans up", async () => {
    const widget = await builtWidget("drift");
    const model = driftModel();
    const cleanup = widget.render({ model, el });
    expect(el.querySelectorAll('[data-testid="drift-table"] tbody tr')).toHaveLength(4);
    cleanup();
    expect(el.querySelector(".nnx-drift")).toBeNull();
    expect(model.listenerCount()).toBe(0);
  });
});
