// The Report button: in a notebook the monitor asks the kernel, which writes the file and
// answers the view that asked; in the runs panel the RunModel gets the page from the
// server and saves it as a download. The note beside the button says where, or why not.
import { afterEach, describe, expect, it } from "vitest";
import { RunView } from "../../js/lab/run_view.js";
import { MonitorView } from "../../js/monitor/view.js";
import { byTestId, disposeView, fakeModel, testHost } from "./helpers.js";
import { fakeApi, runLog, until } from "./lab_helpers.js";

const el = testHost();
const q = byTestId(el);
const ID = "c".repeat(32);
let view;
afterEach(() => {
  view = disposeView(view);
});

describe("the monitor's Report button", () => {
  it("asks the kernel for this view and shows where the report was written", () => {
    const model = fakeModel({ run_id: "abc123", status: "finished" });
    view = new MonitorView(model, el);
    const me = model.lastHello().view;
    expect(q("report").disabled).toBe(false);
    expect(q("report-note").hidden).toBe(true);
    model.sent.length = 0;
    q("report").click();
    expect(model.sent.map((m) => m.content)).toEqual([{ kind: "report", view: me }]);
    expect(q("report").disabled).toBe(true); // one request at a time
    expect(q("report-note").textContent).toMatch(/writing/);
    q("report").click();
    expect(model.sent.length).toBe(1);
    // another view's answer is not this one's
    model.custom({ kind: "report_done", to: "another-view", path: "/elsewhere.html" });
    expect(q("report").disabled).toBe(true);
    model.custom({ kind: "report_done", to: me, path: "/work/nb/report_abc123.html" });
    expect(q("report").disabled).toBe(false);
    expect(q("report-note").hidden).toBe(false);
    expect(q("report-note").dataset.state).toBe("done");
    expect(q("report-note").textContent).toBe("Report written to /work/nb/report_abc123.html");
  });

  it("says why the kernel wrote no report", () => {
    const model = fakeModel({ run_id: "abc123", status: "running" });
    view = new MonitorView(model, el);
    const me = model.lastHello().view;
    q("report").click();
    model.custom({ kind: "report_done", to: me, error: "path='/x/r.html' is invalid: its folder /x does not exist" });
    expect(q("report-note").dataset.state).toBe("error");
    expect(q("report-note").textContent).toMatch(/^No report: .*does not exist/);
    expect(q("report").disabled).toBe(false); // asked again once fixed
  });

  it("is off before a run and in a race of several runs", () => {
    const model = fakeModel({ run_id: "" });
    view = new MonitorView(model, el);
    expect(q("report").disabled).toBe(true);
    model.set("run_id", "abc123");
    expect(q("report").disabled).toBe(false);
    model.set("runs", [{ key: "a", name: "a", run_id: "a1", status: "running" }, { key: "b", name: "b", run_id: "b1", status: "running" }]);
    expect(q("report").disabled).toBe(true);
  });
});

describe("the runs panel's Report button", () => {
  it("gets the page from the server and saves it as report_<id>.html", async () => {
    const api = fakeApi({ lines: runLog({ runId: ID, steps: 4 }) });
    const asked = [];
    api.report = async (folder, runId) => {
      asked.push([folder, runId]);
      return { run_id: runId, folder, filename: `report_${runId}.html`, html: "<!doctype html><p>the run</p>" };
    };
    const saved = [];
    view = new RunView(el, { api, folder: "rk", runId: ID, pollMs: 5, save: (name, blob) => saved.push([name, blob]) });
    await until(() => q("report") && !q("report").disabled);
    q("report").click();
    await until(() => q("report-note").dataset.state === "done");
    expect(asked).toEqual([["rk", ID]]);
    expect(saved.length).toBe(1);
    expect(saved[0][0]).toBe(`report_${ID}.html`);
    expect(saved[0][1].type).toBe("text/html");
    expect(await saved[0][1].text()).toBe("<!doctype html><p>the run</p>");
    expect(q("report-note").textContent).toBe(`Report downloaded as report_${ID}.html`);
  });

  it("says why the server refused, and saves nothing", async () => {
    const api = fakeApi({ lines: runLog({ runId: ID, steps: 4 }) });
    api.report = async () => {
      throw Object.assign(new Error(`run ${ID}'s metrics.jsonl is 900 bytes, over NNxLab.report_log_bytes=100`), { status: 413 });
    };
    const saved = [];
    view = new RunView(el, { api, folder: "rk", runId: ID, pollMs: 5, save: (name, blob) => saved.push([name, blob]) });
    await until(() => q("report") && !q("report").disabled);
    q("report").click();
    await until(() => q("report-note").dataset.state === "error");
    expect(q("report-note").textContent).toMatch(/^No report: .*NNxLab.report_log_bytes=100/);
    expect(saved).toEqual([]);
    expect(q("report").disabled).toBe(false);
  });
});
