// The LRFinderWidget's entry: anywidget reads the default export.
import "../shared/theme.css";
import "../shared/chart.css";
import "./lr_finder.css";
import { LRFinderView } from "./view.js";

/** @param {{model: any, el: HTMLElement}} ctx */
function render({ model, el }) {
  const view = new LRFinderView(model, el);
  return () => view.dispose();
}

export default { render };
