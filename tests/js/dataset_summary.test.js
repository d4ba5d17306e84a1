// The DatasetSummary view: one row per split with the class balance (a class a split
// lacks is flagged), the target range or the positive rates; the features; the checks;
// drawn again when the kernel sends a new summary.
import { afterEach, describe, expect, it } from "vitest";
import { DatasetSummaryView, fmtShare } from "../../js/dataset_summary/view.js";
import { byTestId, disposeView, fakeModel, testHost } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => (view = disposeView(view)));
const row = (split) => q("splits-table").querySelector(`tr[data-split="${split}"]`);
const cell = (split, key) => row(split).querySelector(`[data-cell="${key}"]`);

const CHECKS = ["columns present and numeric", "no NaN in the selected columns", "class labels are whole values"];

function classification() {
  return {
    name: "wine",
    kind: "classification",
    target_col: "label",
    target_dtype: null,
    feature_dtype: "torch.float32",
    feature_cols: ["a", "b"],
    input_dim: 2,
    output_dim: 3,
    classes: ["x", "y", "z"],
    labels: [],
    total: 10,
    seed: 0,
    split: "0123456789abcdef",
    excluded: 2,
    splits: [
      { name: "train", rows: 6, share: 0.6, batch_size: 4, counts: [2, 3, 1], shares: [2 / 6, 0.5, 1 / 6], missing: [], smallest: { class: "z", share: 1 / 6 } },
      { name: "val", rows: 2, share: 0.2, batch_size: 2, counts: [1, 0, 1], shares: [0.5, 0, 0.5], missing: ["y"], smallest: { class: "y", share: 0 } },
      { name: "test", rows: 0, share: 0, batch_size: null, counts: [0, 0, 0], shares: [null, null, null], missing: [], smallest: null },
    ],
    standardizer: { mean: [3.5, 0.5], std: [1.708, 0.5], fitted_rows: 6 },
    checks: CHECKS,
  };
}

function regression() {
  return {
    ...classification(),
    kind: "regression",
    target_col: "price",
    target_dtype: "torch.float32",
    classes: [],
    split: null,
    excluded: 0,
    standardizer: null,
    splits: [
      { name: "train", rows: 8, share: 0.8, batch_size: 8, min: 1, mean: 4.25, max: 9 },
      { name: "val", rows: 1, share: 0.1, batch_size: 1, min: 10, mean: 10, max: 10 },
      { name: "test", rows: 1, share: 0.1, batch_size: 1, min: -1, mean: -1, max: -1 },
    ],
    checks: ["columns present and numeric", "targets finite"],
  };
}

