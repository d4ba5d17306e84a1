import { afterEach, describe, expect, it } from "vitest";
import { AbstentionView, boxWidth, fmtThreshold, nearestStop, riskDomain } from "../../js/abstention/view.js";
import { byTestId, disposeView, fakeModel, manualClock, op, settle, snapshot, testHost } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => (view = disposeView(view)));

const INFO = {
  rows: 100,
  classes: 3,
  kind: "max_probability",
  labels: ["cat", "dog", "fox"],
  sides: ["calibrated", "uncalibrated"],
  temperature: 1.5,
  page_size: 10,
  top_k: 10,
  model_id: "sha256:abcdef",
  split_id: "validation",
  test_split_id: "test",
};

const readout = (threshold, accepted, errors) => ({
  threshold,
  accepted,
  abstained: 100 - accepted,
  errors,
  coverage: accepted / 100,
  risk: accepted ? errors / accepted : null,
  status: accepted ? "ok" : "no_accepted",
});

function explorerModel(state = {}) {
  return fakeModel({
    threshold: 0.8,
    risk_ceiling: 0.05,
    guarantee: null,
    use: "calibrated",
    selection: { status: "selected", reason: null, use: "calibrated", risk_ceiling: 0.05, guarantee: null, threshold: 0.8, coverage: 0.6, risk: 0.05, risk_bound: null },
    readouts: { calibrated: readout(0.8, 60, 3), uncalibrated: readout(0.8, 75, 6) },
    mistakes: [
      { sample_id: 7, target: 0, prediction: 2, score: 0.97, probability_of_target: 0.01, target_label: "cat", predicted_label: "fox", accepted: true },
      { sample_id: 9, target: 1, prediction: 0, score: 0.7, probability_of_target: 0.2, target_label: "dog", predicted_label: "cat", accepted: false },
    ],
    abstained_rows: [{ sample_id: 3, target: 1, prediction: 1, score: 0.79, probability_of_target: 0.79, correct: true, target_label: "dog", predicted_label: "dog" }],
    abstained_start: 0,
    path: "policy.json",
    saved: "",
    revision: 0,
    info: INFO,
    ...state,
  });
}

// the slider's stops, ascending thresholds
const STOPS = [0.4, 0.6, 0.8, 0.9, 0.99];

function series() {
  return [
    op("curve", 0, {
      coverage: ["float64", [0.1, 0.5, 0.6, 0.75, 1]],
      "risk.calibrated": ["float64", [0, 0.02, 0.05, 0.07, 0.1]],
      "risk.uncalibrated": ["float64", [NaN, 0.03, 0.06, 0.08, 0.1]],
    }),
    op("stops", 0, {
      threshold: ["float64", STOPS],
      coverage: ["float64", [1, 0.75, 0.6, 0.5, 0.1]],
      risk: ["float64", [0.1, 0.07, 0.05, 0.02, 0]],
      accepted: ["int32", [100, 75, 60, 50, 10]],
      errors: ["int32", [10, 5, 3, 1, 0]],
    }),
  ];
}

async function shown(model) {
  view = new AbstentionView(model, el, { timers: manualClock() });
  const hello = model.lastHello();
  const s = snapshot(hello.view, hello.req, 1, series());
  model.custom(s.content, s.buffers);
  await settle();
  return view;
}

describe("helpers", () => {
  it("finds the stop nearest a threshold and sizes the risk axis", () => {
    expect(nearestStop(Float64Array.from(STOPS), 0.8)).toBe(2);
    expect(nearestStop(Float64Array.from(STOPS), 0.84)).toBe(2);
    expect(nearestStop(Float64Array.from(STOPS), 0.86)).toBe(3);
    expect(nearestStop(Float64Array.from(STOPS), 0)).toBe(0);
    expect(nearestStop(Float64Array.from(STOPS), 1)).toBe(4);
    expect(nearestStop(new Float64Array(0), 0.5)).toBe(0);
    expect(riskDomain([0.1, 0.12], 0.05)).toEqual([0, 0.24]);
    expect(riskDomain([0.001], 0.3)).toEqual([0, 0.45]);
    expect(riskDomain([0.9], 0.05)).toEqual([0, 1]);
  });
});

