"""``report(run_id, path)``: one self-contained HTML file of a run (docs/report.md).

Everything is read from the run's folder through the strict readers of ``nnx_lab.runs``
(``run.yaml``, ``metadata.yaml``, ``metrics.jsonl``; the parent's record for the
comparison), so this needs no torch and imports nothing a file names. The page inlines
its data (JSON in a ``<script type="application/json">``) and its chart code, and loads
nothing from the network.
"""

from __future__ import annotations

import html
import json
import math
import os
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError
from ..runs import (
    JsonlReader,
    atomic_write_bytes,
    compare_records,
    event_from_line,
    read_binding,
    read_bundle,
    read_bundle_exports,
    read_record,
    resolve_runs_root,
    run_dir,
    run_record,
)
from ._documents import documents
from ._identity import check_documents, run_weights
from ._sections import binding_section, bundle_section, documents_section, table

__all__ = ["report", "report_html"]

# the chart code, inlined into every page (chart.js says why not uPlot)
CHART_JS = (files(__package__) / "chart.js").read_text(encoding="utf-8")
MAX_POINTS = 2000  # per series: a long run's steps are thinned to this many (every n-th)
_ENVIRONMENT = ("nnx_lab", "torch", "numpy", "safetensors", "python", "platform", "device")
_METRICS = ("loss", "error", "accuracy", "f1")

# the page may run its own inline code and nothing else: no fetch, no image, no font
_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"
_CSS = """
body{font:14px system-ui,sans-serif;margin:24px;max-width:1000px;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
pre{background:#f6f6f6;padding:8px;overflow:auto;max-height:400px}
.chart-box{margin:12px 0}.chart-head span,.chart-head label{margin-left:12px}
.readout{font:12px monospace;color:#555;min-height:16px}
svg.chart{max-width:100%;height:auto;user-select:none}
.frame{fill:none;stroke:#ccc}.tick{font:10px sans-serif;fill:#666}
.cursor{stroke:#999;stroke-dasharray:3}.mark{stroke:#2ca02c;stroke-dasharray:4 2}
.selection{fill:#1f77b4;opacity:.15}
.changed{background:#fff3cd}
"""


