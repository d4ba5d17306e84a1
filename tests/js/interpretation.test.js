// The Interpretation view: the confusion matrix and its toggle, a cell click listing
// that cell's samples, paging with no message to the kernel, the samples drawn as
// images / rows / text, the regression scatter, and the built bundle.
import { afterEach, describe, expect, it } from "vitest";
import { InterpretationView, cellText, imagePixels, pageOf, sampleNode } from "../../js/interpretation/view.js";
import { builtWidget, byTestId, disposeView, fakeModel, testHost } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => (view = disposeView(view)));

const image = (v) => ({ kind: "image", shape: [1, 2, 2], values: [v, 0, 0, 1] });
const mistake = (id, t, p, extra = {}) => ({ id, target: t, prediction: p, loss: 1 / (id + 1), probability: 0.9, true_probability: 0.1, declined: null, display: image(id), ...extra });

function classification() {
  const samples = Array.from({ length: 7 }, (_, i) => mistake(10 + i, 0, 1));
  return {
    task: "classification",
    split: "val",
    source: { kind: "run", run_id: "abcdef0123456789", checkpoint: "best", epoch: 3, step: 30 },
    rows: 20,
    metrics: { accuracy: 0.5 },
    show: "image",
    calibrated: true,
    temperature: 1.5,
    policy: { kind: "max_probability", threshold: 0.8 },
    summary: "run abcdef01 (best) on 'val': 20 rows, 10 mistakes",
    labels: ["cat", "dog"],
    confusion: [[3, 7], [3, 7]],
    confusion_normalized: [[0.3, 0.7], [0.3, 0.7]],
    cells: { "0,1": { count: 9, samples }, "0,0": { count: 3, samples: [mistake(1, 0, 0)] } },
    top_losses: Array.from({ length: 5 }, (_, i) => mistake(i, 1, 0, { declined: i % 2 === 0 })),
  };
}

const ids = (testid) => [...q(testid).querySelectorAll("[data-id]")].map((n) => Number(n.dataset.id));

describe("Interpretation helpers", () => {
  it("pages, clamps the page, and formats a cell both ways", () => {
    expect(pageOf([1, 2, 3, 4, 5], 1, 2)).toEqual({ rows: [3, 4], page: 1, pages: 3 });
    expect(pageOf([1, 2, 3], 9, 2)).toEqual({ rows: [3], page: 1, pages: 2 });
    expect(pageOf([], 0, 4)).toEqual({ rows: [], page: 0, pages: 1 });
    const data = classification();
    expect(cellText(data, 0, 1, false)).toBe("7");
    expect(cellText(data, 0, 1, true)).toBe("70.0%");
  });

  it("scales an image's values to grey bytes and draws each kind of sample", () => {
    expect([...imagePixels([0, 2, 4, 4], [1, 2, 2])]).toEqual([0, 0, 0, 255, 128, 128, 128, 255, 255, 255, 255, 255, 255, 255, 255, 255]);
    const rgb = imagePixels([1, 0, 0, 1, 0, 0], [3, 1, 2]);
    expect([...rgb]).toEqual([255, 0, 0, 255, 0, 255, 0, 255]);
    expect(sampleNode(image(0)).tagName).toBe("CANVAS");
    expect(sampleNode({ kind: "tokens", ids: [1], text: "hello world" }).textContent).toBe("hello world");
    expect(sampleNode({ kind: "table", names: ["a", "b"], values: [1, 0.5] }).textContent).toBe("a=1.000  b=0.5000");
  });
});

