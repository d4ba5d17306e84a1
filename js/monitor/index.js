// The TrainingMonitor widget's entry: anywidget reads the default export.
import "../shared/theme.css";
import "../shared/chart.css";
import "./monitor.css";
import { MonitorView } from "./view.js";

/** @param {{model: import("../shared/view.js").Model, el: HTMLElement}} ctx */
function render({ model, el }) {
  const view = new MonitorView(model, el);
  return () => view.dispose();
}

export default { render };
