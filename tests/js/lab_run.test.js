// A run's panel logic: the log's events become the monitor's traits and series
// (RunState), the log is followed page by page (RunFollower), and the monitor's own
// view draws it through the model interface (RunModel), Stop included.
import { afterEach, describe, expect, it } from "vitest";
import { RunFollower, RunModel } from "../../js/lab/run_follow.js";
import { RunState, num } from "../../js/lab/run_state.js";
import { dispositionName } from "../../js/lab/api.js";
import { RunView } from "../../js/lab/run_view.js";
import { MonitorView } from "../../js/monitor/view.js";
import { fakeApi, runLog, until } from "./lab_helpers.js";

const ID = "c".repeat(32);
const q = (root, id) => root.querySelector(`[data-testid="${id}"]`);

describe("RunState", () => {
  it("turns a log into the monitor's counters and series", () => {
    const s = new RunState();
    s.apply(runLog({ runId: ID, steps: 20, perEpoch: 10 }));
    s.tick(2000);
    const t = s.traits;
    expect(t).toMatchObject({ run_id: ID, status: "finished", epoch: 2, n_epochs: 2, step: 20, total_steps: 20, samples: 640 });
    expect(t.elapsed).toBe(12); // run_finished.time - run_started.time
    expect(t.last_loss).toBeCloseTo(1 / 20);
    expect(s.steps.length).toBe(20);
    expect(Array.from(s.steps.column("step"))).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(s.epochs.length).toBe(2);
    expect(s.epochs.values).toEqual(["seconds", "train.loss", "train.accuracy", "val.loss", "val.error"]);
    expect(s.epochs.has("train.samples")).toBe(false); // a count, not a metric
    expect(Array.from(s.epochs.column("val.loss"))).toEqual([1, 0.5]);
    expect(s.config).toEqual({ train: { seed: 1 } });
  });

  it("derives samples/s and the ETA from the log's times, never from how fast it was read", () => {
    // 300 steps of 32 samples in 60 s (3 epochs of 20 s) of a 10-epoch run, opened at 1062
    const lines = runLog({ steps: 300, perEpoch: 100, finished: null });
    lines[0].n_epochs = 10;
    for (const l of lines) if (l.event === "epoch_ended") l.seconds = 20;
    let ms = 0;
    const s = new RunState({ now: () => ms });
    // the replay: three pages 0.6 s apart, the log read to its end at the last
    for (const [page, caughtUp] of [[lines.slice(0, 120), false], [lines.slice(120, 250), false], [lines.slice(250), true]]) {
      s.apply(page);
      s.tick(1062, caughtUp);
      ms += 600; // our clock moves on between pages; the replay is not the run
    }
    // over the last 10 s or more of the writer's clock: epoch 2's end (1040) to now (1062)
    expect(s.traits.samples_per_sec).toBeCloseTo((100 * 32) / 22, 2);
    expect(s.traits.eta).toBeCloseTo((1000 - 300) / (100 / 22), 1);
    // followed live: 25 more steps by 1067
    s.apply(runLog({ steps: 325, perEpoch: 100, finished: null }).filter((l) => l.event === "step" && l.step > 300));
    s.tick(1067, true);
    expect(s.traits.samples_per_sec).toBeCloseTo((125 * 32) / 27, 2);
    // a page that is not the log's end says nothing of now: the rate stands
    s.apply(runLog({ steps: 400, perEpoch: 100, finished: null }).filter((l) => l.event === "step" && l.step > 325));
    s.tick(1090, false);
    expect(s.traits.samples_per_sec).toBeCloseTo((125 * 32) / 27, 2);
  });

  it("has no rate before the log's clock says two things", () => {
    const s = new RunState();
    const lines = runLog({ steps: 50, perEpoch: 100, finished: null });
    s.apply(lines);
    s.tick(1000.2, false);
    expect(s.traits.samples_per_sec).toBeNull();
    expect(s.traits.eta).toBeNull();
  });

  it("reads non-finite losses sent as text, and says since when", () => {
    const s = new RunState();
    s.apply(runLog({ steps: 6, perEpoch: 10, loss: (x) => (x >= 4 ? NaN : 1), finished: null }));
    s.tick(1005);
    expect(num("Infinity")).toBe(Infinity);
    expect(s.traits).toMatchObject({ status: "running", loss_nonfinite_since: 4, loss_nonfinite_steps: 3, last_loss: null, last_finite_step: 3, last_finite_loss: 1 });
    expect(Array.from(s.steps.column("bad"))).toEqual([0, 0, 0, 1, 1, 1]);
    expect(s.traits.elapsed).toBe(5); // running: by the server's clock
  });

  it("shows a failed run's error and a stopped run's reason; a new run_started starts over", () => {
    const s = new RunState();
    s.apply(runLog({ steps: 3, finished: "failed" }));
    expect(s.traits.status).toBe("failed");
    expect(s.traits.error).toMatch(/ValueError: boom/);
    s.apply(runLog({ steps: 2, finished: "stopped" }));
    expect(s.traits).toMatchObject({ status: "stopped", stop_reason: "stop requested", error: "", step: 2 });
    expect(s.steps.length).toBe(2);
  });
});

