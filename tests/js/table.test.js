import { describe, expect, it } from "vitest";
import { PagedTable } from "../../js/shared/table.js";

const columns = [
  { key: "epoch", label: "epoch", cell: (i) => String(i + 1) },
  { key: "lr", label: "lr", cell: () => "1.00e-5", className: "nnx-nowrap" },
];

function rowsShown(t) {
  return [...t.tbody.querySelectorAll("tr")].map((tr) => tr.firstChild.textContent);
}

describe("PagedTable", () => {
  it("holds one page of rows in the DOM however many rows there are", () => {
    const t = new PagedTable({ label: "epochs", pageSize: 25 });
    t.setRows(columns, 200_000);
    expect(t.tbody.querySelectorAll("tr")).toHaveLength(25);
    expect(t.root.querySelectorAll("*").length).toBeLessThan(400);
    expect(t.status.textContent).toBe("199,976–200,000 of 200,000");
  });

  it("follows the newest epoch while on the last page", () => {
    const t = new PagedTable({ label: "epochs", pageSize: 10 });
    t.setRows(columns, 7);
    expect(rowsShown(t)).toEqual(["1", "2", "3", "4", "5", "6", "7"]);
    expect(t.pager.hidden).toBe(true);
    t.setRows(columns, 208);
    expect(rowsShown(t).at(-1)).toBe("208");
    expect(rowsShown(t)[0]).toBe("199"); // a full page that ends at the newest row
    t.setRows(columns, 215);
    expect(rowsShown(t).at(-1)).toBe("215");
  });

  it("stays on an earlier page the reader chose, and follows again from the last one", () => {
    const t = new PagedTable({ label: "epochs", pageSize: 10 });
    t.setRows(columns, 100);
    t.first.click();
    expect(rowsShown(t)[0]).toBe("1");
    expect(t.first.disabled).toBe(true);
    expect(t.prev.disabled).toBe(true);
    t.setRows(columns, 150);
    expect(rowsShown(t)[0]).toBe("1");
    t.next.click();
    expect(rowsShown(t)[0]).toBe("11");
    t.last.click();
    expect(rowsShown(t).at(-1)).toBe("150");
    expect(t.next.disabled).toBe(true);
    t.setRows(columns, 155);
    expect(rowsShown(t).at(-1)).toBe("155");
  });

  it("keeps a column on one line where asked, and hides itself without rows", () => {
    const t = new PagedTable({ label: "epochs" });
    t.setRows(columns, 0);
    expect(t.root.hidden).toBe(true);
    t.setRows(columns, 3);
    expect(t.root.hidden).toBe(false);
    const lr = t.tbody.querySelector("tr").children[1];
    expect(lr.className).toBe("nnx-nowrap");
    expect(lr.textContent).toBe("1.00e-5");
  });
});
