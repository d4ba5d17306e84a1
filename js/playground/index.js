// The GenerationPlayground widget's entry: anywidget reads the default export.
import "../shared/theme.css";
import "./playground.css";
import { PlaygroundView } from "./view.js";

/** @param {{model: any, el: HTMLElement}} ctx */
function render({ model, el }) {
  const view = new PlaygroundView(model, el);
  return () => view.dispose();
}

export default { render };
