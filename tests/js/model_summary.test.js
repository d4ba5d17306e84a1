// The ModelSummary view: the engine's module tree as a table; folding, search, the
// per-row extra columns, and the built bundle.
import { afterEach, describe, expect, it } from "vitest";
import { ModelSummaryView, bytesText, parentOf, shapeText, visibleRows } from "../../js/model_summary/view.js";
import { builtWidget, byTestId, disposeView, fakeModel, testHost } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => (view = disposeView(view)));

function row(path, type, params, extra = {}) {
  const depth = path === "" ? 0 : path.split(".").length;
  return {
    path,
    name: path.split(".").pop(),
    depth,
    type,
    own_params: 0,
    params,
    trainable: params,
    frozen: 0,
    state: params ? "trainable" : "",
    dtypes: params ? ["float32"] : [],
    devices: params ? ["cpu"] : [],
    has_children: false,
    output_shape: null,
    columns: {},
    ...extra,
  };
}

const ROWS = [
  row("", "ConvNN", 120, { has_children: true, output_shape: [2, 10] }),
  row("features", "Sequential", 40, { has_children: true, output_shape: [2, 8, 2, 2] }),
  row("features.0", "Conv2d", 40, { frozen: 40, trainable: 0, state: "frozen", output_shape: [2, 4, 8, 8] }),
  row("features.1", "ReLU", 0, { output_shape: [2, 4, 8, 8] }),
  row("head", "Sequential", 80, { has_children: true, output_shape: [2, 10] }),
  row("head.0", "Linear", 80, { output_shape: [2, 10], columns: { rule: "lora" } }),
];
const TOTALS = { params: 120, trainable: 80, frozen: 40, param_bytes: 480, buffer_bytes: 0, grad_bytes: 320, optimizer_bytes: 640, optimizer: "adam", total_bytes: 1440, modules: 6 };

function summaryModel(extra = {}) {
  return fakeModel({ data: { rows: ROWS, totals: TOTALS, input_shape: [2, 1, 8, 8], notes: [] }, query: "", collapsed: [], version: 1, error: "", ...extra });
}

const paths = () => [...q("summary-table").querySelectorAll("tbody tr")].map((r) => r.dataset.path);

describe("ModelSummary helpers", () => {
  it("formats shapes and bytes, and finds parents", () => {
    expect(shapeText([2, 4, 8, 8])).toBe("(2, 4, 8, 8)");
    expect(shapeText([[4, 2], [4, 3]])).toBe("(4, 2), (4, 3)");
    expect(shapeText(null)).toBe("");
    expect(bytesText(512)).toBe("512 B");
    expect(bytesText(1536)).toBe("1.5 KiB");
    expect(parentOf("")).toBe(null);
    expect(parentOf("head")).toBe("");
    expect(parentOf("head.0.weight")).toBe("head.0");
  });

  it("hides folded subtrees and keeps a search's matches with their ancestors", () => {
    expect(visibleRows(ROWS, ["features"], "").map((v) => v.row.path)).toEqual(["", "features", "head", "head.0"]);
    const found = visibleRows(ROWS, ["features"], "conv2d");
    expect(found.map((v) => [v.row.path, v.match])).toEqual([
      ["", false],
      ["features", false],
      ["features.0", true],
    ]);
  });
});

describe("ModelSummary view", () => {
  it("draws the tree with its counts, states, shapes and the extra columns", () => {
    view = new ModelSummaryView(summaryModel(), el);
    const heads = [...q("summary-table").querySelectorAll("th")].map((t) => t.textContent);
    expect(heads).toEqual(["layer", "type", "params", "trainable", "frozen", "state", "dtype", "device", "output", "rule"]);
    expect(paths()).toEqual(["", "features", "features.0", "features.1", "head", "head.0"]);
    const conv = q("summary-table").querySelector('tr[data-path="features.0"]');
    expect(conv.dataset.state).toBe("frozen");
    expect(conv.querySelector('[data-testid="shape"]').textContent).toBe("(2, 4, 8, 8)");
    expect(q("totals").textContent).toContain("120 parameters: 80 trainable, 40 frozen");
    expect(q("memory").textContent).toContain("adam state 640 B");
    expect(q("memory").textContent).toContain("input (2, 1, 8, 8)");
  });

  it("shows the trainable share when the engine sends it (an adapter fine-tune)", () => {
    const totals = { ...TOTALS, params: 28466, trainable: 104, frozen: 28362, trainable_fraction: 104 / 28466 };
    view = new ModelSummaryView(summaryModel({ data: { rows: ROWS, totals, notes: [] } }), el);
    expect(q("totals").textContent).toContain("28,362 frozen (0.37% trainable);");
  });

  it("folds a subtree and writes the folds to the kernel", () => {
    const model = summaryModel();
    view = new ModelSummaryView(model, el);
    q("summary-table").querySelector('tr[data-path="features"] [data-testid="toggle"]').click();
    expect(model.get("collapsed")).toEqual(["features"]);
    expect(paths()).toEqual(["", "features", "head", "head.0"]);
    q("expand-all").click();
    expect(paths()).toHaveLength(6);
    q("collapse-all").click();
    expect(model.get("collapsed")).toEqual(["features", "head"]);
    expect(paths()).toEqual(["", "features", "head"]);
  });

  it("filters as one types and asks the kernel to refresh", () => {
    const model = summaryModel({ collapsed: ["features"] });
    view = new ModelSummaryView(model, el);
    q("search").value = "relu";
    q("search").dispatchEvent(new Event("input"));
    expect(paths()).toEqual(["", "features", "features.1"]);
    q("search").dispatchEvent(new Event("change"));
    expect(model.get("query")).toBe("relu");
    q("refresh").click();
    expect(model.sent.map((m) => m.content.kind)).toContain("refresh");
    model.set("data", { rows: ROWS.slice(0, 2), totals: TOTALS, notes: ["a note"] });
    expect(q("notes").textContent).toBe("a note");
  });

  it("is built into its own bundle", async () => {
    const widget = await builtWidget("model_summary");
    const model = summaryModel();
    const cleanup = widget.render({ model, el });
    expect(el.querySelector(".nnx-msum").textContent).toContain("120 parameters");
    cleanup();
    expect(el.querySelector(".nnx-msum")).toBe(null);
    expect(model.listenerCount()).toBe(0);
  });
});