describe("Interpretation view", () => {
  it("draws the matrix, toggles to row shares, and says what it read", () => {
    const model = fakeModel({ data: classification(), normalize: false, cell: [], page_size: 3, error: "" });
    view = new InterpretationView(model, el);
    const cells = () => [...q("confusion").querySelectorAll("[data-cell]")].map((b) => b.textContent);
    expect(cells()).toEqual(["3", "7", "3", "7"]);
    expect(q("notes").textContent).toContain("BEST checkpoint of run abcdef01");
    expect(q("notes").textContent).toContain("T = 1.50");
    q("normalize").click();
    expect(model.get("normalize")).toBe(true);
    expect(cells()).toEqual(["30.0%", "70.0%", "30.0%", "70.0%"]);
  });

  it("lists a clicked cell's samples, paged in the page, with no message to the kernel", () => {
    const model = fakeModel({ data: classification(), normalize: false, cell: [], page_size: 3, error: "" });
    view = new InterpretationView(model, el);
    expect(q("cell-samples")).toBeNull();
    q("confusion").querySelector('[data-cell="0,1"]').click();
    expect(model.get("cell")).toEqual([0, 1]);
    expect(q("cell-title").textContent).toBe("true cat, predicted dog: 9 samples (the first 7 kept)");
    expect(ids("cell-samples")).toEqual([10, 11, 12]);
    expect(q("cell-samples").querySelectorAll("canvas")).toHaveLength(3);
    q("cell-next").click();
    q("cell-next").click();
    expect(ids("cell-samples")).toEqual([16]);
    expect(q("cell-page").textContent).toBe("page 3 of 3");
    expect(q("cell-next").disabled).toBe(true);
    q("confusion").querySelector('[data-cell="0,0"]').click();
    expect(ids("cell-samples")).toEqual([1]);  // a new cell starts at its first page
    expect(model.sent).toEqual([]);
  });

  it("pages the top losses and shows who would be declined", () => {
    const model = fakeModel({ data: classification(), normalize: false, cell: [], page_size: 3, error: "" });
    view = new InterpretationView(model, el);
    const heads = [...q("top-table").querySelectorAll("th")].map((t) => t.textContent);
    expect(heads).toEqual(["sample", "id", "true", "predicted", "probability", "p(true)", "loss", "declined"]);
    expect(ids("top-table")).toEqual([0, 1, 2]);
    const first = q("top-table").querySelector('tr[data-id="0"]');
    expect(first.dataset.declined).toBe("true");
    expect([...first.querySelectorAll("td")].slice(2).map((c) => c.textContent)).toEqual(["dog", "cat", "0.900", "0.100", "1.000", "yes"]);
    q("top-next").click();
    expect(ids("top-table")).toEqual([3, 4]);
    expect(model.sent).toEqual([]);
  });

  it("draws a regression's residuals against target and its largest errors", () => {
    const data = {
      task: "regression",
      split: "test",
      source: { kind: "model" },
      rows: 4,
      metrics: { mae: 0.5 },
      show: "table",
      calibrated: false,
      temperature: null,
      policy: null,
      summary: "a model on 'test': 4 rows, MAE 0.5",
      points: { ids: [0, 1, 2], targets: [1, 2, 3], residuals: [0.5, -0.5, 1], total: 4 },
      largest_errors: [{ id: 2, target: 3, prediction: 4, loss: 1, probability: null, true_probability: null, declined: null, display: { kind: "table", names: ["a"], values: [7] } }],
    };
    view = new InterpretationView(fakeModel({ data, normalize: false, cell: [], page_size: 5, error: "" }), el);
    expect(q("residuals").querySelectorAll("circle")).toHaveLength(3);
    expect(el.textContent).toContain("3 of 4 points");
    expect(q("confusion")).toBeNull();
    const row = q("top-table").querySelector('tr[data-id="2"]');
    expect([...row.querySelectorAll("td")].map((c) => c.textContent)).toEqual(["a=7.000", "2", "3.000", "4.000", "1.000"]);
  });
});

describe("built interpretation bundle", () => {
  it("exports only a default widget with render, and cleans up", async () => {
    const widget = await builtWidget("interpretation");
    const model = fakeModel({ data: classification(), normalize: false, cell: [], page_size: 3, error: "" });
    const cleanup = widget.render({ model, el });
    expect(el.querySelector(".nnx-int").textContent).toContain("20 rows, 10 mistakes");
    cleanup();
    expect(el.querySelector(".nnx-int")).toBeNull();
    expect(model.listenerCount()).toBe(0);
  });
});
