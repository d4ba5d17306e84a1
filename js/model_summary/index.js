// The ModelSummary widget's entry: anywidget reads the default export.
import "../shared/theme.css";
import "./model_summary.css";
import { ModelSummaryView } from "./view.js";

/** @param {{model: any, el: HTMLElement}} ctx */
function render({ model, el }) {
  const view = new ModelSummaryView(model, el);
  return () => view.dispose();
}

export default { render };
