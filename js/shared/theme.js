// The theme's colours as the canvas needs them: a CSS variable read on an element
// (the --nnx-* tokens of theme.css, JupyterLab's --jp-* ones), with a fallback for
// pages outside JupyterLab.

/** Read a CSS variable on `el`, with a fallback for pages outside JupyterLab. */
export function cssVar(el, name, fallback) {
  try {
    const v = getComputedStyle(el).getPropertyValue(name).trim();
    return v || fallback;
  } catch {
    return fallback;
  }
}

/** A colour given as a CSS variable name is resolved on `el`; others pass through. */
export function resolveColor(el, color, fallback = "#888") {
  return color && color.startsWith("--") ? cssVar(el, color, fallback) : color || fallback;
}