describe("DatasetSummary view", () => {
  it("draws a row per split with rows, share, batch and the class balance", () => {
    view = new DatasetSummaryView(fakeModel({ data: classification(), version: 1 }), el);
    const splits = [...q("splits-table").querySelectorAll("tbody tr")].map((tr) => tr.dataset.split);
    expect(splits).toEqual(["train", "val", "test"]);
    const heads = [...q("splits-table").querySelectorAll("thead th")].map((th) => th.textContent);
    expect(heads).toEqual(["split", "rows", "share", "batch", "class x", "class y", "class z", "smallest class"]);
    expect(cell("train", "rows").textContent).toBe("6");
    expect(cell("train", "share").textContent).toBe("60%");
    expect(cell("train", "batch").textContent).toBe("4");
    expect(cell("train", "class-0").textContent).toBe("2 (33.3%)");
    expect(cell("train", "class-1").textContent).toBe("3 (50%)");
    expect(cell("train", "smallest").textContent).toBe("z: 16.7%");
    expect(row("test").dataset.empty).toBe("true");
    expect(cell("test", "class-0").textContent).toBe("–");
    expect(cell("test", "batch").textContent).toBe("–");
    expect(q("meta").textContent).toContain("split manifest 0123456789ab, 2 excluded");
  });

  it("flags a class a split lacks, in its cell, its smallest share and a warning", () => {
    view = new DatasetSummaryView(fakeModel({ data: classification(), version: 1 }), el);
    const flagged = [...q("splits-table").querySelectorAll(".nnx-ds-missing")].map((td) => `${td.parentElement.dataset.split}/${td.dataset.cell}`);
    expect(flagged).toEqual(["val/class-1", "val/smallest"]);
    expect(cell("val", "class-1").textContent).toBe("0 (0%) missing");
    expect(q("warn").hidden).toBe(false);
    expect(q("warn").textContent).toBe("val has no rows of class y.");
  });

  it("lists the checks that ran and the features with the standardizer's statistics", () => {
    view = new DatasetSummaryView(fakeModel({ data: classification(), version: 1 }), el);
    expect([...q("checks").querySelectorAll("li")].map((li) => li.textContent)).toEqual(CHECKS);
    expect(q("features-head").textContent).toBe("2 features (torch.float32), standardized on the 6 training rows");
    const feats = [...q("features-table").querySelectorAll("tbody tr")].map((tr) => [...tr.children].map((td) => td.textContent));
    expect(feats).toEqual([
      ["a", "3.5", "1.708"],
      ["b", "0.5", "0.5"],
    ]);
  });

  it("draws again when the kernel sends another summary (a regression: min / mean / max)", () => {
    const model = fakeModel({ data: classification(), version: 1 });
    view = new DatasetSummaryView(model, el);
    model.set("data", regression());
    const heads = [...q("splits-table").querySelectorAll("thead th")].map((th) => th.textContent);
    expect(heads).toEqual(["split", "rows", "share", "batch", "price min", "mean", "max"]);
    expect([cell("train", "min").textContent, cell("train", "mean").textContent, cell("train", "max").textContent]).toEqual(["1", "4.25", "9"]);
    expect(q("splits-table").querySelectorAll(".nnx-ds-missing")).toHaveLength(0);
    expect(q("warn").hidden).toBe(true);
    expect([...q("checks").querySelectorAll("li")].map((li) => li.textContent)).toEqual(["columns present and numeric", "targets finite"]);
    expect(q("features-head").textContent).toContain("not standardized");
    expect(q("meta").textContent).toContain("random split, seed 0");
    expect(el.querySelector(".nnx-dsum").dataset.version).toBe("1");
    model.set("version", 2);
    expect(el.querySelector(".nnx-dsum").dataset.version).toBe("2");
  });

  it("shows the positive rate per label for a multilabel summary", () => {
    const data = {
      ...regression(),
      kind: "multilabel",
      labels: ["flag"],
      splits: [
        { name: "train", rows: 6, share: 0.6, batch_size: 6, positives: [3], positive_rate: [0.5] },
        { name: "val", rows: 2, share: 0.2, batch_size: 2, positives: [2], positive_rate: [1] },
        { name: "test", rows: 2, share: 0.2, batch_size: 2, positives: [0], positive_rate: [0] },
      ],
    };
    view = new DatasetSummaryView(fakeModel({ data, version: 1 }), el);
    expect(cell("train", "label-0").textContent).toBe("50% (3)");
    expect(cell("val", "label-0").textContent).toBe("100% (2)");
    expect(q("splits-table").querySelector("thead th:last-child").textContent).toBe("flag positive rate");
  });

  it("shows an error under the widget, and nothing broken before a summary arrives", () => {
    const model = fakeModel({ data: {}, version: 0 });
    view = new DatasetSummaryView(model, el);
    expect(q("splits-table").hidden).toBe(true);
    expect(q("error").hidden).toBe(true);
    model.set("error", "ConfigError: DatasetSummary.task ...");
    expect(q("error").hidden).toBe(false);
    expect(q("error").textContent).toContain("DatasetSummary.task");
  });

  it("formats shares", () => {
    expect(fmtShare(1 / 3)).toBe("33.3%");
    expect(fmtShare(0)).toBe("0%");
    expect(fmtShare(null)).toBe("–");
  });
});
