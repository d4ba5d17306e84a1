// nnx-lab's JupyterLab extension: the "nnx-lab runs" side panel, a main-area panel per
// run (the TrainingMonitor's view, following the run through nnx_lab.server with no
// kernel), compare panels, and the way in from a notebook (nnx_lab.open_in_panel and
// the link in the TrainingMonitor's header). The chart, series and formatting code is
// the anywidget bundle's own (js/shared, js/monitor): one code base, two entry points.
import "../shared/theme.css";
import "../shared/chart.css";
import "../monitor/monitor.css";
import "./lab.css";
import { ILabShell, ILayoutRestorer } from "@jupyterlab/application";
import { ICommandPalette, Notification, WidgetTracker } from "@jupyterlab/apputils";
import { URLExt } from "@jupyterlab/coreutils";
import { IRenderMimeRegistry } from "@jupyterlab/rendermime";
import { ServerConnection } from "@jupyterlab/services";
import { LabIcon } from "@jupyterlab/ui-components";
import { Widget } from "@lumino/widgets";
import { ApiError, RunsApi, dispositionName } from "./api.js";
import { CompareView } from "./compare_view.js";
import { OPEN_EVENT, OPEN_MIME, renderOpenRun } from "./open_run.js";
import { RunsList } from "./runs_list.js";
import { RunView } from "./run_view.js";

const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" width="16"><path class="jp-icon3" fill="#616161" d="M3 19h18v2H3zM4 17l4-6 4 3 5-8 3 2-6.6 10.2-4-3L6.4 18.4z"/></svg>`;
const COMMAND = { show: "nnx-lab:show-runs", open: "nnx-lab:open-run", compare: "nnx-lab:compare-runs", openPath: "nnx-lab:open-run-at" };

/** A REST request to nnx_lab.server through JupyterLab's connection (token, XSRF). */
function requester(settings) {
  return async (path, init = {}) => {
    const url = URLExt.join(settings.baseUrl, "nnx-lab/api", path);
    const { download = false, ...fetchInit } = init;
    let response;
    try {
      response = await ServerConnection.makeRequest(url, fetchInit, settings);
    } catch (err) {
      throw new ApiError(0, `the server did not answer (${err && err.message ? err.message : err})`);
    }
    if (download && response.ok) {
      const blob = await response.blob();
      return { blob, filename: dispositionName(response.headers.get("Content-Disposition"), "bundle.zip") };
    }
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (!response.ok) {
      const message = data && data.message ? data.message : `HTTP ${response.status}`;
      const hint = response.status === 404 && !data ? " (is the nnx_lab.server extension enabled? `jupyter server extension list`)" : "";
      throw new ApiError(response.status, message + hint);
    }
    return data;
  };
}

/** The renderer of nnx_lab.open_in_panel's output. */
class OpenRunRenderer extends Widget {
  constructor(options, open, inLab) {
    super();
    this.mimeType = options.mimeType;
    this.open = open;
    this.inLab = inLab;
    this.addClass("nnx-open-run");
  }
  async renderModel(model) {
    renderOpenRun(this.node, model.data[this.mimeType], { open: this.open, inLab: this.inLab, trusted: Boolean(model.trusted) });
  }
}

/** A Lumino widget around one of our DOM views. */
class ViewWidget extends Widget {
  constructor(make) {
    super();
    this.addClass("nnx-lab-widget");
    this.view = make(this.node);
  }
  dispose() {
    if (this.isDisposed) return;
    if (this.view) this.view.dispose();
    this.view = null;
    super.dispose();
  }
}

/** The side panel: its list refreshes while it is shown. */
class SidePanel extends Widget {
  constructor(list) {
    super({ node: list.node });
    this.list = list;
    this.addClass("nnx-lab-widget");
  }
  onAfterShow() {
    this.list.setActive(true);
  }
  onAfterHide() {
    this.list.setActive(false);
  }
}

