// The DatasetSummary widget's entry: anywidget reads the default export.
import "../shared/theme.css";
import "./dataset_summary.css";
import { DatasetSummaryView } from "./view.js";

/** @param {{model: any, el: HTMLElement}} ctx */
function render({ model, el }) {
  const view = new DatasetSummaryView(model, el);
  return () => view.dispose();
}

export default { render };
