"""The one-file HTML report of a run: what it holds, that it loads nothing, and its
refusals (the page itself is driven in Chromium by tests/browser/test_report_file.py)."""

from __future__ import annotations

import json
import re

import engine_factories as f
import pytest

import nnx_lab
import nnx_lab.reports._report as rep
from nnx_lab import ConfigError, MetricSpec
from nnx_lab.bundles import export_bundle


def _data(page: str) -> dict:
    found = re.search(
        r'<script type="application/json" id="nnx-report-data">(.*?)</script>', page, re.S
    )
    return json.loads(found.group(1))


@pytest.fixture
def parent_and_child(runs_root):
    params = f.train_params(runs_root, n_epochs=2, log_every=1, metrics=[MetricSpec("nll")])
    parent = f.model().train(params)
    child = f.model().train(params.replace(n_epochs=1, resume_from_run_id=parent.id))
    return parent, child


def test_the_report_holds_the_runs_charts_config_precision_and_parent(
    parent_and_child, runs_root, tmp_path
):
    parent, child = parent_and_child
    path = nnx_lab.report(child.id, tmp_path / "run.html", runs_root=runs_root)
    page = path.read_text()
    data = _data(page)
    charts = {c["id"]: c for c in data["charts"]}
    assert {"step-loss", "epoch-loss", "epoch-error", "epoch-nll"} <= set(charts)
    loss = charts["step-loss"]["series"][0]
    assert loss["x"] == [i.iteration for i in child.idps]  # the inherited history too
    assert loss["y"] == pytest.approx([i.train_edp.loss for i in child.idps])
    val = next(s for s in charts["epoch-loss"]["series"] if s["name"] == "val")
    assert val["y"] == pytest.approx([e["val"]["loss"] for e in child.epochs])
    assert f"Against parent {parent.id}" in page
    assert "n_epochs" in page  # the one setting the child changed
    assert "max_lr: 0.01" in page  # the configuration
    assert "effective" in page
    assert "fp32" in page
    assert "torch" in page  # the environment
    assert len(path.read_bytes()) < 300_000


def test_the_report_loads_nothing(parent_and_child, runs_root, tmp_path):
    _, child = parent_and_child
    page = nnx_lab.report(child.id, tmp_path / "run.html", runs_root=runs_root).read_text()
    assert not re.search(r"\b(src|href)\s*=", page)
    assert "default-src 'none'" in page  # and the page forbids any fetch
    assert re.findall(r"https?://[^\s\"']+", page) == ["http://www.w3.org/2000/svg"]


def test_a_long_run_is_thinned_keeping_its_last_point(
    parent_and_child, runs_root, tmp_path, monkeypatch
):
    _, child = parent_and_child
    monkeypatch.setattr(rep, "MAX_POINTS", 5)
    page = nnx_lab.report(child.id, tmp_path / "run.html", runs_root=runs_root).read_text()
    loss = next(c for c in _data(page)["charts"] if c["id"] == "step-loss")["series"][0]
    assert len(loss["x"]) <= 6
    assert loss["x"][-1] == 24


def test_the_bundle_its_digest_calibrator_and_policy_are_reported(trained, tmp_path):
    root, model, run = trained
    cal, pol = f.shipped_documents(model)
    bundle = export_bundle(run.id, tmp_path / "b.zip", [cal], [pol], archive=True, runs_root=root)
    from nnx_lab.runs import read_bundle

    digest = read_bundle(bundle).manifest_sha256
    page = nnx_lab.report(run.id, tmp_path / "r.html", runs_root=root, bundle=bundle).read_text()
    assert digest in page
    assert "No parent run" in page
    assert "Calibration (calibrators/0.json)" in page
    assert f"{cal.temperature:.4g}" in page
    assert "Abstention (policies/0.json)" in page
    assert f"{pol.threshold:.4g}" in page


def test_a_damaged_or_foreign_bundle_is_refused_before_writing(trained, runs_root, tmp_path):
    from nnx_lab.runs import BundleFileError

    root, _, run = trained
    bundle = export_bundle(run.id, tmp_path / "bundle", runs_root=root)
    other = f.model().train(f.train_params(root, n_epochs=1, seed=7))
    with pytest.raises(ConfigError, match=f"bundle of run {run.id}"):
        nnx_lab.report(other.id, tmp_path / "r.html", runs_root=root, bundle=bundle)
    (bundle / "run.yaml").write_text("edited: true\n")
    with pytest.raises(BundleFileError, match=r"run\.yaml: holds 13 bytes"):
        nnx_lab.report(run.id, tmp_path / "r.html", runs_root=root, bundle=bundle)
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"path": "DIR"}, "path"),
        ({"run_id": "0" * 32}, "run_id"),
        ({"bundle": "nowhere"}, "bundle"),
    ],
)
def test_refusals_write_nothing(parent_and_child, runs_root, tmp_path, kwargs, field):
    parent, _ = parent_and_child
    args = {"run_id": parent.id, "path": tmp_path / "r.html", "runs_root": runs_root, **kwargs}
    if args["path"] == "DIR":
        args["path"] = tmp_path
    if kwargs.get("bundle"):
        args["bundle"] = tmp_path / "nowhere"
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ConfigError, match=field):
        nnx_lab.report(**args)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
