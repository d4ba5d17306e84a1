// What every widget's view shares: the model's listeners (all removed on dispose), the
// root box (theme.css .nnx-widget) and the error under it, redraws once per frame, and
// the cleanup of dispose. A view extends WidgetView (or SeriesView, series_view.js,
// when the kernel sends it series), builds its parts and wires the traits it reads.
import { frameScheduler, h } from "./dom.js";

/**
 * The part of an anywidget model a view uses.
 * @typedef {{get(name: string): any, set(name: string, value: any): void,
 *   on(event: string, cb: Function): void, off(event: string, cb?: Function): void,
 *   save_changes(): void, send(content: any, callbacks?: any, buffers?: any[]): void}} Model
 */

export class WidgetView {
  /** @param {Model} model @param {HTMLElement} el */
  constructor(model, el) {
    this.model = model;
    this.el = el;
    /** @type {Array<[string, Function]>} */
    this._listeners = [];
    /** @type {Function[]} run by dispose, after the listeners are gone */
    this._cleanups = [];
    /** the view's own error (the kernel out of reach), shown until the kernel answers */
    this._syncError = "";
    this._disposed = false;
  }

  /** Listen to the model until dispose. */
  _on(event, cb) {
    this.model.on(event, cb);
    this._listeners.push([event, cb]);
  }

  /** Run `fn` on dispose. */
  _onDispose(fn) {
    this._cleanups.push(fn);
  }

  /**
   * The widget's box, in the page at once (charts size themselves from their container).
   * @param {string} classes the widget's own classes @param {string} label its region's name
   */
  _makeRoot(classes, label) {
    this.root = h("div", { class: `nnx-widget ${classes}`, role: "region", "aria-label": label });
    this.el.append(this.root);
    return this.root;
  }

  /**
   * The box for errors under the widget, showing the model's `error` trait (hidden
   * while empty); the view listens to "change:error" with its other traits.
   */
  _makeError(testid = "error") {
    this.error = h("pre", { class: "nnx-error", "data-testid": testid, role: "alert" });
    this._error();
    return this.error;
  }

  /** The kernel's error first; the view's own until the kernel answers. */
  _error() {
    const text = this.model.get("error") || this._syncError || "";
    this.error.textContent = text;
    this.error.hidden = !text;
  }

  /** The kernel answered: the view's own error goes. */
  _clearSyncError() {
    if (!this._syncError) return;
    this._syncError = "";
    this._error();
  }

  /** Coalesce redraws into one call of `fn` per animation frame; none after dispose. */
  _frameScheduler(fn) {
    const frames = frameScheduler(() => {
      if (!this._disposed) fn();
    });
    this._onDispose(() => frames.cancel());
    return frames;
  }

  /** Write a trait to the kernel. */
  _setTrait(name, value) {
    this.model.set(name, value);
    this.model.save_changes();
  }

  dispose() {
    this._disposed = true;
    for (const [event, cb] of this._listeners) this.model.off(event, cb);
    this._listeners.length = 0;
    for (const fn of this._cleanups.splice(0)) fn();
    if (this.root) this.root.remove();
  }
}
