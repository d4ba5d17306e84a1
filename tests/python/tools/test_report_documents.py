"""The report's calibration and abstention section without a bundle (``calibrators=`` /
``policies=``: objects, saved files, a CalibrationReport's reliability diagram, a
ThresholdSelection's risk-coverage curve), the check of their weights against the run,
the binding section of a plan's fit, and the bundle a run records when it is exported
(what the "Report" buttons show)."""

from __future__ import annotations

import json
import re

import engine_factories as f
import plan_factories as pf
import pytest
import torch

import nnx_lab
from nnx_lab import ConfigError, ProbabilitySpec
from nnx_lab.abstention import select_threshold
from nnx_lab.bundles import export_bundle
from nnx_lab.calibration import model_fingerprint
from nnx_lab.runs import DocumentFileError, RunFileError, read_bundle, read_bundle_exports

SPEC = ProbabilitySpec("categorical", labels=("a", "b", "c"))


def _data(page: str) -> dict:
    found = re.search(
        r'<script type="application/json" id="nnx-report-data">(.*?)</script>', page, re.S
    )
    return json.loads(found.group(1))


def _learnable(n_train, n_val, seed=0):
    """Rows whose class a model can learn (the largest of the first three features)."""
    X, _, Xv, _ = f.data(n_train=n_train, n_val=n_val, seed=seed)
    return X, X[:, :3].argmax(1), Xv, Xv[:, :3].argmax(1)


def _documents(model, n_test=512, data=f.data):
    """A calibrator, its held-out report, and a threshold selection, fitted on ``model``."""
    cal, sel = f.fitted_documents(model, risk_ceiling=0.9, rows=data)
    Xt, yt, _, _ = data(n_train=n_test, n_val=8, seed=3)
    prediction = model.predict_proba(Xt, SPEC)
    rep = cal.report(prediction, yt, model_id=cal.model_id, split_id="test", bins=10)
    return cal, rep, sel


def test_calibrators_and_policies_without_a_bundle_are_reported_with_their_charts(
    trained, tmp_path
):
    root, model, run = trained
    cal, rep, sel = _documents(model)
    cal.save(tmp_path / "cal.json")
    pol = sel.require()
    pol.save(tmp_path / "pol.json")
    page = nnx_lab.report(
        run.id,
        tmp_path / "r.html",
        runs_root=root,
        calibrators=[tmp_path / "cal.json", rep],
        policies=[sel, str(tmp_path / "pol.json")],
    ).read_text()
    assert f"{cal.temperature:.4g}" in page
    assert f"{cal.nll_before:.4g} -&gt; {cal.nll_after:.4g}" in page  # what the file records
    b, a = rep.before, rep.after
    assert f"ECE (10 bins)</th><td>{b['ece']:.4g} -&gt; {a['ece']:.4g}" in page
    assert f"coverage {pol.validation['coverage']:.3f}" in page
    assert f"AURC {sel.curve.aurc:.4g}" in page
    assert "calibrators[0] (cal.json)" in page
    assert "policies[1] (pol.json)" in page
    # nothing records this run's weights yet: shown, and flagged as not checked
    assert page.count("not checked against this run") == 4
    charts = {c["id"]: c for c in _data(page)["documents"]}
    rel = charts["reliability-0"]
    assert rel["kind"] == "reliability"
    assert rel["edges"] == pytest.approx(list(rep.reliability_before.edges))
    assert rel["series"][0]["counts"] == list(rep.reliability_before.counts)
    assert rel["series"][1]["accuracy"] == list(rep.reliability_after.accuracy)
    assert sum(rel["series"][0]["counts"]) == rep.rows
    curve = charts["risk-coverage-0"]
    assert curve["series"][0]["x"] == pytest.approx(sel.curve.coverage.tolist())
    assert curve["series"][0]["y"] == pytest.approx(sel.curve.risk.tolist())
    assert curve["extra"]["values"] == pytest.approx(sel.curve.thresholds.tolist())
    assert curve["mark"]["x"] == pytest.approx(sel.coverage)
    assert 'data-slot="reliability-0"' in page
    assert 'data-slot="risk-coverage-0"' in page


def test_an_export_records_the_bundle_and_the_weights_the_report_checks(trained, tmp_path):
    root, model, run = trained
    cal, rep, sel = _documents(model)
    bundle = export_bundle(
        run.id, tmp_path / "b.zip", [cal], [sel.require()], archive=True, runs_root=root
    )
    record = read_bundle_exports(root / run.id)
    entry = record.bundles[-1]
    assert entry.manifest_sha256 == read_bundle(bundle).manifest_sha256
    assert {w.type: w.fingerprint for w in entry.weights}["last"] == model_fingerprint(model)
    # the buttons' report: no argument, the recorded bundle and what it carries
    page = nnx_lab.reports.report_html(run.id, runs_root=root)
    assert entry.manifest_sha256 in page
    assert "b.zip (zip)" in page
    assert "Calibration (calibrators/0.json)" in page
    assert f"{cal.temperature:.4g}" in page
    # the documents are now checked against the recorded weights
    page = nnx_lab.reports.report_html(run.id, runs_root=root, calibrators=[cal, rep])
    assert page.count("fitted on this run&#x27;s LAST weights") == 2
    # a calibrator fitted on another run's model is refused, and nothing is written
    other = f.model()
    other.train(f.train_params(root, n_epochs=1, seed=7))
    foreign, _, _ = _documents(other)
    with pytest.raises(ConfigError, match=r"calibrators\[0\]\.model_id.*other weights"):
        nnx_lab.report(run.id, tmp_path / "r.html", runs_root=root, calibrators=[foreign])
    assert not (tmp_path / "r.html").exists()
    # a second export is appended; the report shows the latest and lists the older one
    export_bundle(run.id, tmp_path / "b2", runs_root=root)
    assert len(read_bundle_exports(root / run.id).bundles) == 2
    page = nnx_lab.reports.report_html(run.id, runs_root=root)
    assert "Exported before" in page
    assert "<th>bundle</th><td>b2</td>" in page