describe("RunFollower", () => {
  let follower;
  afterEach(() => follower && follower.dispose());

  it("reads a long log page by page, then follows new lines while the run goes on", async () => {
    const api = fakeApi({ lines: runLog({ runId: ID, steps: 300, perEpoch: 100, finished: null }), pageBytes: 4096 });
    // a poll a minute apart: the pages of a long log are read one after the other anyway
    follower = new RunFollower(api, "rk", ID, { pollMs: 60_000, statusEveryMs: 1e9 });
    follower.start();
    await until(() => follower.state.steps.total === 300);
    const offsets = api.calls.filter((c) => c[0] === "log").map((c) => c[1]);
    expect(offsets.length).toBeGreaterThan(5); // paged
    expect(offsets).toEqual([...offsets].sort((a, b) => a - b)); // forward only
    const before = follower.offset;
    // a half-written line is held back until it is whole
    api.append([], '{"event":"step","step":301,"epoch":4,"batch":0,"lr":0.01,"samples":32,"lo');
    follower.poke();
    await until(() => api.calls.filter((c) => c[0] === "log" && c[1] === before).length >= 1);
    await new Promise((r) => setTimeout(r, 30)); // its answer applied
    expect(follower.state.steps.total).toBe(300);
    expect(follower.offset).toBe(before);
    api.text += 'ss":0.5}\n';
    follower.poke();
    await until(() => follower.state.steps.total === 301);
    api.append([{ event: "run_finished", run_id: ID, status: "finished", epochs_completed: 3, steps: 301, time: 1100 }]);
    follower.poke();
    await until(() => follower.done);
    expect(follower.state.traits.status).toBe("finished");
    const reads = api.calls.filter((c) => c[0] === "log").length;
    await new Promise((r) => setTimeout(r, 50));
    expect(api.calls.filter((c) => c[0] === "log").length).toBe(reads); // no reading after the end
  });

  it("takes 'interrupted' from the server when the writer died without a last line", async () => {
    const api = fakeApi({ lines: runLog({ steps: 5, finished: null }) });
    follower = new RunFollower(api, "rk", ID, { pollMs: 5, statusEveryMs: 0 });
    follower.start();
    await until(() => follower.state.steps.total === 5);
    expect(follower.state.traits.status).toBe("running");
    api.status = "interrupted";
    await until(() => follower.done);
    expect(follower.state.traits.status).toBe("interrupted");
    expect(follower.state.traits.stop_reason).toMatch(/without a word/);
  });

  it("starts again from 0 when the log was replaced, and ends on a deleted run", async () => {
    const api = fakeApi({ lines: runLog({ steps: 8, finished: null }) });
    follower = new RunFollower(api, "rk", ID, { pollMs: 5, statusEveryMs: 1e9 });
    follower.start();
    await until(() => follower.state.steps.total === 8);
    api.text = runLog({ steps: 2, finished: null }).map((l) => `${JSON.stringify(l)}\n`).join("").slice(0, 50);
    await until(() => follower.state.steps.total === 0 && follower.offset === 0);
    const gone = Object.assign(new Error("no run cccc in runs; it may have been deleted"), { status: 404 });
    api.log = async () => {
      throw gone;
    };
    await until(() => follower.done);
    expect(follower.problem).toMatch(/deleted/);
  });

  it("keeps trying when the server does not answer", async () => {
    const api = fakeApi({ lines: runLog({ steps: 3 }) });
    const real = api.log;
    let fails = 2;
    api.log = async (...a) => {
      if (fails-- > 0) throw new Error("connection refused");
      return real(...a);
    };
    follower = new RunFollower(api, "rk", ID, { pollMs: 5, statusEveryMs: 1e9 });
    follower.start();
    await until(() => follower.problem.includes("did not answer"));
    await until(() => follower.done, 4000);
    expect(follower.problem).toBe("");
    expect(follower.state.traits.status).toBe("finished");
  });
});

