"""Provenance (§2.15): manifests written with the run and never in its id, a fresh attempt
per train(), absent for a run without one, declared ids never verified, compare()."""

from __future__ import annotations

import hashlib
import json

import engine_factories as f
import plan_factories as pf
import pytest

from nnx_lab import (
    ConfigError,
    ExperimentPlan,
    NNModelParams,
    NNParams,
    NNRun,
    NNTrainParams,
    provenance,
)
from nnx_lab.provenance import (
    Digest,
    ExperimentManifest,
    Provenance,
    compare,
    hash_bytes,
    hash_file,
)
from nnx_lab.runs import RunRecordError


@pytest.fixture
def csv(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text("x,y\n1,0\n2,1\n")
    return path


def _train(root, manifest=None, **kw):
    model = f.model()
    params = f.train_params(root, n_epochs=1, **kw)
    if callable(manifest):
        manifest = manifest(model, params)
    return model.train(params, provenance=manifest)


def test_a_manifest_is_written_with_the_run_and_never_changes_its_id(runs_root, csv):
    plain = _train(runs_root / "plain")
    data = {"train": hash_file(csv)}
    run = _train(
        runs_root / "with",
        lambda m, p: ExperimentManifest.for_model(m, train=p, data=data, description="toy"),
    )
    assert run.id == plain.id
    assert isinstance(run.provenance, Provenance)
    manifest = run.provenance.manifest
    assert run.provenance.fingerprint == manifest.fingerprint
    assert manifest.verified == {"train": True}
    on_disk = json.loads((run.run_dir / "provenance.json").read_text())
    assert on_disk["fingerprint"] == manifest.fingerprint
    assert on_disk["attempt"]["attempt_id"] == run.provenance.attempt.attempt_id
    loaded = NNRun.load(run.id, runs_root=runs_root / "with")
    assert loaded.provenance == run.provenance
    assert provenance.ExperimentManifest is ExperimentManifest  # nnx_lab.provenance


def test_the_same_manifest_gives_the_same_fingerprint_and_a_new_attempt(runs_root):
    model = f.model()
    params = f.train_params(runs_root, n_epochs=1)
    manifest = ExperimentManifest.for_model(model, train=params, data={"train": "toy-v1"})
    again = ExperimentManifest.for_model(model, train=params, data={"train": "toy-v1"})
    assert again.fingerprint == manifest.fingerprint
    first = model.train(params, provenance=manifest)
    second = f.model().train(params.replace(overwrite_existing=True), provenance=manifest)
    assert first.id == second.id
    assert first.provenance.fingerprint == second.provenance.fingerprint
    assert first.provenance.attempt.attempt_id != second.provenance.attempt.attempt_id
    other = ExperimentManifest.for_model(model, train=params, data={"train": "toy-v2"})
    assert other.fingerprint != manifest.fingerprint


def test_a_run_without_a_manifest_has_none(runs_root):
    plain = _train(runs_root)
    assert plain.provenance is None
    assert NNRun.load(plain.id, runs_root=runs_root).provenance is None
    with_one = _train(runs_root / "b", lambda m, p: ExperimentManifest.for_model(m, train=p))
    absent = compare(plain.id, with_one, runs_root=runs_root)
    assert absent.same_plan is None
    (diff,) = absent.differences
    assert (diff.field, diff.a_status, diff.b_status) == ("provenance", "absent", "value")
    assert "absent, not equal" in diff.note
    neither = compare(plain, plain)
    assert neither.differences
    assert neither.same_plan is None


def test_declared_ids_are_recorded_as_declared_and_never_verified(runs_root, csv):
    def run(root, data):
        return _train(
            runs_root / root, lambda m, p: ExperimentManifest.for_model(m, train=p, data=data)
        )

    a = run("a", {"train": "animals-v2"})
    b = run("b", {"train": "animals-v2"})
    assert a.provenance.manifest.verified == {"train": False}
    same = compare(a, b)
    assert same.differences == ()
    assert same.same_plan is True
    (unverified,) = same.unverified
    assert (unverified.field, unverified.a_status, unverified.b_status) == (
        "data.train",
        "declared",
        "declared",
    )
    assert "not verified" in str(same)
    assert "verified)" not in str(same).replace("not verified", "")
    digest = run("c", {"train": hash_file(csv)})
    mixed = compare(a, digest)
    (diff,) = mixed.differences
    assert (diff.a_status, diff.b_status) == ("declared", "verified")
    assert "cannot be matched" in diff.note
    csv.write_text("x,y\n1,1\n")
    changed = compare(digest, run("d", {"train": hash_file(csv)}))
    (diff,) = changed.differences
    assert (diff.field, diff.a_status, diff.b_status) == ("data.train", "verified", "verified")


def test_compare_names_configuration_differences(runs_root):
    a = _train(runs_root / "a", lambda m, p: ExperimentManifest.for_model(m, train=p))
    b = _train(
        runs_root / "b",
        lambda m, p: ExperimentManifest.for_model(m, train=p),
        optim=f.train_params(runs_root).optim.replace(max_lr=1e-3),
    )
    result = compare(a, b)
    assert result.same_plan is False
    fields = {d.field for d in result.differences}
    assert fields == {"train.optim.max_lr"}
    assert result.attempts[0].attempt_id == a.provenance.attempt.attempt_id


def test_hash_file_and_hash_bytes(csv, tmp_path):
    expected = hashlib.sha256(csv.read_bytes()).hexdigest()
    d = hash_file(csv)
    assert d.hexdigest == expected
    assert d.size == csv.stat().st_size
    assert d.name == "train.csv"
    assert str(d) == f"sha256:{expected}"
    assert hash_bytes(csv.read_bytes()).hexdigest == expected
    assert Digest.from_json(d.to_json()) == d
    with pytest.raises(FileNotFoundError, match="no such file"):
        hash_file(tmp_path / "missing.csv")
    with pytest.raises(FileNotFoundError, match="folder"):
        hash_file(tmp_path)
    with pytest.raises(ConfigError, match="pass bytes"):
        hash_bytes("text")


def test_bad_manifests_are_refused_before_any_side_effect(runs_root):
    model = f.model()
    params = f.train_params(runs_root, n_epochs=1)
    with pytest.raises(ConfigError, match=r"data\['train'\]"):
        ExperimentManifest.for_model(model, train=params, data={"train": 3})
    with pytest.raises(ConfigError, match="NNModel"):
        ExperimentManifest.for_model("model")
    with pytest.raises(ConfigError, match=r"ExperimentManifest\.for_model"):
        model.train(params, provenance={"train": "x"})
    other = ExperimentManifest.for_model(f.model(net={"hidden_dims": [4]}), train=params)
    with pytest.raises(ConfigError, match=r"net.hidden_dims is \[4\] in the manifest"):
        model.train(params, provenance=other)
    longer = ExperimentManifest.for_model(model, train=params.replace(n_epochs=5))
    with pytest.raises(ConfigError, match=r"train\.n_epochs"):
        model.train(params, provenance=longer)
    assert not runs_root.exists()


def test_a_tampered_provenance_record_is_named(runs_root):
    run = _train(runs_root, lambda m, p: ExperimentManifest.for_model(m, train=p))
    path = run.run_dir / "provenance.json"
    data = json.loads(path.read_text())
    data["manifest"]["description"] = "edited afterwards"
    path.write_text(json.dumps(data))
    with pytest.raises(RunRecordError, match="does not hash to its fingerprint"):
        NNRun.load(run.id, runs_root=runs_root)
    path.write_text("{not json")
    with pytest.raises(RunRecordError, match=r"provenance\.json"):
        NNRun.load(run.id, runs_root=runs_root)


def test_a_plan_fit_carries_its_manifest(runs_root):
    plan = (
        ExperimentPlan()
        .with_net(NNParams(input_dim=8, output_dim=3, hidden_dims=[16]))
        .with_model(NNModelParams())
        .with_train(NNTrainParams(n_epochs=1))
        .with_data(pf.make_train_loader, val=pf.make_val_loader, identity="toy")
        .with_runs_root(runs_root)
    )
    manifest = ExperimentManifest.for_plan(plan, data={"train": "toy"})
    result = plan.fit(provenance=manifest)
    assert result.run.provenance.fingerprint == manifest.fingerprint
    assert result.attempt_id == result.run.provenance.attempt.attempt_id
    written = json.loads((result.run.run_dir / "plan.json").read_text())
    assert written["attempt_id"] == result.attempt_id
    with pytest.raises(ConfigError, match=r"train\.seed"):
        plan.with_seed(3).fit(provenance=manifest)  # a manifest of another plan