def test_a_rewritten_checkpoint_makes_the_recorded_weights_stale(trained, tmp_path):
    root, model, run = trained
    export_bundle(run.id, tmp_path / "b", runs_root=root)
    cal, _, _ = _documents(model)
    page = nnx_lab.reports.report_html(run.id, runs_root=root, calibrators=[cal])
    assert "fitted on this run&#x27;s LAST weights" in page
    sidecar = root / run.id / "checkpoints" / "last.json"
    doc = json.loads(sidecar.read_text())
    doc["sha256"] = "0" * 64  # as if the checkpoint were written again since the export
    sidecar.write_text(json.dumps(doc))
    page = nnx_lab.reports.report_html(run.id, runs_root=root, calibrators=[cal])
    assert "not checked against this run" in page


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"calibrators": [42]}, ConfigError, r"calibrators\[0\]"),
        ({"calibrators": ["nowhere.json"]}, ConfigError, "no such calibrator file"),
        ({"policies": [object()]}, ConfigError, r"policies\[0\]"),
        ({"calibrators": ["TAMPERED"]}, DocumentFileError, "temperature"),
        ({"policies": ["NO_THRESHOLD"]}, ConfigError, "found no threshold"),
    ],
)
def test_bad_documents_are_refused_before_writing(trained, tmp_path, kwargs, error, match):
    root, model, run = trained
    cal, _, _ = _documents(model)
    tampered = cal.to_json()
    tampered["temperature"] = -1.0
    (tmp_path / "bad.json").write_text(json.dumps(tampered))
    X, y, _, _ = f.data(n_train=64, n_val=8)
    none = select_threshold(
        model.predict_proba(X, SPEC).probabilities, y, risk_ceiling=0.0, split_id="val"
    )
    for key in ("calibrators", "policies"):
        if key in kwargs:
            value = kwargs[key][0]
            if value == "TAMPERED":
                kwargs = {key: [tmp_path / "bad.json"]}
            elif value == "NO_THRESHOLD":
                kwargs = {key: [none]}
            elif value == "nowhere.json":
                kwargs = {key: [tmp_path / "nowhere.json"]}
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(error, match=match):
        nnx_lab.report(run.id, tmp_path / "r.html", runs_root=root, **kwargs)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_damaged_bundles_record_is_refused(trained, tmp_path):
    root, _, run = trained
    export_bundle(run.id, tmp_path / "b", runs_root=root)
    path = root / run.id / "bundles.json"
    doc = json.loads(path.read_text())
    doc["bundles"][0]["manifest_sha256"] = "not a digest"
    path.write_text(json.dumps(doc))
    with pytest.raises(RunFileError, match="manifest_sha256"):
        nnx_lab.reports.report_html(run.id, runs_root=root)


def test_a_plan_run_reports_its_binding(runs_root, tmp_path):
    result = pf.toy_plan(runs_root, n_epochs=1).fit(seed=9, report=False)
    page = nnx_lab.reports.report_html(result.run.id, runs_root=runs_root)
    row = re.search(r"<tr class=\"changed\"><td>train.seed</td>(.*?)</tr>", page).group(1)
    assert "<td>9</td><td>call</td><td>fit(seed=...)</td>" in row
    assert "plan: 7" in row  # what the call overrode
    assert "No binding report" not in page
    (result.run.run_dir / "binding.json").write_text('{"run_id": "x"}')
    with pytest.raises(RunFileError, match=r"binding\.json"):
        nnx_lab.reports.report_html(result.run.id, runs_root=runs_root)


def test_a_run_without_a_plan_or_bundle_says_so(trained):
    root, _, run = trained
    page = nnx_lab.reports.report_html(run.id, runs_root=root)
    assert "not fitted from an ExperimentPlan" in page
    assert "No bundle: none was exported" in page


def test_a_typical_run_with_its_documents_stays_small(runs_root, tmp_path):
    """8 epochs of 2,000 rows (504 logged steps), a 15-bin reliability diagram and a
    risk-coverage curve over 4,000 validation rows: a few hundred KB at most."""
    X, y, _, _ = _learnable(2000, 8)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y), batch_size=32)
    model = f.model()
    run = model.train(f.train_params(runs_root, loader, loader, n_epochs=8, log_every=1))
    cal, rep, _ = _documents(model, n_test=4000, data=_learnable)
    Xv, yv, _, _ = _learnable(4000, 8, seed=5)
    sel = select_threshold(
        model.predict_proba(Xv, SPEC).probabilities, yv, risk_ceiling=0.9, split_id="val"
    )
    assert len(sel.curve) > 2000  # thinned to MAX_POINTS in the page
    path = nnx_lab.report(
        run.id, tmp_path / "r.html", runs_root=runs_root, calibrators=[cal, rep], policies=[sel]
    )
    size = len(path.read_bytes())
    assert size < 300_000, size
    charts = {c["id"]: c for c in _data(path.read_text())["documents"]}
    assert len(charts["risk-coverage-0"]["series"][0]["x"]) <= 2001
