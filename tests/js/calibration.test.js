import { afterEach, describe, expect, it } from "vitest";
import { binGeometry, CalibrationView, fmtChange, positionToTemperature, temperatureToPosition } from "../../js/calibration/view.js";
import { byTestId, disposeView, fakeModel, manualClock, op, settle, snapshot, testHost, update } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => (view = disposeView(view)));

const INFO = {
  rows: 1000,
  classes: 10,
  kind: "categorical",
  labels: null,
  bins: 5,
  accuracy: 0.8,
  slider_range: [0.05, 20],
  model_id: "sha256:0123456789abcdef0123456789",
  split_id: "calibration",
  train_split_id: "train",
  test_split_id: "test",
};

function explorerModel(state = {}) {
  return fakeModel({ temperature: 1, fitted_temperature: null, fit_message: "", path: "calibrator.json", saved: "", revision: 0, info: INFO, ...state });
}

/** The series the kernel sends for one temperature: 5 bins and the two metric rows. */
function measured(t, { ece = 0.1 / t, counts = [0, 100, 200, 300, 400] } = {}) {
  const before = [0, 100, 200, 300, 400];
  const acc = (c, i) => (c ? 0.2 * i + 0.1 : NaN);
  return [
    op("bins", 0, {
      count_before: ["int32", before],
      confidence_before: ["float64", before.map((c, i) => (c ? 0.2 * i + 0.15 : NaN))],
      accuracy_before: ["float64", before.map(acc)],
      count: ["int32", counts],
      confidence: ["float64", counts.map((c, i) => (c ? 0.2 * i + 0.1 : NaN))],
      accuracy: ["float64", counts.map((c, i) => (c ? 0.2 * i + 0.12 : NaN))],
    }),
    op("metrics", 0, {
      temperature: ["float64", [1, t]],
      nll: ["float64", [0.5, 0.4]],
      brier: ["float64", [0.3, 0.31]],
      ece: ["float64", [0.1, ece]],
    }),
  ];
}

async function shown(model, t = 1) {
  view = new CalibrationView(model, el, { timers: manualClock() });
  const hello = model.lastHello();
  const s = snapshot(hello.view, hello.req, 1, measured(t));
  model.custom(s.content, s.buffers);
  await settle();
  return view;
}

describe("temperature slider scale", () => {
  it("maps slider positions to temperatures on a log scale and back", () => {
    expect(positionToTemperature(0, 0.05, 20)).toBe(0.05);
    expect(positionToTemperature(1000, 0.05, 20)).toBe(20);
    expect(positionToTemperature(500, 0.05, 20)).toBe(1); // the geometric middle: sqrt(0.05 * 20)
    for (const t of [0.05, 0.1, 1, 2.5, 20]) {
      expect(positionToTemperature(temperatureToPosition(t, 0.05, 20), 0.05, 20)).toBeCloseTo(t, 1);
    }
    expect(temperatureToPosition(100, 0.05, 20)).toBe(1000); // beyond the slider: its end
    expect(fmtChange(0.1, 0.15)).toBe("−0.0500");
    expect(fmtChange(0.2, 0.15)).toBe("+0.0500");
    expect(fmtChange(0.15, 0.15)).toBe("±0");
    expect(Array.from(binGeometry(4).centers)).toEqual([0.125, 0.375, 0.625, 0.875]);
  });
});

