// The base of the views the kernel sends series to (the monitor, the LR finder, the
// explorers): WidgetView and the view's side of the transport (shared/transport.js).
// Views with traits only (drift, dataset summary, plan builder) extend WidgetView and
// carry no transport code.
import { ViewSync } from "./transport.js";
import { WidgetView } from "./view.js";

export class SeriesView extends WidgetView {
  /** @param {import("./view.js").Model} model @param {HTMLElement} el */
  constructor(model, el) {
    super(model, el);
    /** @type {ViewSync|null} set by _connect */
    this.sync = null;
  }

  /**
   * Receive these series from the kernel (shared/transport.js): `onChange(names)` after
   * each change; a transport error shows under the widget until the next change. Say
   * hello (this.sync.hello()) once the view is built.
   * @param {{series: string[], accept?: (name: string) => boolean, onChange: (names: Set<string>) => void}} opts
   */
  _connect({ series, accept, onChange }) {
    this.sync = new ViewSync(this.model, {
      series,
      accept,
      onChange: (names) => {
        this._clearSyncError();
        onChange(names);
      },
      onError: (text) => {
        this._syncError = text;
        this._error();
      },
    });
    this._on("msg:custom", (msg, buffers) => this.sync.handle(msg, buffers));
    this._onDispose(() => this.sync.dispose());
    return this.sync;
  }
}
