// The Sweep widget's entry: anywidget reads the default export.
import "../shared/theme.css";
import "./sweep.css";
import { SweepView } from "./view.js";

/** @param {{model: any, el: HTMLElement, host?: any, signal?: AbortSignal}} ctx */
function render({ model, el, host, signal }) {
  const view = new SweepView(model, el, { host, signal });
  return () => view.dispose();
}

export default { render };
