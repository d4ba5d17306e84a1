// The DriftReport widget's entry: anywidget reads the default export.
import "../shared/theme.css";
import "./drift.css";
import { DriftView } from "./view.js";

/** @param {{model: any, el: HTMLElement}} ctx */
function render({ model, el }) {
  const view = new DriftView(model, el);
  return () => view.dispose();
}

export default { render };
