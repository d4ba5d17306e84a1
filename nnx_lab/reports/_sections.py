"""The report's sections that come from documents beside the run: calibration and
abstention (``calibrators=`` / ``policies=``, and what a bundle carries), the binding
report of a plan's fit (``binding.json``) and the bundles exported from the run
(``bundle=``, or the run's ``bundles.json``). HTML text plus the chart data the inlined
chart code draws (a reliability diagram, a risk-coverage curve)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from ..runs import (
    BindingFile,
    BundleContents,
    BundleExportsFile,
    CalibratorFile,
    DocumentFileError,
    PolicyFile,
    check_shape,
    parse_json,
)
from ._documents import Documents

__all__ = ["binding_section", "bundle_section", "documents_section", "table"]


def table(rows: list[tuple[str, Any]], changed: set[str] | None = None) -> str:
    out = []
    for key, value in rows:
        cls = ' class="changed"' if changed and key in changed else ""
        shown = value if isinstance(value, str) else json.dumps(value, default=str)
        out.append(f"<tr{cls}><th>{html.escape(key)}</th><td>{html.escape(shown)}</td></tr>")
    return "<table>" + "".join(out) + "</table>"


def _g(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _keep(n: int, most: int) -> list[int]:
    """Every n-th index so at most ``most`` (+1: the last always shows) remain."""
    if n <= most:
        return list(range(n))
    every = -(-n // most)
    keep = list(range(0, n, every))
    if keep[-1] != n - 1:
        keep.append(n - 1)
    return keep


# -- calibration and abstention -----------------------------------------------------------------
def _calibrator_rows(cal: CalibratorFile) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = [
        ("temperature", f"{cal.temperature:.4g}"),
        (
            "NLL on the calibration split",
            f"{_g(cal.fit.nll_before)} -> {_g(cal.fit.nll_after)}"
            if cal.fit.nll_before is not None
            else "not recorded (built from a temperature)",
        ),
        ("rows", cal.fit.rows if cal.fit.rows is not None else "-"),
        ("iterations", cal.fit.iterations),
        ("kind", f"{cal.spec.kind}, {cal.n_outputs} outputs"),
        ("labels", cal.spec.labels if cal.spec.labels is not None else "-"),
        (
            "splits",
            f"calibration {cal.splits.calibration}, train {cal.splits.train}, "
            f"test {cal.splits.test}",
        ),
        ("disjointness", cal.splits.disjointness),
        ("model", cal.model_id),
    ]
    if cal.fit.config:
        rows.append(("fit config", cal.fit.config))
    if cal.fit.result:
        rows.append(("fit result", cal.fit.result))
    return rows


def _policy_rows(pol: PolicyFile) -> list[tuple[str, Any]]:
    val, bound, cal = pol.validation, pol.guarantee, pol.calibration
    return [
        ("kind", pol.kind),
        ("threshold", f"{pol.threshold:.4g}"),
        ("risk ceiling", "-" if pol.risk_ceiling is None else f"{pol.risk_ceiling:.4g}"),
        (
            "on validation",
            "not recorded (built directly)"
            if val is None
            else f"coverage {val.coverage:.3f}, risk {val.risk:.3f} ({val.accepted} of "
            f"{val.total} accepted, {val.errors} wrong)",
        ),
        (
            "guarantee",
            "none"
            if bound is None
            else f"risk <= {bound.risk_bound:.4g} with probability {bound.level:.4g}",
        ),
        (
            "calibrated",
            f"yes, T = {cal.temperature:.4g}" if cal.calibrated and cal.temperature else "no",
        ),
        ("classes", pol.labels if pol.labels is not None else pol.n_classes),
        ("splits", f"validation {pol.splits.validation}, test {pol.splits.test}"),
        ("model", pol.model_id or "-"),
        ("note", pol.note),
    ]


def _reliability_chart(cid: str, rep: Any) -> dict[str, Any]:
    def series(name: str, d: Any) -> dict[str, Any]:
        return {
            "name": name,
            "counts": d.counts,
            "confidence": d.confidence,
            "accuracy": d.accuracy,
            "ece": d.ece,
        }

    return {
        "id": cid,
        "kind": "reliability",
        "title": f"Reliability on {rep.split_id!r} ({rep.bins} bins)",
        "edges": rep.reliability_before.edges,
        "series": [
            series("before", rep.reliability_before),
            series(f"after (T = {rep.temperature:.4g})", rep.reliability_after),
        ],
    }


def _curve_chart(cid: str, pol: PolicyFile, curve: Any, most: int) -> dict[str, Any]:
    keep = _keep(len(curve.thresholds), most)
    val = pol.validation
    return {
        "id": cid,
        "title": f"Risk-coverage on {pol.splits.validation!r} ({pol.kind})",
        "xlabel": "coverage",
        "xfloat": True,
        "series": [
            {
                "name": "risk",
                "x": [curve.coverage[i] for i in keep],
                "y": [curve.risk[i] for i in keep],
            }
        ],
        "extra": {"name": "threshold", "values": [curve.thresholds[i] for i in keep]},
        "mark": None
        if val is None
        else {"x": val.coverage, "label": f"threshold {pol.threshold:.4g}"},
    }


def documents_section(
    docs: Documents, verdicts: dict[str, str], most: int
) -> tuple[str, list[dict[str, Any]]]:
    """The HTML of ``calibrators=`` / ``policies=`` and the charts it draws."""
    if not docs:
        return (
            "<p>None given: pass calibrators=[...] (a calibrator, its file, or the "
            "CalibrationReport of calibrator.report(...) for the reliability diagram) and "
            "policies=[...] (a policy, its file, or the ThresholdSelection for the "
            "risk-coverage curve).</p>",
            [],
        )
    parts, charts = [], []
    for name, cal in docs.calibrators:
        rows = [*_calibrator_rows(cal), ("this run", verdicts.get(name, "-"))]
        parts.append(f"<h3>Calibrator {html.escape(name)}</h3>{table(rows)}")
    for k, (name, rep) in enumerate(docs.reports):
        b, a = rep.before, rep.after
        rows = [
            ("held-out split", f"{rep.split_id} ({rep.rows} rows)"),
            ("temperature", f"{rep.temperature:.4g} (fitted on {rep.calibration_split_id})"),
            ("NLL", f"{_g(b.nll)} -> {_g(a.nll)}"),
            ("Brier", f"{_g(b.brier)} -> {_g(a.brier)}"),
            (f"ECE ({rep.bins} bins)", f"{_g(b.ece)} -> {_g(a.ece)}"),
            ("improved", "yes" if rep.improved else "no: held-out NLL or Brier got worse"),
            ("overrides", ", ".join(rep.overrides) or "none"),
            ("model", rep.model_id),
            ("this run", verdicts.get(name, "-")),
        ]
        cid = f"reliability-{k}"
        charts.append(_reliability_chart(cid, rep))
        parts.append(
            f"<h3>Calibration report {html.escape(name)}</h3>{table(rows)}"
            f'<div class="chart-slot" data-slot="{cid}"></div>'
        )
    for k, (name, pol, curve) in enumerate(docs.policies):
        rows = [*_policy_rows(pol), ("this run", verdicts.get(name, "-"))]
        slot = ""
        if curve is not None:
            rows.insert(
                4,
                (
                    "risk-coverage on validation",
                    f"AURC {curve.aurc:.4g} (optimal {curve.optimal_aurc:.4g}), "
                    f"{len(curve.thresholds)} thresholds over {curve.total} rows",
                ),
            )
            cid = f"risk-coverage-{k}"
            charts.append(_curve_chart(cid, pol, curve, most))
            slot = f'<div class="chart-slot" data-slot="{cid}"></div>'
        parts.append(f"<h3>Abstention policy {html.escape(name)}</h3>{table(rows)}{slot}")
    return "".join(parts), charts


# -- binding --------------------------------------------------------------------------------------
def binding_section(binding: BindingFile | None, run_id: str) -> str:
    if binding is None:
        return "<p>No binding report: this run was not fitted from an ExperimentPlan.</p>"

    def show(v: Any) -> str:
        return v if isinstance(v, str) else json.dumps(v, default=str)

    head = (
        "<tr><th>field</th><th>value</th><th>from</th><th>via</th><th>overrode</th>"
        "<th>in the run id</th></tr>"
    )
    rows = []
    for r in binding.rows:
        lost = [f"default: {show(r.default)}"] if r.source != "default" else []
        if r.plan_set and r.source == "call":
            lost.append(f"plan: {show(r.plan)}")
        cls = ' class="changed"' if r.source != "default" else ""
        rows.append(
            f"<tr{cls}><td>{html.escape(r.path)}</td><td>{html.escape(show(r.value))}</td>"
            f"<td>{r.source}</td><td>{html.escape(r.via)}</td>"
            f"<td>{html.escape('; '.join(lost))}</td><td>{'yes' if r.in_run_id else 'no'}</td></tr>"
        )
    objects = "".join(
        f"<tr><td>{html.escape(o.what)}</td><td>{html.escape(o.description)}</td>"
        f"<td>{html.escape(o.via)}</td></tr>"
        for o in binding.objects
    )
    note = (
        ""
        if binding.run_id == run_id
        else f"<p>Recorded for run {html.escape(binding.run_id)}, not this one.</p>"
    )
    set_here = sum(r.source != "default" for r in binding.rows)
    return (
        f"{note}<p>Where each value of the plan's fit came from (library default &lt; plan "
        f"&lt; fit(...) keyword): {set_here} of {len(binding.rows)} fields set by the plan "
        f"or the call (highlighted).</p><table>{head}{''.join(rows)}</table>"
        + (f"<p>Data and callbacks:</p><table>{objects}</table>" if objects else "")
    )


# -- bundles --------------------------------------------------------------------------------------
def _carried(calibrators: list[tuple[str, Any]], policies: list[tuple[str, Any]]) -> str:
    """The calibrators and policies a bundle carries, each through its strict shape."""
    parts = []
    for name, raw in calibrators:
        cal = check_shape(raw, CalibratorFile, name, DocumentFileError)
        parts.append(f"<h3>Calibration ({html.escape(name)})</h3>{table(_calibrator_rows(cal))}")
    for name, raw in policies:
        pol = check_shape(raw, PolicyFile, name, DocumentFileError)
        parts.append(f"<h3>Abstention ({html.escape(name)})</h3>{table(_policy_rows(pol))}")
    return "".join(parts)


def _given(contents: BundleContents, recorded: set[str]) -> str:
    doc = contents.manifest
    summary = table(
        [
            ("bundle", contents.path.name),
            ("capability", doc.capability),
            ("checkpoint", f"{doc.checkpoint} at epoch {doc.epoch} (step {doc.step})"),
            ("SHA-256 of its manifest", contents.manifest_sha256),
            (
                "recorded by the run",
                "yes" if contents.manifest_sha256 in recorded else "no (not in bundles.json)",
            ),
        ]
    )
    return summary + _carried(
        [(n, parse_json(contents.files[n], n)) for n in doc.calibrators],
        [(n, parse_json(contents.files[n], n)) for n in doc.policies],
    )


def bundle_section(contents: BundleContents | None, exports: BundleExportsFile | None) -> str:
    """``bundle=`` (validated whole) or else the run's record of its exports (as
    recorded at export time: the report does not open a path a run file names)."""
    recorded = {b.manifest_sha256 for b in exports.bundles} if exports else set()
    if contents is not None:
        return _given(contents, recorded)
    if not exports or not exports.bundles:
        return (
            "<p>No bundle: none was exported from this run (export_bundle records each "
            "one in the run folder), and none given (bundle=).</p>"
        )
    latest = exports.bundles[-1]
    rows = [
        ("bundle", f"{Path(latest.path).name}{' (zip)' if latest.archive else ''}"),
        ("exported", latest.written_at),
        ("capability", latest.capability),
        ("checkpoint", f"{latest.checkpoint} at epoch {latest.epoch} (step {latest.step})"),
        ("SHA-256 of its manifest", latest.manifest_sha256),
    ]
    older = [
        f"<li>{html.escape(Path(b.path).name)} ({b.written_at}): {b.manifest_sha256}</li>"
        for b in exports.bundles[:-1]
    ]
    return (
        "<p>The latest bundle exported from this run, as recorded at export (pass "
        "bundle= to validate the bundle itself):</p>"
        + table(rows)
        + (f"<p>Exported before:</p><ul>{''.join(older)}</ul>" if older else "")
        + _carried(
            [(f"calibrators/{i}.json", c) for i, c in enumerate(latest.calibrators)],
            [(f"policies/{i}.json", p) for i, p in enumerate(latest.policies)],
        )
    )