const plugin = {
  id: "nnx-lab:runs",
  description: "The nnx-lab runs panel, run views, compare and Stop.",
  autoStart: true,
  optional: [ILabShell, ILayoutRestorer, ICommandPalette, IRenderMimeRegistry],
  activate: (app, labShell, restorer, palette, rendermime) => {
    const api = new RunsApi(requester(ServerConnection.makeSettings()));
    const icon = new LabIcon({ name: "nnx-lab:runs", svgstr: ICON_SVG });

    const openRun = async ({ folder, runId, label, beside = null }) => {
      const id = `nnx-lab-run-${folder}-${runId}`;
      const existing = runs.find((w) => w.id === id);
      if (existing) {
        app.shell.activateById(id);
        return existing;
      }
      const title = (name) => {
        widget.title.label = name ? name : `run ${runId.slice(0, 8)}`;
      };
      const widget = new ViewWidget((node) => new RunView(node, { api, folder, runId, folderLabel: label, onName: title }));
      widget.id = id;
      widget.title.label = `run ${runId.slice(0, 8)}`;
      widget.title.caption = `nnx-lab run ${runId}${label ? ` in ${label}` : ""}`;
      widget.title.icon = icon;
      widget.title.closable = true;
      widget.args = { folder, runId, label: label || "" };
      // side by side with the last run panel opened (live runs are watched together),
      // or with the notebook that asked for it
      const last = runs.currentWidget && !runs.currentWidget.isDisposed && runs.currentWidget.isAttached ? runs.currentWidget : null;
      const ref = last || beside;
      app.shell.add(widget, "main", ref ? { mode: "split-right", ref: ref.id } : undefined);
      await runs.add(widget);
      app.shell.activateById(id);
      return widget;
    };

    const compare = (list) => {
      const name = list.map((r) => `${r.folder}/${r.runId}`).join(",");
      const open = compares.find((w) => w.args.runs.map((r) => `${r.folder}/${r.runId}`).join(",") === name);
      if (open) {
        app.shell.activateById(open.id);
        return open;
      }
      const widget = new ViewWidget((node) => new CompareView(node, { api, runs: list }));
      widget.id = `nnx-lab-compare-${Date.now().toString(36)}`;
      widget.title.label = `compare ${list.length} runs`;
      widget.title.caption = `nnx-lab: ${list.map((r) => r.runId.slice(0, 8)).join(", ")}`;
      widget.title.icon = icon;
      widget.title.closable = true;
      widget.args = { runs: list };
      app.shell.add(widget, "main");
      compares.add(widget);
      app.shell.activateById(widget.id);
      return widget;
    };

    /** Open the run `runId` of the runs folder at `path` (what a kernel knows). */
    const openAt = async ({ runId, path }) => {
      const beside = app.shell.currentWidget && app.shell.currentWidget.id ? app.shell.currentWidget : null;
      try {
        for (const refresh of [false, true]) {
          const listing = await api.listRuns({ refresh });
          const folder = (listing.folders || []).find((f) => f.path === path);
          if (folder) return await openRun({ folder: folder.key, runId, label: folder.label, beside });
        }
      } catch (err) {
        Notification.error(`nnx-lab: cannot open run ${runId.slice(0, 8)}: ${err && err.message ? err.message : err}`, { autoClose: false });
        return null;
      }
      Notification.error(
        `nnx-lab: run ${runId.slice(0, 8)} is in ${path}, which the runs panel does not read. ` +
          "Add that folder to c.NNxLab.runs_roots (docs/lab_extension.md) and restart JupyterLab.",
        { autoClose: false },
      );
      return null;
    };

    const runs = new WidgetTracker({ namespace: "nnx-lab-run" });
    const compares = new WidgetTracker({ namespace: "nnx-lab-compare" });

    app.commands.addCommand(COMMAND.open, {
      label: (args) => (args && args.runId ? `Open nnx-lab run ${String(args.runId).slice(0, 8)}` : "Open nnx-lab run"),
      execute: (args) => openRun({ folder: String(args.folder), runId: String(args.runId), label: args.label ? String(args.label) : "" }),
    });
    app.commands.addCommand(COMMAND.openPath, {
      label: "Open an nnx-lab run by its runs folder",
      execute: (args) => openAt({ runId: String(args.runId), path: String(args.path) }),
    });
    app.commands.addCommand(COMMAND.compare, {
      label: "Compare nnx-lab runs",
      execute: (args) => compare(Array.isArray(args.runs) ? args.runs : []),
    });

    // Notebook 7 and other shells without a left area: only the way in from a notebook
    // is offered, as a link to JupyterLab (see open_run.js).
    const inLab = Boolean(labShell);
    if (rendermime) {
      rendermime.addFactory(
        {
          safe: true,
          mimeTypes: [OPEN_MIME],
          defaultRank: 10,
          createRenderer: (options) => new OpenRunRenderer(options, (args) => app.commands.execute(COMMAND.openPath, args), inLab),
        },
        10,
      );
    }
    if (!inLab) return;

    const list = new RunsList({
      api,
      onOpen: (row) => openRun({ folder: row.folder, runId: row.run_id, label: (list.folders[row.folder] || {}).label || "" }),
      onCompare: (rows) => compare(rows.map((r) => ({ folder: r.folder, runId: r.run_id, name: r.name || "", label: (list.folders[r.folder] || {}).label || "" }))),
    });
    const side = new SidePanel(list);
    side.id = "nnx-lab-runs";
    side.title.icon = icon;
    side.title.caption = "nnx-lab runs";
    app.shell.add(side, "left", { rank: 700 });

    app.commands.addCommand(COMMAND.show, {
      label: "Show nnx-lab runs",
      caption: "The runs the server finds, live: open, compare, stop",
      // after the layout is restored, or the restore would close the panel again
      execute: () => app.restored.then(() => app.shell.activateById(side.id)),
    });
    if (palette) palette.addItem({ command: COMMAND.show, category: "nnx-lab" });

    if (restorer) {
      restorer.add(side, "nnx-lab-runs");
      restorer.restore(runs, {
        command: COMMAND.open,
        args: (w) => w.args,
        name: (w) => `${w.args.folder}/${w.args.runId}`,
      });
      restorer.restore(compares, {
        command: COMMAND.compare,
        args: (w) => w.args,
        name: (w) => w.args.runs.map((r) => `${r.folder}/${r.runId}`).join(","),
      });
    }

    // The TrainingMonitor's header link (an anywidget view cannot reach the app): it
    // sends this event up the page; the marker on <body> tells it someone listens.
    document.addEventListener(OPEN_EVENT, (e) => {
      const d = e.detail || {};
      if (typeof d.run_id === "string" && typeof d.runs_root === "string") openAt({ runId: d.run_id, path: d.runs_root });
    });
    document.body.dataset.nnxLabRuns = "ready";
  },
};

export default plugin;