describe("RunModel under the monitor's view", () => {
  let el;
  let model;
  let view;
  afterEach(() => {
    if (view) view.dispose();
    if (model) model.dispose();
    if (el) el.remove();
    view = model = el = undefined;
  });

  /** The monitor's view of a run followed through `api`, in the page; the follower started. */
  function watch(api) {
    const follower = new RunFollower(api, "rk", ID, { pollMs: 10, statusEveryMs: 1e9 });
    model = new RunModel(follower, { throttleMs: 5 });
    if (!el) {
      el = document.createElement("div");
      document.body.append(el);
    }
    view = new MonitorView(model, el);
    follower.start();
  }

  it("answers the view's hello with the series and sends later rows as numbered updates", async () => {
    const api = fakeApi({ lines: runLog({ runId: ID, steps: 40, perEpoch: 10, finished: null }) });
    watch(api);
    await until(() => q(el, "loss-chart").dataset.points === "40");
    expect(q(el, "status").textContent).toBe("running");
    expect(q(el, "run-id").textContent).toBe(ID);
    expect(view.sync.synced).toBe(true);
    expect(q(el, "stop").disabled).toBe(false);
    expect(q(el, "open-in-panel").hidden).toBe(true); // already in a panel
    const seq = model.seq;
    api.append(runLog({ runId: ID, steps: 50, perEpoch: 10 }).slice(-12));
    await until(() => q(el, "loss-chart").dataset.points === "50" && q(el, "status").textContent === "finished");
    expect(model.seq).toBeGreaterThan(seq);
    expect(view.sync.stores.epochs.length).toBe(5);
    expect(q(el, "stop").disabled).toBe(true);
  });

  it("Stop asks the server, shows 'stopping', and a refusal under the view", async () => {
    const api = fakeApi({ lines: runLog({ runId: ID, steps: 5, finished: null }) });
    watch(api);
    await until(() => q(el, "status").textContent === "running" && !q(el, "stop").disabled);
    q(el, "stop").click();
    await until(() => api.stops.length === 1);
    expect(api.stops[0]).toEqual(["rk", ID]);
    await until(() => q(el, "status").textContent === "stopping");
    api.append([{ event: "run_finished", run_id: ID, status: "stopped", epochs_completed: 0, steps: 5, stop_reason: "stopped from the JupyterLab runs panel", time: 1010 }]);
    await until(() => q(el, "status").textContent === "stopped");
    expect(q(el, "reason").textContent).toMatch(/runs panel/);

    // a second run whose stop the server refuses
    view.dispose();
    model.dispose();
    const api2 = fakeApi({ lines: runLog({ runId: ID, steps: 5, finished: null }) });
    api2.stopError = Object.assign(new Error("run cccc is interrupted, not running"), { status: 409 });
    watch(api2);
    await until(() => !q(el, "stop").disabled);
    q(el, "stop").click();
    await until(() => !q(el, "error").hidden);
    expect(q(el, "error").textContent).toMatch(/Stop was refused: run cccc is interrupted/);
    expect(q(el, "status").textContent).toBe("running");
  });
});

describe("RunView", () => {
  it("names the run and its folder and says what of its log was damaged", async () => {
    const api = fakeApi({ lines: runLog({ runId: ID, steps: 4, perEpoch: 2 }) });
    api.text += "this is not json\n";
    const host = document.createElement("div");
    document.body.append(host);
    const v = new RunView(host, { api, folder: "rk", runId: ID, folderLabel: "nb/runs", pollMs: 5 });
    await until(() => v.follower.done && host.querySelector('[data-testid="run-problems"]').hidden === false);
    expect(q(host, "run-where").textContent).toContain(ID);
    expect(q(host, "run-folder").textContent).toBe("runs"); // the server's label wins
    expect(q(host, "run-problems").textContent).toMatch(/1 damaged line of metrics.jsonl skipped/);
    await until(() => q(host, "loss-chart").dataset.points === "4");
    expect(q(host, "status").textContent).toBe("finished");
    // the log's "improved": true is the table's ★ BEST mark
    await until(() => (q(host, "epochs-table") || { textContent: "" }).textContent.includes("★"));
    v.dispose();
    expect(host.children.length).toBe(0);
    host.remove();
  });
});

