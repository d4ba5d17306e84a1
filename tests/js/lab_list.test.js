// The runs side panel: filter, sort, the rows it shows, opening and comparing.
import { afterEach, describe, expect, it, vi } from "vitest";
import { RunsList, bestLabel, bestMetric, fmtEpochs, rowCells, runDuration, visibleRows } from "../../js/lab/runs_list.js";
import { fakeApi, until } from "./lab_helpers.js";

const row = (id, over = {}) => ({
  run_id: id.padEnd(32, "0"),
  folder: "rA",
  status: "finished",
  started_at: 1000,
  finished_at: 1060,
  duration_s: 60,
  epochs_completed: 3,
  planned_epochs: 3,
  steps: 30,
  best_value: 0.5,
  best_source: "val_edp.error",
  parent_run_id: null,
  error: null,
  ...over,
});

const ROWS = [
  row("aaaa", { started_at: 1000, best_value: 0.3 }),
  row("bbbb", { started_at: 3000, status: "running", duration_s: null, finished_at: null, epochs_completed: 1, planned_epochs: 10, best_value: 0.2 }),
  row("cccc", { started_at: 2000, status: "failed", error: "DataError: batch 2 of epoch 1", best_value: null }),
  row("dddd", { started_at: 1500, status: "interrupted", folder: "rB" }),
];
const FOLDERS = { rA: { key: "rA", label: "runs" }, rB: { key: "rB", label: "notebooks/exp/runs" } };

describe("visibleRows", () => {
  it("sorts newest first by default, and by status, best value or duration", () => {
    const ids = (rows) => rows.map((r) => r.run_id.slice(0, 4));
    expect(ids(visibleRows(ROWS))).toEqual(["bbbb", "cccc", "dddd", "aaaa"]);
    expect(ids(visibleRows(ROWS, { sort: "oldest" }))).toEqual(["aaaa", "dddd", "cccc", "bbbb"]);
    expect(ids(visibleRows(ROWS, { sort: "status" }))).toEqual(["bbbb", "aaaa", "cccc", "dddd"]);
    expect(ids(visibleRows(ROWS, { sort: "best" }))).toEqual(["bbbb", "aaaa", "dddd", "cccc"]); // no value last
  });

  it("filters by status and by words in the id, the error, the source or the folder", () => {
    const ids = (o) => visibleRows(ROWS, { folders: FOLDERS, ...o }).map((r) => r.run_id.slice(0, 4));
    expect(ids({ status: "interrupted" })).toEqual(["dddd"]);
    expect(ids({ text: "DataError" })).toEqual(["cccc"]);
    expect(ids({ text: "exp/runs" })).toEqual(["dddd"]);
    expect(ids({ text: "bbb" })).toEqual(["bbbb"]);
    expect(ids({ text: "  aaaa   val_edp  " })).toEqual(["aaaa"]);
    expect(ids({ text: "nothing-like-this" })).toEqual([]);
  });

  it("formats epochs, the best value, the start and a live duration", () => {
    expect(fmtEpochs(ROWS[1])).toBe("1 / 10");
    expect(fmtEpochs({})).toBe("–");
    expect(runDuration(ROWS[1], 3125)).toBe(125);
    const c = rowCells(ROWS[1], 3125);
    expect(c).toMatchObject({ status: "running", id: "bbbb0000", epochs: "1 / 10", best: "0.2", duration: "2m 05s" });
    expect(rowCells(ROWS[2], 5000).best).toBe("–");
  });
});

describe("names and the best metric", () => {
  it("says which metric the best is and which way is better", () => {
    expect(bestLabel(row("a", { best_source: "val_edp.loss", best_mode: "min" }))).toBe("val loss ↓");
    expect(bestLabel(row("a", { best_source: "val_edp.metrics.accuracy", best_mode: "max" }))).toBe("val accuracy ↑");
    expect(bestLabel(row("a", { best_source: "train_edp.error" }))).toBe("train error ↓"); // an older record: by its name
    expect(bestMetric(row("a", { best_source: "val_edp.metrics.f1_macro" })).mode).toBe("max");
    expect(bestMetric(row("a", { best_source: "val_edp.metrics.custom" })).mode).toBe("");
    expect(bestLabel(row("a", { best_source: null }))).toBe("");
    const c = rowCells(row("a", { name: "high lr", best_source: "val_edp.loss", best_mode: "min", best_value: 0.123 }), 2000);
    expect([c.name, c.bestLabel, c.best]).toEqual(["high lr", "val loss ↓", "0.123"]);
  });

  it("sorts by best within each metric, never across metrics", () => {
    const rows = [
      row("acc1", { best_source: "val_edp.metrics.accuracy", best_mode: "max", best_value: 0.8 }),
      row("err1", { best_source: "val_edp.error", best_mode: "min", best_value: 0.3 }),
      row("acc2", { best_source: "val_edp.metrics.accuracy", best_mode: "max", best_value: 0.9 }),
      row("none", { best_source: null, best_value: null }),
      row("err2", { best_source: "val_edp.error", best_mode: "min", best_value: 0.1 }),
    ];
    const ids = visibleRows(rows, { sort: "best" }).map((r) => r.run_id.slice(0, 4));
    expect(ids).toEqual(["acc2", "acc1", "err2", "err1", "none"]); // accuracy: higher first
  });

  it("finds a run by its name", () => {
    const rows = [row("aaaa", { name: "high lr" }), row("bbbb")];
    expect(visibleRows(rows, { text: "high" }).map((r) => r.run_id.slice(0, 4))).toEqual(["aaaa"]);
  });
});

