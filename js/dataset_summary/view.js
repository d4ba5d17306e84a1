// DatasetSummary's view: an NNTabularDataset's splits (rows, share, batch size) with the
// class balance, the target range or the positive rate per label, then the features
// (with the standardizer's training statistics) and the admission checks that ran. The
// kernel computes every number (summarize_dataset); the view draws `data` again whenever
// it changes, so a reloaded page shows the same table.
import { h } from "../shared/dom.js";
import { fmtInt, fmtValue } from "../shared/format.js";
import { PagedTable } from "../shared/table.js";
import { WidgetView } from "../shared/view.js";

/** A share as a percentage: "33.3%" ("–" where there is none). */
export function fmtShare(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  return `${Number((v * 100).toPrecision(3))}%`;
}

/** The cells a split row adds after rows / share / batch, by the summary's kind. */
export function targetCells(data, split) {
  const empty = split.rows === 0;
  if (data.kind === "classification") {
    const cells = data.classes.map((label, i) => {
      const missing = (split.missing || []).includes(label);
      const text = empty ? "–" : `${fmtInt(split.counts[i])} (${fmtShare(split.shares[i])})`;
      return { text: missing ? `${text} missing` : text, missing, key: `class-${i}` };
    });
    const s = split.smallest;
    const lacks = (split.missing || []).length > 0;
    cells.push({ text: s ? `${s.class}: ${fmtShare(s.share)}` : "–", missing: lacks, key: "smallest" });
    return cells;
  }
  if (data.kind === "regression") {
    return ["min", "mean", "max"].map((k) => ({ text: fmtValue(split[k]), missing: false, key: k }));
  }
  return data.labels.map((label, i) => ({
    text: empty ? "–" : `${fmtShare(split.positive_rate[i])} (${fmtInt(split.positives[i])})`,
    missing: false,
    key: `label-${i}`,
  }));
}

/** The header cells matching targetCells. */
export function targetHeads(data) {
  if (data.kind === "classification") return [...data.classes.map((c) => `class ${c}`), "smallest class"];
  if (data.kind === "regression") return [`${data.target_col} min`, "mean", "max"];
  return data.labels.map((l) => `${l} positive rate`);
}

export class DatasetSummaryView extends WidgetView {
  /** @param {import("../shared/view.js").Model} model @param {HTMLElement} el */
  constructor(model, el) {
    super(model, el);
    this._build();
    this._on("change:data", () => this._render());
    this._on("change:version", () => this._render());
    this._on("change:error", () => this._error());
    this._render();
  }

  _build() {
    this._makeRoot("nnx-dsum", "Dataset summary");
    this.title = h("div", { class: "nnx-ds-title", "data-testid": "title" });
    this.meta = h("div", { class: "nnx-ds-meta", "data-testid": "meta" });
    this.thead = h("thead");
    this.tbody = h("tbody");
    this.table = h("table", { class: "nnx-ds-table", "data-testid": "splits-table" }, [this.thead, this.tbody]);
    this.warn = h("p", { class: "nnx-ds-warn", "data-testid": "warn", role: "status" });
    this.featHead = h("summary", { "data-testid": "features-head" });
    this.features = new PagedTable({ pageSize: 16, label: "Features", testid: "features-table" });
    this.features.follow = false; // a feature list reads from its first column
    this.featBox = h("details", { class: "nnx-ds-features" }, [this.featHead, this.features.root]);
    this.checks = h("ul", { class: "nnx-ds-checks", "data-testid": "checks" });
    this.root.append(
      this.title,
      this.meta,
      h("div", { class: "nnx-ds-box" }, [this.table]),
      this.warn,
      this.featBox,
      h("div", { class: "nnx-ds-sub", text: "Admission checks that ran" }),
      this.checks,
      this._makeError(),
    );
  }

  _render() {
    const data = this.model.get("data") || {};
    const splits = data.splits || [];
    this.root.dataset.version = String(this.model.get("version") || 0);
    this.root.dataset.kind = data.kind || "";
    this.title.textContent = data.name ? `Dataset: ${data.name}` : "Dataset";
    const parts = [];
    if (data.kind) parts.push(data.kind);
    if (data.target_col !== undefined) parts.push(`target ${data.target_col} (${data.target_dtype || "class labels"})`);
    if (data.total !== undefined) parts.push(`${fmtInt(data.total)} rows`);
    if (data.split) parts.push(`split manifest ${data.split.slice(0, 12)}${data.excluded ? `, ${fmtInt(data.excluded)} excluded` : ""}`);
    else if (data.seed !== undefined) parts.push(`random split, seed ${data.seed}`);
    this.meta.textContent = parts.join(" · ");

    if (!data.kind) {
      this.thead.replaceChildren();
      this.tbody.replaceChildren();
    } else {
      const heads = ["split", "rows", "share", "batch", ...targetHeads(data)];
      this.thead.replaceChildren(h("tr", {}, heads.map((t) => h("th", { scope: "col", text: t }))));
      this.tbody.replaceChildren(
        ...splits.map((s) => {
          const cells = targetCells(data, s).map((c) => {
            const td = h("td", { "data-cell": c.key, text: c.text });
            if (c.missing) td.classList.add("nnx-ds-missing");
            return td;
          });
          return h("tr", { "data-split": s.name, "data-empty": s.rows === 0 ? "true" : "false" }, [
            h("th", { scope: "row", text: s.name }),
            h("td", { "data-cell": "rows", text: fmtInt(s.rows) }),
            h("td", { "data-cell": "share", text: fmtShare(s.share) }),
            h("td", { "data-cell": "batch", text: s.batch_size === null ? "–" : fmtInt(s.batch_size) }),
            ...cells,
          ]);
        }),
      );
    }
    this.table.hidden = !data.kind;

    const lacking = splits.filter((s) => (s.missing || []).length).map((s) => `${s.name} has no rows of class ${s.missing.join(", ")}`);
    this.warn.textContent = lacking.length ? `${lacking.join("; ")}.` : "";
    this.warn.hidden = lacking.length === 0;

    const cols = data.feature_cols || [];
    const std = data.standardizer;
    this.featHead.textContent =
      `${cols.length} feature${cols.length === 1 ? "" : "s"} (${data.feature_dtype || ""})` +
      (std ? `, standardized on the ${fmtInt(std.fitted_rows)} training rows` : ", not standardized");
    const columns = [{ key: "col", label: "feature", cell: (i) => cols[i], className: "nnx-ds-name" }];
    if (std) {
      columns.push({ key: "mean", label: "train mean", cell: (i) => fmtValue(std.mean[i]) });
      columns.push({ key: "std", label: "train std", cell: (i) => fmtValue(std.std[i]) });
    }
    this.features.setRows(columns, cols.length);

    const checks = data.checks || [];
    this.checks.replaceChildren(...checks.map((c) => h("li", { text: c })));
  }
}
