import { afterEach, describe, expect, it } from "vitest";
import { MonitorView } from "../../js/monitor/view.js";
import { figurePoints } from "../../js/monitor/figures.js";
import { byTestId, disposeView, fakeModel, settle, testHost } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => {
  view = disposeView(view);
});

const FIGURES = [
  { name: "recon", epoch: 1, kind: "png", bytes: 10 },
  { name: "recon", epoch: 2, kind: "png", bytes: 10 },
  { name: "samples", epoch: 1, kind: "scatter", bytes: 40 },
  { name: "samples", epoch: 3, kind: "scatter", bytes: 40 },
];
const asks = (model) => model.sent.map((m) => m.content).filter((c) => c.kind === "figure");
const json = (obj) => new DataView(new TextEncoder().encode(JSON.stringify(obj)).buffer);

/** The kernel's answer to the view's last request. */
function answer(model, figureKind, payload) {
  const ask = asks(model).at(-1);
  model.custom({ kind: "figure_data", to: ask.view, name: ask.name, epoch: ask.epoch, figure_kind: figureKind }, [payload]);
}

describe("TrainingMonitor view: figures from callbacks", () => {
  it("stays hidden without figures and opens on the newest epoch of the first name", async () => {
    const model = fakeModel({ status: "running", figures: [] });
    view = new MonitorView(model, el);
    expect(q("figures").hidden).toBe(true);
    expect(asks(model)).toEqual([]);
    model.set("figures", FIGURES);
    await settle();
    expect(q("figures").hidden).toBe(false);
    expect([...q("figure-name").options].map((o) => o.value)).toEqual(["recon", "samples"]);
    expect(q("figure-epoch-label").textContent).toBe("2");
    expect(asks(model).at(-1)).toMatchObject({ name: "recon", epoch: 2, view: view.sync.view });
    answer(model, "png", new DataView(new Uint8Array([0x89, 0x50, 0x4e, 0x47]).buffer));
    expect(q("figure-img").hidden).toBe(false);
    expect(q("figure-img").getAttribute("src")).toMatch(/^blob:/);
    expect(q("figure-body").dataset.kind).toBe("png");
  });

  it("moves through the epochs with the slider and asks only for what it does not hold", async () => {
    const model = fakeModel({ status: "running", figures: FIGURES });
    view = new MonitorView(model, el);
    await settle();
    answer(model, "png", new DataView(new Uint8Array([1]).buffer));
    const slider = q("figure-epoch");
    slider.value = "0";
    slider.dispatchEvent(new Event("input"));
    expect(q("figure-epoch-label").textContent).toBe("1");
    expect(asks(model).at(-1)).toMatchObject({ name: "recon", epoch: 1 });
    answer(model, "png", new DataView(new Uint8Array([2]).buffer));
    const n = asks(model).length;
    slider.value = "1";
    slider.dispatchEvent(new Event("input"));
    slider.value = "0";
    slider.dispatchEvent(new Event("input"));
    expect(asks(model).length).toBe(n); // both held in the page
    // moved back: a new epoch of the figure does not pull the slider forward
    model.set("figures", [...FIGURES, { name: "recon", epoch: 3, kind: "png", bytes: 10 }]);
    expect(q("figure-epoch-label").textContent).toBe("1");
    expect(slider.max).toBe("2");
  });

  it("draws a scatter's points, by group, and says what went wrong for a figure that is gone", async () => {
    const model = fakeModel({ status: "running", figures: FIGURES });
    view = new MonitorView(model, el);
    await settle();
    q("figure-name").value = "samples";
    q("figure-name").dispatchEvent(new Event("change"));
    expect(asks(model).at(-1)).toMatchObject({ name: "samples", epoch: 3 });
    answer(model, "scatter", json({ x: [0, 1, 2], y: [1, null, 3], group: ["a", "b", "a"] }));
    expect(q("figure-canvas").hidden).toBe(false);
    expect(q("figure-body").dataset.points).toBe("3");
    expect(q("figure-body").dataset.traces).toBe("a,b");
    q("figure-epoch").value = "0";
    q("figure-epoch").dispatchEvent(new Event("input"));
    const ask = asks(model).at(-1);
    model.custom({ kind: "figure_data", to: ask.view, name: ask.name, epoch: ask.epoch, error: "figure 'samples' of epoch 1 is not held" }, []);
    expect(q("figure-note").textContent).toContain("is not held");
    expect(q("figure-canvas").hidden).toBe(true);
  });

  it("ignores a figure meant for another view", async () => {
    const model = fakeModel({ status: "running", figures: FIGURES });
    view = new MonitorView(model, el);
    await settle();
    model.custom({ kind: "figure_data", to: "someone-else", name: "recon", epoch: 2, figure_kind: "png" }, [new DataView(new Uint8Array([1]).buffer)]);
    expect(q("figure-img").hidden).toBe(true);
    expect(q("figure-note").textContent).toBe("loading…");
  });

  it("reads a plotly figure's x/y traces and names the ones it cannot draw", () => {
    const fig = { data: [{ type: "scatter", mode: "lines", x: [1, 2], y: [3, 4], name: "G" }, { type: "heatmap", z: [[1]] }] };
    const { traces, skipped } = figurePoints("plotly", fig);
    expect(traces).toEqual([{ name: "G", x: [1, 2], y: [3, 4], lines: true }]);
    expect(skipped).toEqual(["heatmap"]);
  });
});
