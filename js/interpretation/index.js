// The Interpretation widget's entry: anywidget reads the default export.
import "../shared/theme.css";
import "./interpretation.css";
import { InterpretationView } from "./view.js";

/** @param {{model: any, el: HTMLElement}} ctx */
function render({ model, el }) {
  const view = new InterpretationView(model, el);
  return () => view.dispose();
}

export default { render };
