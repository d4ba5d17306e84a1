// The ways into a run's panel from a notebook: open_in_panel's output (opens once, then
// a link) and the "Open in panel" link of the TrainingMonitor's header.
import { afterEach, describe, expect, it } from "vitest";
import { OPEN_EVENT, firstTime, renderOpenRun } from "../../js/lab/open_run.js";
import { MonitorView } from "../../js/monitor/view.js";
import { fakeModel } from "./helpers.js";

function memoryStorage() {
  const m = new Map();
  return { getItem: (k) => (m.has(k) ? m.get(k) : null), setItem: (k, v) => m.set(k, String(v)) };
}

describe("open_in_panel's output", () => {
  const data = { run_id: "d".repeat(32), runs_root: "/srv/nb/runs", nonce: "n1" };

  it("opens the panel the first time it is shown, and only a link after", () => {
    const storage = memoryStorage();
    const opened = [];
    const node = document.createElement("div");
    expect(renderOpenRun(node, data, { open: (a) => opened.push(a), inLab: true, trusted: true, storage })).toBe(true);
    expect(opened).toEqual([{ runId: data.run_id, path: "/srv/nb/runs" }]);
    // the notebook reopened: same output, no new panel
    expect(renderOpenRun(node, data, { open: (a) => opened.push(a), inLab: true, trusted: true, storage })).toBe(false);
    expect(opened.length).toBe(1);
    node.querySelector('[data-testid="open-run-link"]').click();
    expect(opened.length).toBe(2);
    expect(node.textContent).toContain("Open run dddddddd in a panel");
  });

  it("opens nothing by itself from an untrusted notebook, nor outside JupyterLab", () => {
    const opened = [];
    const node = document.createElement("div");
    expect(renderOpenRun(node, { ...data, nonce: "n2" }, { open: (a) => opened.push(a), inLab: true, trusted: false, storage: memoryStorage() })).toBe(false);
    expect(opened).toEqual([]);
    expect(renderOpenRun(node, { ...data, nonce: "n3" }, { open: (a) => opened.push(a), inLab: false, trusted: true, storage: memoryStorage() })).toBe(false);
    expect(node.textContent).toMatch(/open JupyterLab/);
    expect(renderOpenRun(node, { runs_root: "/x" }, { open: (a) => opened.push(a), inLab: true, trusted: true })).toBe(false);
    expect(node.textContent).toMatch(/names no run/);
    expect(opened).toEqual([]);
  });

  it("remembers a bounded number of outputs", () => {
    const storage = memoryStorage();
    for (let i = 0; i < 250; i++) expect(firstTime(`k${i}`, storage)).toBe(true);
    expect(JSON.parse(storage.getItem("nnx-lab:opened-outputs")).length).toBe(200);
    expect(firstTime("k249", storage)).toBe(false);
    expect(firstTime("", storage)).toBe(false);
  });
});

describe("the TrainingMonitor's 'Open in panel' link", () => {
  let el;
  let view;
  afterEach(() => {
    if (view) view.dispose();
    el.remove();
    delete document.body.dataset.nnxLabRuns;
  });

  it("shows where the runs panel listens, and sends the run and its folder up the page", () => {
    el = document.createElement("div");
    document.body.append(el);
    const model = fakeModel({ run_id: "e".repeat(32), runs_root: "/srv/nb/runs", status: "running" });
    view = new MonitorView(model, el);
    const link = el.querySelector('[data-testid="open-in-panel"]');
    expect(link.hidden).toBe(true); // no extension in this page
    document.body.dataset.nnxLabRuns = "ready";
    model.set("status", "finished");
    expect(link.hidden).toBe(false);
    const seen = [];
    const listen = (e) => seen.push(e.detail);
    document.addEventListener(OPEN_EVENT, listen);
    link.click();
    document.removeEventListener(OPEN_EVENT, listen);
    expect(seen).toEqual([{ run_id: "e".repeat(32), runs_root: "/srv/nb/runs" }]);
    model.set("runs_root", "");
    expect(link.hidden).toBe(true); // a monitor with no run on disk has nothing to open
  });
});