describe("AbstentionExplorer view", () => {
  it("shows calibrated and uncalibrated side by side, the threshold applying to one", async () => {
    const model = explorerModel();
    await shown(model);
    const head = [...q("readouts").querySelectorAll("thead th")].map((th) => th.textContent);
    expect(head).toEqual(["", "calibrated (T = 1.5) ◂", "uncalibrated"]);
    expect(q("coverage").textContent).toBe("0.6000");
    expect(q("risk").textContent).toBe("0.0500");
    expect(q("accepted").textContent).toBe("60");
    expect(q("abstained").textContent).toBe("40");
    expect(q("coverage-uncalibrated").textContent).toBe("0.7500");
    expect(q("risk-uncalibrated").textContent).toBe("0.0800");
    expect(el.querySelector(".nnx-abstention").dataset.coverage).toBe("0.6");
    expect(q("selection").textContent).toMatch(/^ceiling 0.05: threshold 0.8 answers 0.6000 of the rows at risk 0.0500; met on this split, not guaranteed/);
    expect(q("use").value).toBe("calibrated");
  });

  it("draws both curves, the ceiling, and a dot per side at the current threshold", async () => {
    const model = explorerModel();
    await shown(model);
    const [x, cal, uncal, ceiling] = view.chart.plot.data;
    expect(x).toEqual([0.1, 0.5, 0.6, 0.75, 1]);
    expect(cal[2]).toBe(0.05);
    expect(uncal[0]).toBeNull(); // that curve does not reach down to this coverage
    expect(ceiling).toEqual([0.05, 0.05, 0.05, 0.05, 0.05]);
    expect(view.chart.ranges().x).toEqual([0, 1]);
    expect(view.chart.ranges().y).toEqual([0, 0.2]);
    expect(view.chart.dots.map((d) => [d.x, d.y])).toEqual([
      [0.6, 0.05],
      [0.75, 0.08],
    ]);
    expect(view.chart.markers[0].label).toBe("coverage 0.6000");
  });

  it("moves the threshold through the curve's stops, one value in flight", async () => {
    const model = explorerModel();
    await shown(model);
    const slider = q("threshold");
    expect(slider.max).toBe("4");
    expect(slider.value).toBe("2"); // the stop at 0.8
    for (const pos of ["3", "4", "1"]) {
      slider.value = pos;
      slider.dispatchEvent(new Event("input"));
    }
    expect(model.state.threshold).toBe(0.9);
    expect(q("threshold-value").value).toBe("0.6");
    model.set("revision", 1);
    expect(model.state.threshold).toBe(0.6); // 0.99 was overtaken
  });

  it("leaves the slider under the pointer while a value is in flight", async () => {
    const model = explorerModel();
    await shown(model);
    const slider = q("threshold");
    slider.value = "4";
    slider.dispatchEvent(new Event("input"));
    model.state.threshold = 0.8; // the kernel's value, not yet the dragged one
    model.emit("change:threshold");
    expect(slider.value).toBe("4");
    model.state.threshold = 0.99;
    model.set("revision", 1); // answered: the slider shows the kernel's value again
    expect(slider.value).toBe("4");
    expect(q("threshold-value").value).toBe("0.99");
  });

  it("follows the threshold set from Python to the nearest stop", async () => {
    const model = explorerModel();
    await shown(model);
    model.set("threshold", 0.93);
    expect(q("threshold").value).toBe("3");
    expect(q("threshold-value").value).toBe("0.93");
  });

  it("shows the kernel's threshold with its digits, in a box wide enough for them", async () => {
    const model = explorerModel();
    await shown(model);
    model.set("threshold", 0.9927551746368408); // what the kernel holds
    const box = q("threshold-value");
    expect(box.value).toBe("0.992755"); // not "0.992": rounded, never cut
    expect(box.style.width).toBe(boxWidth("0.992755"));
    expect(parseFloat(box.style.width)).toBeGreaterThanOrEqual("0.992755".length + 3); // + the spinner
    // six digits that would round onto 1 (every row declined) take the digits needed
    expect(fmtThreshold(0.9999996)).toBe("0.9999996");
    expect(fmtThreshold(1)).toBe("1");
    expect(fmtThreshold(4.0000001e-9)).toBe("4e-9");
    expect(fmtThreshold(0.5)).toBe("0.5");
  });

  it("sends the ceiling, the guarantee and the side as traits", async () => {
    const model = explorerModel();
    await shown(model);
    q("risk-ceiling").value = "0.02";
    q("risk-ceiling").dispatchEvent(new Event("change"));
    expect(model.state.risk_ceiling).toBe(0.02);
    q("guarantee").value = "0.95";
    q("guarantee").dispatchEvent(new Event("change"));
    expect(model.state.guarantee).toBe(0.95);
    q("guarantee").value = "";
    q("guarantee").dispatchEvent(new Event("change"));
    expect(model.state.guarantee).toBeNull();
    q("use").value = "uncalibrated";
    q("use").dispatchEvent(new Event("change"));
    expect(model.state.use).toBe("uncalibrated");
    expect(model.saves).toBe(4);
  });

  it("lists the most confident mistakes with their labels, and the declined rows a page at a time", async () => {
    const model = explorerModel();
    await shown(model);
    const rows = q("mistakes").querySelectorAll("tbody tr");
    expect(rows).toHaveLength(2);
    expect([...rows[0].children].map((td) => td.textContent)).toEqual(["7", "cat", "fox", "0.9700", "0.0100", "yes"]);
    expect(rows[0].dataset.accepted).toBe("true"); // a confident mistake that gets through
    const declined = q("declined-rows").querySelectorAll("tbody tr");
    expect([...declined[0].children].map((td) => td.textContent)).toEqual(["3", "dog", "dog", "0.7900", "right"]);
    expect(q("declined-status").textContent).toBe("1–1 of 40 declined");
    expect(q("declined-prev").disabled).toBe(true);
    expect(q("declined-next").disabled).toBe(false);
    q("declined-next").click();
    expect(model.state.abstained_start).toBe(10);
  });

  it("allows Save only where the validation risk is within the ceiling", async () => {
    const model = explorerModel();
    await shown(model);
    expect(q("save").disabled).toBe(false);
    q("save").click();
    expect(model.sent.at(-1).content).toEqual({ kind: "save" });
    model.set("readouts", { calibrated: readout(0.6, 75, 5), uncalibrated: readout(0.6, 80, 8) });
    await settle();
    expect(q("save").disabled).toBe(true);
    expect(q("save").title).toMatch(/above the ceiling/);
    model.set("readouts", { calibrated: readout(1, 0, 0), uncalibrated: readout(1, 0, 0) });
    await settle();
    expect(q("risk").textContent).toBe("none answered");
    expect(q("save").title).toBe("Nothing is answered at this threshold");
  });

  it("has one column and no side picker for probabilities of one kind", async () => {
    const model = explorerModel({
      use: "uncalibrated",
      info: { ...INFO, sides: ["uncalibrated"], temperature: null },
      readouts: { uncalibrated: readout(0.8, 75, 6) },
    });
    await shown(model);
    const head = [...q("readouts").querySelectorAll("thead th")].map((th) => th.textContent);
    expect(head).toEqual(["", "probabilities"]);
    expect(q("use").closest("label").hidden).toBe(true);
    expect(view.chart.plot.series).toHaveLength(3); // x, the curve, the ceiling
  });

  it("leaves nothing behind when disposed", async () => {
    const model = explorerModel();
    await shown(model);
    view.dispose();
    view = undefined;
    expect(el.querySelector(".nnx-abstention")).toBeNull();
    expect(model.listenerCount()).toBe(0);
  });
});