def _thin(xs: list[Any], ys: list[Any]) -> tuple[list[Any], list[Any]]:
    if len(xs) <= MAX_POINTS:
        return xs, ys
    every = -(-len(xs) // MAX_POINTS)
    keep = list(range(0, len(xs), every))
    if keep[-1] != len(xs) - 1:
        keep.append(len(xs) - 1)  # the last point always shows
    return [xs[i] for i in keep], [ys[i] for i in keep]


def _series(name: str, xs: list[Any], ys: list[Any]) -> dict[str, Any]:
    # a chart has no point for None or a non-finite value: a gap
    ys = [y if isinstance(y, int | float) and math.isfinite(y) else None for y in ys]
    xs, ys = _thin(xs, ys)
    return {"name": name, "x": xs, "y": ys}


def _charts(events: list[Any]) -> list[dict[str, Any]]:
    steps = [r for e in events if e.kind == "step_metrics" for r in e.records]
    epochs = [e for e in events if e.kind == "epoch_ended"]
    charts = []
    if steps:
        charts.append(
            {
                "id": "step-loss",
                "title": "Training loss per step",
                "xlabel": "step",
                "series": [_series("loss", [r.step for r in steps], [r.loss for r in steps])],
            }
        )
    xs = [e.epoch for e in epochs]
    names = [m for m in _METRICS if any(m in e.train or m in (e.val or {}) for e in epochs)]
    declared = sorted({k for e in epochs for k in ((e.val or {}).get("metrics") or {})})
    for name in [*names, *declared]:
        series = []
        for split in ("train", "val"):
            ys = [
                (getattr(e, split) or {}).get("metrics", {}).get(name)
                if name in declared
                else (getattr(e, split) or {}).get(name)
                for e in epochs
            ]
            if any(isinstance(y, int | float) for y in ys):
                series.append(_series(split, xs, ys))
        if series:
            charts.append(
                {
                    "id": f"epoch-{name}",
                    "title": f"{name} per epoch",
                    "xlabel": "epoch",
                    "series": series,
                }
            )
    return charts


def _drift(parent: str | None, run_id: str, root: Path) -> str:
    if parent is None:
        return "<p>No parent run: this run did not resume another.</p>"
    if not (run_dir(root, parent, "parent_run_id") / "run.yaml").is_file():
        return f"<p>Parent run {html.escape(parent)} is not under this runs root.</p>"
    report = compare_records(run_record(parent, root), run_record(run_id, root), handle="pair")
    rows = [
        f"<tr><td>{html.escape(r.what)}</td><td>{html.escape(str(r.then))}</td>"
        f"<td>{html.escape(str(r.now))}</td><td>{'yes' if r.changes_run_id else 'no'}</td></tr>"
        for r in report.changed
    ]
    head = "<tr><th>what</th><th>parent</th><th>this run</th><th>changes the id</th></tr>"
    if not rows:
        return f"<p>Nothing differs from parent {html.escape(parent)}.</p>"
    return f"<p>Against parent {html.escape(parent)}:</p><table>{head}{''.join(rows)}</table>"


def report(
    run_id: str,
    path: str | os.PathLike[str],
    *,
    runs_root: str | os.PathLike[str] | None = None,
    bundle: str | os.PathLike[str] | None = None,
    calibrators: Any = None,
    policies: Any = None,
) -> Path:
    """Write run ``run_id``'s report as one HTML file at ``path`` (atomically; an
    existing file is replaced): its loss and metric charts, configuration, the binding
    report of a plan's fit, comparison with its parent, precision record, environment,
    the ``calibrators=`` and ``policies=`` given (with a reliability diagram and a
    risk-coverage curve where they record one) and the bundle exported from it
    (``bundle=``, else the latest the run recorded). Returns ``path``."""
    if not isinstance(path, str | os.PathLike) or Path(path).is_dir():
        raise ConfigError("path", path, "name the .html file to write, not a folder")
    target = Path(path)
    if not target.parent.is_dir():
        raise ConfigError("path", str(target), f"its folder {target.parent} does not exist")
    page = report_html(
        run_id, runs_root=runs_root, bundle=bundle, calibrators=calibrators, policies=policies
    )
    atomic_write_bytes(target, page.encode())
    return target


def report_html(
    run_id: str,
    *,
    runs_root: str | os.PathLike[str] | None = None,
    bundle: str | os.PathLike[str] | None = None,
    calibrators: Any = None,
    policies: Any = None,
) -> str:
    """The page ``report`` writes, as text (the runs panel sends it as a download and
    writes nothing). Refused with a ``ConfigError`` as ``report`` is."""
    if bundle is not None and not os.path.lexists(bundle):
        raise ConfigError("bundle", str(bundle), "no such bundle; pass what export_bundle wrote")
    root = resolve_runs_root(runs_root)
    folder = run_dir(root, run_id, "run_id")
    if not (folder / "run.yaml").is_file():
        raise ConfigError(
            "run_id", run_id, f"no such run under {root}; check the id, or pass runs_root="
        )
    # the whole bundle is checked (every digest) before it is reported on
    shared = None if bundle is None else read_bundle(bundle)
    if shared is not None and shared.manifest.run_id != run_id:
        raise ConfigError(
            "bundle",
            str(bundle),
            f"is a bundle of run {shared.manifest.run_id}, not of {run_id}; pass the "
            "bundle exported from this run",
        )
    docs = documents(calibrators, policies)
    exports = read_bundle_exports(folder)
    verdicts = check_documents(docs, run_weights(folder, exports), run_id) if docs else {}
    shown, doc_charts = documents_section(docs, verdicts, MAX_POINTS)
    config = read_record(folder / "run.yaml")
    meta = read_record(folder / "metadata.yaml") if (folder / "metadata.yaml").is_file() else {}
    log = folder / "metrics.jsonl"
    events = (
        [e for _, e in JsonlReader(log, decode=event_from_line).iter_numbered()]
        if log.is_file()
        else []
    )
    data = {"run_id": run_id, "charts": _charts(events), "documents": doc_charts}
    summary = [
        ("run id", run_id),
        ("name", meta.get("name") or "-"),
        ("status", meta.get("status", "unknown")),
        ("epochs completed", meta.get("epochs_completed", "-")),
        ("steps", meta.get("steps", "-")),
        ("parent run", meta.get("parent_run_id") or "-"),
        ("best", meta.get("best") or "-"),
    ]
    environment = [(k, meta[k]) for k in _ENVIRONMENT if k in meta]
    precision = list((meta.get("precision") or {}).items())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_CSP}">
<title>nnx-lab run {html.escape(run_id)}</title><style>{_CSS}</style></head>
<body>
<h1>nnx-lab run {html.escape(run_id)}</h1>
{table(summary)}
<h2>Charts</h2><div id="charts"></div>
<h2>Configuration (run.yaml)</h2><pre>{html.escape(yaml.safe_dump(config, sort_keys=False))}</pre>
<h2>Binding (where each value came from)</h2>{binding_section(read_binding(folder), run_id)}
<h2>Against its parent</h2>{_drift(meta.get("parent_run_id"), run_id, root)}
<h2>Precision</h2>{table(precision) if precision else "<p>No precision record.</p>"}
<h2>Environment</h2>{table(environment)}
<h2>Calibration and abstention</h2>{shown}
<h2>Bundle</h2>{bundle_section(shared, exports)}
<p><small>Written by nnx-lab's report().</small></p>
<script type="application/json" id="nnx-report-data">{_json_for_script(data)}</script>
<script>{CHART_JS}</script>
</body></html>
"""


def _json_for_script(value: Any) -> str:
    """JSON that cannot end its ``<script>`` element early (``</`` is escaped)."""
    text = json.dumps(value, allow_nan=False, default=_finite)
    return text.replace("</", "<\\/")


def _finite(value: Any) -> Any:
    raise TypeError(f"not JSON: {value!r}")
