// What a run's declared task and monitor change in the TrainingMonitor view: the loss
// axis title, the epoch chart's first metric and axis title, the training columns of
// the epoch table, and a column with the monitor's decision per epoch (§2.5, §2.6).
import { fmtValue } from "../shared/format.js";

/** Per task kind: the loss axis title, the metric the epoch chart opens on, and the
 * training-epoch metrics the table shows (besides every validation metric). */
const TASKS = {
  regression: { loss: "loss (mean squared error)", metric: "mse", train: ["loss", "mse", "mae"] },
  multilabel: { loss: "loss (binary cross-entropy)", metric: "subset_accuracy", train: ["loss", "subset_accuracy"] },
  categorical: { loss: "loss (cross-entropy)", metric: "loss", train: ["loss"] },
};
const DEFAULT = { loss: "loss", metric: "loss", train: ["loss"] };

/** @param {string} kind the model's `task_kind` trait ("" for a run without a task) */
export function taskView(kind) {
  return TASKS[kind] || DEFAULT;
}

/** The metric the epoch chart shows first: the monitored one, else the task's. */
export function firstMetric(kind, monitorKey, names) {
  const monitored = monitorKey ? monitorKey.slice(monitorKey.indexOf(".") + 1) : "";
  for (const name of [monitored, taskView(kind).metric, "loss"]) if (name && names.includes(name)) return name;
  return names[0] || "";
}

/** A human title for an axis showing `metric` ("subset_accuracy" -> "subset accuracy"). */
export function metricTitle(metric) {
  return metric ? metric.replaceAll("_", " ") : "value";
}

/** Set a chart's y-axis title, rebuilding it only when the title changes. */
export function setYTitle(chart, title) {
  if (chart.opts.yLabel === title) return;
  chart.opts.yLabel = title;
  chart.refreshTheme(); // rebuilds the plot with the new options
}

/** Training-epoch table columns for this task (those the epoch series holds). */
export function trainColumns(kind, store, value, spread) {
  return taskView(kind)
    .train.filter((n) => n === "loss" || store.has(`train.${n}`))
    .map((n) => ({ key: `train.${n}`, label: `train ${metricTitle(n)}`, cell: value(`train.${n}`), title: spread(`train.${n}`) }));
}

/**
 * The monitor's decision per epoch: its value, and whether it improved (★ is BEST),
 * did not, or had no value. Null when the run declares no monitor.
 * @param {string} monitorKey e.g. "val.nll" @param {string} mode "min" | "max"
 */
export function monitorColumn(store, monitorKey, mode) {
  if (!monitorKey || !store.has("monitor")) return null;
  const value = store.column("monitor");
  const improved = store.column("improved");
  const first = store.column("first");
  const epoch = store.column("epoch");
  const arrow = mode === "max" ? "↑" : mode === "min" ? "↓" : "";
  const [split, ...rest] = monitorKey.split(".");
  const name = `${split} ${metricTitle(rest.join("."))}`;
  return {
    key: "monitor",
    label: `monitor: ${name} ${arrow}`.trim(),
    cell: (i) => {
      if (first[i] !== epoch[i]) return `${fmtValue(value[i])} (mean)`; // merged rows
      if (!Number.isFinite(value[i])) return "unavailable";
      return `${fmtValue(value[i])} ${improved[i] ? "improved" : "no improvement"}`;
    },
    title: (i) => (Number.isFinite(value[i]) ? `${name}: ${improved[i] ? "improved: this epoch became BEST" : "did not improve on the best by more than min_delta"}` : `${name} had no finite value this epoch`),
  };
}
