import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { firstMetric, metricTitle } from "../../js/monitor/task.js";
import { MonitorView } from "../../js/monitor/view.js";
import { byTestId, disposeView, epochColumns, fakeModel, op, settle, snapshot, stepColumns, testHost } from "./helpers.js";

const el = testHost();
const q = byTestId(el);
let view;
afterEach(() => (view = disposeView(view)));

/** Epoch columns of a regression run with a monitor on val mae: epochs 1..4, the
 * monitor improves at 1 and 3, has no value at 4. */
function regressionEpochs() {
  const cols = epochColumns(1, 4, { val: false });
  const add = (name, values) => {
    cols[name] = ["float32", values];
    cols[`${name}:min`] = ["float32", values];
    cols[`${name}:max`] = ["float32", values];
  };
  add("train.mse", [4, 3, 2, 1]);
  add("train.mae", [2, 1.5, 1.2, 1]);
  add("val.loss", [5, 4.5, 3, NaN]);
  add("val.mse", [5, 4.5, 3, NaN]);
  add("val.mae", [2.2, 2.3, 1.5, NaN]);
  add("monitor", [2.2, 2.3, 1.5, NaN]);
  cols.improved = ["int32", [1, 0, 1, 0]];
  return cols;
}

async function shown(model, epochs) {
  view = new MonitorView(model, el);
  const hello = model.lastHello();
  const s = snapshot(hello.view, hello.req, 1, [op("steps", 0, stepColumns(1, 40)), op("epochs", 0, epochs)]);
  model.custom(s.content, s.buffers);
  await settle();
  return view;
}

describe("TrainingMonitor view: declared tasks and the monitor", () => {
  it("titles the loss axis by the task and opens the epoch chart on the monitored metric", async () => {
    const model = fakeModel({ status: "finished", task_kind: "regression", monitor_metric: "val.mae", monitor_mode: "min" });
    await shown(model, regressionEpochs());
    expect(view.lossChart.opts.yLabel).toBe("loss (mean squared error)");
    expect(view.lossChart.plot.axes[1].label).toBe("loss (mean squared error)");
    expect(q("metric-select").value).toBe("mae");
    expect(view.epochChart.plot.axes[1].label).toBe("mae");
    expect([...view.epochChart.plot.data[1]].slice(0, 3)).toEqual([2.2, 2.3, 1.5].map(Math.fround));
  });

  it("shows the task's training columns and the monitor's decision per epoch", async () => {
    const model = fakeModel({ status: "finished", task_kind: "regression", monitor_metric: "val.mae", monitor_mode: "min" });
    await shown(model, regressionEpochs());
    const heads = [...q("epochs-table").querySelectorAll("th")].map((th) => th.textContent);
    expect(heads).toEqual(expect.arrayContaining(["train loss", "train mse", "train mae", "val mse", "val mae", "monitor: val mae ↓"]));
    expect(heads.indexOf("train mse")).toBeLessThan(heads.indexOf("val loss"));
    const col = heads.indexOf("monitor: val mae ↓");
    const cells = [...q("epochs-table").querySelectorAll("tbody tr")].map((tr) => tr.children[col].textContent);
    expect(cells).toEqual(["2.2 improved", "2.3 no improvement", "1.5 improved", "unavailable"]);
  });

  it("follows a switch of task: multilabel titles, and the user's pick of a metric sticks", async () => {
    const model = fakeModel({ status: "running" });
    const cols = epochColumns(1, 3);
    cols["val.subset_accuracy"] = ["float32", [0.1, 0.2, 0.3]];
    await shown(model, cols);
    expect(view.lossChart.opts.yLabel).toBe("loss");
    expect(q("metric-select").value).toBe("loss");
    model.set("task_kind", "multilabel");
    await settle();
    expect(view.lossChart.plot.axes[1].label).toBe("loss (binary cross-entropy)");
    expect(q("metric-select").value).toBe("subset_accuracy");
    q("metric-select").value = "accuracy";
    q("metric-select").dispatchEvent(new Event("change"));
    expect(view.epochChart.plot.axes[1].label).toBe("accuracy");
    view._renderEpochs(); // new rows arrive: the pick stays
    expect(q("metric-select").value).toBe("accuracy");
  });

  it("shows the columns a regression has: none of the classification metrics it never computed", async () => {
    const model = fakeModel({ status: "finished", task_kind: "regression", monitor_metric: "val.mae", monitor_mode: "min" });
    const cols = regressionEpochs();
    for (const name of ["error", "accuracy", "precision", "recall", "f1"]) {
      const missing = [NaN, NaN, NaN, NaN];
      cols[`val.${name}`] = ["float32", missing];
      cols[`val.${name}:min`] = ["float32", missing];
      cols[`val.${name}:max`] = ["float32", missing];
    }
    await shown(model, cols);
    const heads = [...q("epochs-table").querySelectorAll("th")].map((th) => th.textContent);
    expect(heads).toEqual(["epoch", "step", "train loss", "train mse", "train mae", "val loss", "val mse", "val mae", "monitor: val mae ↓", "lr", "time"]);
    const offered = [...q("metric-select").options].map((o) => o.value);
    expect(offered).toEqual(["loss", "mse", "mae"]);
    // the monitor's column on one line; the epoch stays in view when the table scrolls
    const row = q("epochs-table").querySelector("tbody tr");
    expect(row.children[heads.indexOf("monitor: val mae ↓")].className).toContain("nnx-nowrap");
    expect(row.children[0].className).toContain("nnx-sticky");
    expect(q("epochs-table").querySelector("th").className).toContain("nnx-sticky");
    const css = readFileSync(resolve("js/monitor/monitor.css"), "utf8");
    expect(css).toMatch(/\.nnx-table \.nnx-sticky \{ position: sticky; left: 0;/);
  });

  it("a run without a task or monitor keeps the plain table", async () => {
    const model = fakeModel({ status: "finished" });
    await shown(model, epochColumns(1, 2));
    const heads = [...q("epochs-table").querySelectorAll("th")].map((th) => th.textContent);
    expect(heads.filter((h) => h.startsWith("train"))).toEqual(["train loss"]);
    expect(heads.some((h) => h.startsWith("monitor"))).toBe(false);
  });

  it("picks the first metric in order and titles metrics readably", () => {
    expect(firstMetric("regression", "val.mae", ["loss", "mse", "mae"])).toBe("mae");
    expect(firstMetric("regression", "", ["loss", "mse"])).toBe("mse");
    expect(firstMetric("", "val.nll", ["loss", "accuracy"])).toBe("loss");
    expect(firstMetric("", "", ["accuracy"])).toBe("accuracy");
    expect(metricTitle("subset_accuracy")).toBe("subset accuracy");
  });
});