describe("RunsList", () => {
  let list;
  afterEach(() => {
    if (list) list.dispose();
    vi.useRealTimers();
  });

  const q = (id) => list.node.querySelector(`[data-testid="${id}"]`);
  const rows = () => [...list.node.querySelectorAll('[data-testid="run-row"]')];

  it("shows the server's listing and opens a run on a click", async () => {
    const api = fakeApi();
    api.listing = { server_time: 4000, folders: Object.values(FOLDERS), runs: ROWS, notes: ["3 older runs are not listed"] };
    const opened = [];
    list = new RunsList({ api, onOpen: (r) => opened.push(r.run_id), onCompare: () => {} });
    document.body.append(list.node);
    await list.refresh();
    expect(rows().map((r) => r.dataset.runId.slice(0, 4))).toEqual(["bbbb", "cccc", "dddd", "aaaa"]);
    expect(rows()[0].dataset.status).toBe("running");
    expect(rows()[1].textContent).toContain("DataError");
    expect(rows()[2].textContent).toContain("notebooks/exp/runs"); // two folders: each row says which
    expect(q("runs-count").textContent).toBe("4 of 4 runs");
    expect(q("runs-notes").textContent).toContain("older runs");
    // the name first, the id after it; the best says its metric and direction
    expect(rows()[3].querySelector('[data-testid="run-name"]')).toBeNull(); // no name: the id alone
    expect(rows()[3].querySelector('[data-testid="run-best"]').textContent).toBe("best val error ↓ 0.3");
    rows()[3].click();
    expect(opened).toEqual([ROWS[0].run_id]);
    list.filter.value = "interr";
    list.filter.dispatchEvent(new Event("input"));
    expect(rows().length).toBe(1);
    expect(q("runs-count").textContent).toBe("1 of 4 runs");
  });

  it("compares two or more ticked runs; ticking never opens a run", async () => {
    const api = fakeApi();
    api.listing = { server_time: 4000, folders: Object.values(FOLDERS), runs: ROWS, notes: [] };
    const compared = [];
    const opened = [];
    list = new RunsList({ api, onOpen: (r) => opened.push(r), onCompare: (rs) => compared.push(rs.map((r) => r.run_id.slice(0, 4))) });
    document.body.append(list.node);
    await list.refresh();
    expect(q("runs-compare").disabled).toBe(true);
    const pick = (i) => {
      const box = rows()[i].querySelector('[data-testid="run-pick"]');
      box.click();
    };
    pick(0);
    expect(q("runs-compare").disabled).toBe(true);
    pick(3);
    expect(q("runs-compare").disabled).toBe(false);
    expect(q("runs-compare").textContent).toBe("Compare 2");
    q("runs-compare").click();
    expect(compared).toEqual([["aaaa", "bbbb"]]);
    expect(opened).toEqual([]);
    // a run that leaves the listing leaves the selection
    api.listing = { ...api.listing, runs: ROWS.slice(1) }; // aaaa went
    await list.refresh();
    expect(list.selected.size).toBe(1);
  });

  it("refreshes while shown, stops when hidden, and says when the server cannot list", async () => {
    vi.useFakeTimers();
    const api = fakeApi();
    api.listing = { server_time: 4000, folders: [], runs: [], notes: [] };
    list = new RunsList({ api, onOpen: () => {}, onCompare: () => {}, pollMs: 1000 });
    list.setActive(true);
    await vi.advanceTimersByTimeAsync(3500);
    const n = api.calls.filter((c) => c[0] === "list").length;
    expect(n).toBe(4);
    expect(q("runs-empty").hidden).toBe(false);
    expect(q("runs-empty").textContent).toMatch(/No runs yet/);
    list.setActive(false);
    await vi.advanceTimersByTimeAsync(5000);
    expect(api.calls.filter((c) => c[0] === "list").length).toBe(n);
    api.listRuns = async () => {
      throw new Error("HTTP 403");
    };
    await list.refresh();
    expect(q("runs-error").hidden).toBe(false);
    expect(q("runs-error").textContent).toMatch(/Cannot list the runs: HTTP 403/);
  });

  it("shows names with odd characters as text, never as markup", async () => {
    const api = fakeApi();
    const evil = '<img src=x onerror="window.__pwned=1">';
    api.listing = { server_time: 4000, folders: [{ key: "rX", label: evil }, { key: "rY", label: "b" }], runs: [row("eeee", { folder: "rX", status: "damaged", error: evil })], notes: [] };
    list = new RunsList({ api, onOpen: () => {}, onCompare: () => {} });
    document.body.append(list.node);
    await list.refresh();
    expect(list.node.querySelector("img")).toBeNull();
    expect(rows()[0].textContent).toContain(evil);
    expect(rows()[0].querySelector('[data-testid="run-pick"]').disabled).toBe(true); // damaged: not comparable
    await until(() => true);
    expect(window.__pwned).toBeUndefined();
  });
});

describe("a named row", () => {
  it("shows the name before the id", async () => {
    const api = fakeApi();
    api.listing = { server_time: 4000, folders: [FOLDERS.rA], runs: [row("aaaa", { name: "high lr" })], notes: [] };
    const list = new RunsList({ api, onOpen: () => {}, onCompare: () => {} });
    await list.refresh();
    const line = list.node.querySelector('[data-testid="run-row"] .nnx-runs-line');
    const name = line.querySelector('[data-testid="run-name"]');
    const id = line.querySelector('[data-testid="run-id"]');
    expect(name.textContent).toBe("high lr");
    expect(name.compareDocumentPosition(id) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
    list.dispose();
  });
});
