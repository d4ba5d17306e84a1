// The theme's colours as the canvas needs them: a CSS variable read on an element
// (the --nnx-* tokens of theme.css, JupyterLab's --jp-* ones), with a fallback for
// pages outside JupyterLab; and the one watcher of theme switches every chart uses.

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

/** @type {Set<() => void>} */
const themeListeners = new Set();
/** @type {MutationObserver|null} */
let themeObserver = null;
let themeFrame = 0;

/** After the next two frames (at once where there are none, as in tests). */
function afterLayout(fn) {
  if (typeof requestAnimationFrame !== "function") {
    fn();
    return;
  }
  requestAnimationFrame(() => requestAnimationFrame(fn));
}

function themeChanged() {
  if (themeFrame) return;
  themeFrame = 1;
  // JupyterLab sets these attributes, then hides its whole shell and shows it again at
  // the next frame (ThemeManager): measured now, every container is 0 px wide. So the
  // listeners run once the shell is back, when sizes and the new colours can be read.
  afterLayout(() => {
    themeFrame = 0;
    for (const fn of [...themeListeners]) {
      try {
        fn();
      } catch (err) {
        console.error("nnx-lab: a theme listener failed", err);
      }
    }
  });
}

/**
 * Call `fn` after every switch between JupyterLab's themes (the attributes it sets on
 * <body>), once the page is laid out again. One observer serves the whole page.
 * Returns the function that stops listening.
 * @param {() => void} fn
 */
export function onThemeChange(fn) {
  if (typeof MutationObserver === "undefined" || typeof document === "undefined" || !document.body) return () => {};
  themeListeners.add(fn);
  if (!themeObserver) {
    themeObserver = new MutationObserver(themeChanged);
    themeObserver.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-name", "data-jp-theme-light"] });
  }
  return () => {
    themeListeners.delete(fn);
    if (themeListeners.size === 0 && themeObserver) {
      themeObserver.disconnect();
      themeObserver = null;
    }
  };
}