describe("CalibrationExplorer view", () => {
  it("renders its parts and asks the kernel for the bins", () => {
    const model = explorerModel();
    view = new CalibrationView(model, el);
    for (const id of ["temperature", "temperature-value", "fit", "reset", "readouts", "reliability-chart", "histogram-chart", "path", "save", "error"]) {
      expect(q(id), id).not.toBeNull();
    }
    expect(model.sent[0].content).toMatchObject({ kind: "hello", version: 2 });
    expect(q("path").value).toBe("calibrator.json");
    expect(q("temperature").value).toBe("500"); // T = 1 in the middle of [0.05, 20]
    expect(el.textContent).toContain("1,000 rows · 10 classes · split 'calibration'");
  });

  it("draws the bins and the metrics the kernel measured, before and after", async () => {
    const model = explorerModel({ temperature: 2 });
    await shown(model, 2);
    expect(q("nll-before").textContent).toBe("0.5000");
    expect(q("nll").textContent).toBe("0.4000");
    expect(q("nll-change").textContent).toBe("−0.1000");
    expect(q("nll-change").dataset.sign).toBe("better");
    expect(q("brier-change").dataset.sign).toBe("worse");
    expect(q("ece").textContent).toBe("0.0500");
    const fig = q("reliability-chart");
    expect(fig.dataset.temperature).toBe("2");
    expect(fig.dataset.ece).toBe("0.050000");
    expect(fig.dataset.counts).toBe("0,100,200,300,400");
    // reliability: accuracy bars at the bin centres, T = 1 line, the diagonal
    const [x, bars, before, perfect] = view.diagram.plot.data;
    expect(x).toEqual([0.1, 0.3, 0.5, 0.7, 0.9].map((v) => expect.closeTo(v, 12)));
    expect(bars[0]).toBeNull(); // an empty bin is a gap, not a zero bar
    expect(bars[1]).toBeCloseTo(0.32, 12);
    expect(before[1]).toBeCloseTo(0.3, 12);
    expect(perfect).toEqual(x);
    expect(view.diagram.ranges().x).toEqual([0, 1]);
    expect(view.diagram.ranges().y).toEqual([0, 1]);
    // the histogram: shares of the rows, so its axis stays [0, 1] whatever T does
    const [, share] = view.histogram.plot.data;
    expect(share.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
    expect(share[4]).toBeCloseTo(0.4, 12);
  });

  it("redraws on each update the kernel sends as the temperature moves", async () => {
    const model = explorerModel();
    await shown(model, 1);
    const u = update(2, measured(3, { ece: 0.02, counts: [10, 490, 300, 200, 0] }));
    model.custom(u.content, u.buffers);
    await settle();
    expect(q("ece").textContent).toBe("0.0200");
    expect(q("reliability-chart").dataset.temperature).toBe("3");
    expect(q("reliability-chart").dataset.counts).toBe("10,490,300,200,0");
    expect(view.diagram.plot.data[1][4]).toBeNull();
  });

  it("sends one slider value at a time: the newest once the kernel answers", async () => {
    const model = explorerModel();
    await shown(model);
    const slider = q("temperature");
    const move = (pos) => {
      slider.value = String(pos);
      slider.dispatchEvent(new Event("input"));
    };
    move(600);
    move(650);
    move(700);
    const t600 = positionToTemperature(600, 0.05, 20);
    const t700 = positionToTemperature(700, 0.05, 20);
    expect(model.state.temperature).toBe(t600);
    expect(model.saves).toBe(1);
    expect(q("temperature-value").value).toBe(String(t700)); // the box follows the pointer
    model.set("revision", 1); // the kernel answered t600
    expect(model.state.temperature).toBe(t700); // 650 was overtaken: never sent
    expect(model.saves).toBe(2);
    model.set("revision", 2);
    expect(view.request.busy).toBe(false);
  });

  it("follows the temperature set from Python, but not while the pointer drags", async () => {
    const model = explorerModel();
    await shown(model);
    model.set("temperature", 2.0);
    expect(q("temperature-value").value).toBe("2");
    expect(q("temperature").value).toBe(String(temperatureToPosition(2, 0.05, 20)));
    const slider = q("temperature");
    slider.value = "100";
    slider.dispatchEvent(new Event("input"));
    model.emit("change:temperature"); // the echo of the dragged value
    expect(slider.value).toBe("100");
    // a refused value: the kernel sends its own back and answers; the slider returns
    model.state.temperature = 2.0;
    model.set("revision", 1);
    expect(q("temperature-value").value).toBe("2");
    expect(slider.value).toBe(String(temperatureToPosition(2, 0.05, 20)));
  });

  it("Fit asks the kernel; Save needs a fit and sends the path first", async () => {
    const model = explorerModel();
    await shown(model);
    q("fit").click();
    expect(model.sent.at(-1).content).toEqual({ kind: "fit" });
    expect(q("save").disabled).toBe(true);
    expect(q("save").title).toMatch(/Fit first/);
    model.set("fit_message", "fitted T = 1.83 in 5 iterations");
    model.set("fitted_temperature", 1.83);
    expect(q("save").disabled).toBe(false);
    expect(q("fit-message").textContent).toBe("fitted T = 1.83 in 5 iterations");
    q("path").value = "out/cal.json";
    q("save").click();
    expect(model.state.path).toBe("out/cal.json");
    expect(model.sent.at(-1).content).toEqual({ kind: "save" });
    model.set("saved", "saved the fitted T = 1.83 to out/cal.json");
    expect(q("saved").textContent).toContain("out/cal.json");
  });

  it("T = 1 asks for the model's own probabilities; a number typed in is sent as it is", async () => {
    const model = explorerModel({ temperature: 2 });
    await shown(model, 2);
    q("reset").click();
    expect(model.state.temperature).toBe(1);
    model.set("revision", 1);
    const box = q("temperature-value");
    box.value = "2.5";
    box.dispatchEvent(new Event("change"));
    expect(model.state.temperature).toBe(2.5);
    model.set("revision", 2);
    box.value = "3.5";
    box.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter" })); // Enter commits too
    expect(model.state.temperature).toBe(3.5);
  });

  it("shows the kernel's error under the widget", async () => {
    const model = explorerModel();
    await shown(model);
    expect(q("error").hidden).toBe(true);
    model.set("error", "temperature=-1.0 is invalid: pass a finite temperature");
    expect(q("error").hidden).toBe(false);
    expect(q("error").textContent).toContain("temperature=-1.0 is invalid");
  });

  it("leaves nothing behind when disposed", async () => {
    const model = explorerModel();
    await shown(model);
    view.dispose();
    view = undefined;
    expect(el.querySelector(".nnx-calibration")).toBeNull();
    expect(model.listenerCount()).toBe(0);
  });
});

describe("CalibrationExplorer view, browser mode (the view measures the logits itself)", () => {
  // 4 rows x 3 classes, shifted so that each row's top class is at 0
  const Z = [0, -1, -2, -0.5, 0, -3, 0, -0.2, -4, -1, -1, 0];
  const Y = [0, 1, 1, 2];

  async function local(state = {}) {
    const model = explorerModel({ info: { ...INFO, rows: 4, classes: 3, bins: 5, compute: "browser" }, ...state });
    view = new CalibrationView(model, el, { timers: manualClock() });
    const hello = model.lastHello();
    const s = snapshot(hello.view, hello.req, 1, [op("logits", 0, { z: ["float32", Z] }), op("targets", 0, { y: ["int32", Y] })]);
    model.custom(s.content, s.buffers);
    await settle();
    return model;
  }

  it("draws what measure.js gives for the buffer the kernel sent", async () => {
    const model = await local({ temperature: 2 });
    const { measure, prepare } = await import("../../js/calibration/measure.js");
    const p = prepare(Float32Array.from(Z), Int32Array.from(Y));
    const at2 = measure(p, 5, 2);
    const at1 = measure(p, 5, 1);
    expect(q("reliability-chart").dataset.temperature).toBe("2");
    expect(q("ece").textContent).toBe(at2.ece.toFixed(4));
    expect(q("ece-before").textContent).toBe(at1.ece.toFixed(4));
    expect(q("reliability-chart").dataset.counts).toBe(Array.from(at2.count).join(","));
    expect(el.querySelector(".nnx-calibration").dataset.compute).toBe("browser");
    expect(model.saves).toBe(0);
  });

  it("redraws on each slider move at once and writes the temperature once it rests", async () => {
    const model = await local();
    const slider = q("temperature");
    const before = q("reliability-chart").dataset.ece;
    for (const pos of [700, 800, 900]) {
      slider.value = String(pos);
      slider.dispatchEvent(new Event("input"));
    }
    await settle();
    const t900 = positionToTemperature(900, 0.05, 20);
    expect(q("reliability-chart").dataset.temperature).toBe(String(t900));
    expect(q("reliability-chart").dataset.ece).not.toBe(before);
    expect(model.saves).toBe(0); // nothing sent while it moves
    await settle(320);
    expect(model.saves).toBe(1);
    expect(model.state.temperature).toBe(t900);
  });

  it("keeps the dragged value while its write waits for the slider to rest", async () => {
    const model = await local();
    const slider = q("temperature");
    slider.value = "800";
    slider.dispatchEvent(new Event("input"));
    model.emit("change:temperature"); // the kernel's older value arrives meanwhile
    expect(slider.value).toBe("800");
    await settle();
    expect(q("reliability-chart").dataset.temperature).toBe(String(positionToTemperature(800, 0.05, 20)));
    await settle(320);
    expect(model.state.temperature).toBe(positionToTemperature(800, 0.05, 20));
  });

  it("follows a temperature set from Python by measuring it", async () => {
    const model = await local();
    model.set("temperature", 4);
    await settle();
    expect(q("reliability-chart").dataset.temperature).toBe("4");
    expect(q("temperature-value").value).toBe("4");
    expect(model.saves).toBe(0);
  });
});
