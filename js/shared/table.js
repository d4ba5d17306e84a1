// A table that shows one page of rows at a time, however many rows there are. It
// follows the newest rows (the page ends at the newest one) unless the reader went
// back to earlier rows.
import { h } from "./dom.js";

/**
 * @typedef {{key: string, label: string, cell: (i: number) => string,
 *   title?: (i: number) => string|null, className?: string}} Column
 */

export class PagedTable {
  /** @param {{pageSize?: number, label: string, testid?: string}} opts */
  constructor(opts) {
    this.pageSize = opts.pageSize || 25;
    /** @type {Column[]} */
    this.columns = [];
    this.rowCount = 0;
    /** first row shown */
    this.start = 0;
    /** the page ends at the newest row, and keeps doing so as rows arrive */
    this.follow = true;
    /** @type {(i: number) => Record<string, string>} extra attributes of row i */
    this.rowAttrs = () => ({});
    this.table = h("table", { class: "nnx-table", "data-testid": opts.testid || "epochs-table" });
    this.thead = h("thead");
    this.tbody = h("tbody");
    this.table.append(this.thead, this.tbody);
    const btn = (label, testid, title) => h("button", { type: "button", class: "nnx-page-button", "data-testid": testid, title, text: label });
    this.first = btn("«", "page-first", "Oldest epochs");
    this.prev = btn("‹", "page-prev", "Earlier epochs");
    this.next = btn("›", "page-next", "Later epochs");
    this.last = btn("»", "page-last", "Newest epochs (follows new epochs)");
    this.status = h("span", { class: "nnx-page-status", "data-testid": "page-status", "aria-live": "polite" });
    this.pager = h("div", { class: "nnx-pager", "data-testid": "table-pager" }, [this.first, this.prev, this.status, this.next, this.last]);
    this.box = h("div", { class: "nnx-table-box", tabindex: "0", role: "region", "aria-label": opts.label }, [this.table]);
    this.root = h("div", { class: "nnx-paged" }, [this.box, this.pager]);
    this.first.addEventListener("click", () => this.goto(0));
    this.prev.addEventListener("click", () => this.goto(this.start - this.pageSize));
    this.next.addEventListener("click", () => this.goto(this.start + this.pageSize));
    this.last.addEventListener("click", () => this.goto(Infinity));
    this._headKey = "";
  }

  _lastStart() {
    return Math.max(0, this.rowCount - this.pageSize);
  }

  /** @param {Column[]} columns @param {number} rowCount */
  setRows(columns, rowCount) {
    this.columns = columns;
    this.rowCount = rowCount;
    this.start = this.follow ? this._lastStart() : Math.min(this.start, this._lastStart());
    this.render();
  }

  /** Show the page that starts at row `start` (Infinity: the newest rows, followed). */
  goto(start) {
    this.start = Math.max(0, Math.min(this._lastStart(), start));
    this.follow = this.start === this._lastStart();
    this.render();
  }

  render() {
    const headKey = this.columns.map((c) => c.key).join("|");
    if (headKey !== this._headKey) {
      this._headKey = headKey;
      this.thead.replaceChildren(
        h("tr", {}, this.columns.map((c) => h("th", { scope: "col", class: c.className || "", text: c.label }))),
      );
    }
    const from = this.start;
    const to = Math.min(this.rowCount, from + this.pageSize);
    const rows = [];
    for (let i = from; i < to; i++) {
      const tr = h("tr", { "data-row": String(i), ...this.rowAttrs(i) });
      for (const c of this.columns) {
        const td = h("td", { class: c.className || "", text: c.cell(i) });
        const title = c.title ? c.title(i) : null;
        if (title) td.title = title;
        tr.append(td);
      }
      rows.push(tr);
    }
    this.tbody.replaceChildren(...rows);
    const n = (v) => v.toLocaleString("en-US");
    this.status.textContent = this.rowCount ? `${n(from + 1)}–${n(to)} of ${n(this.rowCount)}` : "no epochs yet";
    this.first.disabled = this.prev.disabled = this.start === 0;
    this.next.disabled = this.last.disabled = this.start >= this._lastStart();
    this.pager.hidden = this.rowCount <= this.pageSize;
    this.root.hidden = this.rowCount === 0;
  }
}
