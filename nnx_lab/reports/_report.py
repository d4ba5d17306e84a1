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
    BundleContents,
    CalibratorFile,
    DocumentFileError,
    JsonlReader,
    PolicyFile,
    atomic_write_bytes,
    check_shape,
    compare_records,
    event_from_line,
    parse_json,
    read_bundle,
    read_record,
    resolve_runs_root,
    run_dir,
    run_record,
)

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
.cursor{stroke:#999;stroke-dasharray:3}.selection{fill:#1f77b4;opacity:.15}
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


def _table(rows: list[tuple[str, Any]], changed: set[str] | None = None) -> str:
    out = []
    for key, value in rows:
        cls = ' class="changed"' if changed and key in changed else ""
        shown = value if isinstance(value, str) else json.dumps(value, default=str)
        out.append(f"<tr{cls}><th>{html.escape(key)}</th><td>{html.escape(shown)}</td></tr>")
    return "<table>" + "".join(out) + "</table>"


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


def _documents(contents: BundleContents) -> str:
    """The calibrators and policies the bundle carries, each through its strict shape."""
    parts = []
    for name in contents.manifest.calibrators:
        cal = check_shape(
            parse_json(contents.files[name], name), CalibratorFile, name, DocumentFileError
        )
        parts.append(
            f"<h3>Calibration ({html.escape(name)})</h3>"
            + _table(
                [
                    ("temperature", f"{cal.temperature:.4g}"),
                    (
                        "NLL on the calibration split",
                        f"{cal.fit.nll_before:.4g} -> {cal.fit.nll_after:.4g}",
                    ),
                    ("rows", cal.fit.rows),
                    (
                        "splits",
                        f"calibration {cal.splits.calibration}, train {cal.splits.train}, "
                        f"test {cal.splits.test}",
                    ),
                    ("model", cal.model_id),
                ]
            )
        )
    for name in contents.manifest.policies:
        pol = check_shape(
            parse_json(contents.files[name], name), PolicyFile, name, DocumentFileError
        )
        val = pol.validation
        parts.append(
            f"<h3>Abstention ({html.escape(name)})</h3>"
            + _table(
                [
                    ("kind", pol.kind),
                    ("threshold", f"{pol.threshold:.4g}"),
                    ("risk ceiling", f"{pol.risk_ceiling:.4g}"),
                    (
                        "on validation",
                        f"coverage {val.coverage:.3f}, risk {val.risk:.3f} "
                        f"({val.accepted} of {val.total} accepted)",
                    ),
                    ("calibrated", pol.calibration.calibrated),
                ]
            )
        )
    return "".join(parts)


def _bundle(contents: BundleContents | None) -> str:
    if contents is None:
        return (
            "<p>No bundle given (pass bundle= the folder or zip export_bundle wrote); no "
            "calibration or abstention report.</p>"
        )
    doc = contents.manifest
    summary = _table(
        [
            ("bundle", contents.path.name),
            ("capability", doc.capability),
            ("checkpoint", f"{doc.checkpoint} at epoch {doc.epoch} (step {doc.step})"),
            ("SHA-256 of its manifest", contents.manifest_sha256),
        ]
    )
    return summary + _documents(contents)


def report(
    run_id: str,
    path: str | os.PathLike[str],
    *,
    runs_root: str | os.PathLike[str] | None = None,
    bundle: str | os.PathLike[str] | None = None,
) -> Path:
    """Write run ``run_id``'s report as one HTML file at ``path`` (atomically; an
    existing file is replaced): its loss and metric charts, configuration, comparison
    with its parent, precision record, environment and, with ``bundle=``, the digest of
    the bundle exported from it. Returns ``path``."""
    if not isinstance(path, str | os.PathLike) or Path(path).is_dir():
        raise ConfigError("path", path, "name the .html file to write, not a folder")
    target = Path(path)
    if not target.parent.is_dir():
        raise ConfigError("path", str(target), f"its folder {target.parent} does not exist")
    page = report_html(run_id, runs_root=runs_root, bundle=bundle)
    atomic_write_bytes(target, page.encode())
    return target


def report_html(
    run_id: str,
    *,
    runs_root: str | os.PathLike[str] | None = None,
    bundle: str | os.PathLike[str] | None = None,
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
    config = read_record(folder / "run.yaml")
    meta = read_record(folder / "metadata.yaml") if (folder / "metadata.yaml").is_file() else {}
    log = folder / "metrics.jsonl"
    events = (
        [e for _, e in JsonlReader(log, decode=event_from_line).iter_numbered()]
        if log.is_file()
        else []
    )
    data = {"run_id": run_id, "charts": _charts(events)}
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
{_table(summary)}
<h2>Charts</h2><div id="charts"></div>
<h2>Configuration (run.yaml)</h2><pre>{html.escape(yaml.safe_dump(config, sort_keys=False))}</pre>
<h2>Against its parent</h2>{_drift(meta.get("parent_run_id"), run_id, root)}
<h2>Precision</h2>{_table(precision) if precision else "<p>No precision record.</p>"}
<h2>Environment</h2>{_table(environment)}
<h2>Bundle, calibration and abstention</h2>{_bundle(shared)}
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