describe("RunView's name", () => {
  it("shows the run's name, renames it in place, and says why a name was refused", async () => {
    const api = fakeApi({ lines: runLog({ runId: ID, steps: 4 }) });
    api.name = "first";
    const host = document.createElement("div");
    document.body.append(host);
    const titles = [];
    const v = new RunView(host, { api, folder: "rk", runId: ID, pollMs: 5, onName: (n) => titles.push(n) });
    await until(() => q(host, "run-name").textContent === "first");
    expect(titles).toEqual(["first"]);
    const where = q(host, "run-where");
    expect(where.firstElementChild).toBe(q(host, "run-name")); // the name first, the id after
    q(host, "run-rename").click();
    const input = q(host, "run-name-input");
    expect(input.value).toBe("first");
    // a refusal is shown, the name kept, the box left open
    api.renameError = Object.assign(new Error("name='a\\nb' is invalid: use plain text on one line"), { status: 400 });
    input.value = "bad name";
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" }));
    await until(() => !q(host, "run-rename-error").hidden);
    expect(q(host, "run-rename-error").textContent).toMatch(/Not renamed: .*one line/);
    expect(q(host, "run-name-input")).not.toBeNull();
    api.renameError = null;
    input.value = "high lr";
    q(host, "run-name-save").click();
    await until(() => q(host, "run-name").textContent === "high lr");
    expect(q(host, "run-rename-error").hidden).toBe(true);
    expect(q(host, "run-name-input")).toBeNull();
    expect(api.calls.filter((c) => c[0] === "rename").map((c) => c[3])).toEqual(["bad name", "high lr"]);
    expect(titles[titles.length - 1]).toBe("high lr");
    // Escape leaves the name as it was
    q(host, "run-rename").click();
    q(host, "run-name-input").value = "other";
    q(host, "run-name-input").dispatchEvent(new KeyboardEvent("keydown", { key: "Escape" }));
    expect(q(host, "run-name").textContent).toBe("high lr");
    await new Promise((r) => setTimeout(r, 30)); // later reads of the run keep the new name
    expect(q(host, "run-name").textContent).toBe("high lr");
    v.dispose();
    host.remove();
  });

  it("says a run has no name", async () => {
    const api = fakeApi({ lines: runLog({ runId: ID, steps: 2 }) });
    const host = document.createElement("div");
    const v = new RunView(host, { api, folder: "rk", runId: ID, pollMs: 5 });
    await until(() => q(host, "run-name").dataset.empty === "true");
    expect(q(host, "run-name").textContent).toBe("unnamed");
    v.dispose();
  });
});

describe("RunView's Export bundle", () => {
  it("is busy while the server builds the zip, saves it, and shows a refusal in the panel", async () => {
    const api = fakeApi({ lines: runLog({ runId: ID, steps: 2 }) });
    const host = document.createElement("div");
    const saved = [];
    const v = new RunView(host, { api, folder: "rk", runId: ID, pollMs: 5, save: (name, blob) => saved.push([name, blob.type]) });
    let open;
    api.exportGate = new Promise((r) => (open = r));
    const button = q(host, "run-export");
    expect(button.textContent).toBe("Export bundle");
    button.click();
    expect(button.disabled).toBe(true);
    expect(button.textContent).toMatch(/Exporting/);
    button.click(); // a second click while busy asks nothing more
    open();
    await until(() => !button.disabled);
    expect(api.calls.filter((c) => c[0] === "export")).toEqual([["export", "rk", ID]]);
    expect(saved).toEqual([[`run-${ID.slice(0, 8)}.zip`, "application/zip"]]);
    expect(q(host, "run-export-status").textContent).toBe(`Saved run-${ID.slice(0, 8)}.zip`);
    // a refusal: the server's reason beside the button, nothing saved
    api.exportGate = null;
    api.exportError = Object.assign(new Error(`run ${ID} has no LAST checkpoint to export`), { status: 409 });
    button.click();
    await until(() => q(host, "run-export-status").dataset.state === "error");
    expect(q(host, "run-export-status").textContent).toMatch(/^Not exported: .*no LAST checkpoint/);
    expect(q(host, "run-export-status").hidden).toBe(false);
    expect(saved.length).toBe(1);
    expect(button.disabled).toBe(false);
    v.dispose();
  });
});

describe("dispositionName", () => {
  it("takes the UTF-8 name first, the plain one else, and a fallback without either", () => {
    expect(dispositionName(`attachment; filename="wine_-abc.zip"; filename*=UTF-8''wine%20%C3%BC-abc.zip`, "x")).toBe("wine ü-abc.zip");
    expect(dispositionName('attachment; filename="bundle_a.zip"', "x")).toBe("bundle_a.zip");
    expect(dispositionName(null, "bundle.zip")).toBe("bundle.zip");
  });
});
