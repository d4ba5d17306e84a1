"""Run bundles (§2.22): export, inspect, validate, rebuild bit for bit, resume, and the
refusals of a bundle that was tampered with, points outside itself or is a zip bomb."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import engine_factories as f
import pytest
import torch

import nnx_lab
from nnx_lab import (
    CheckpointCorruptError,
    ConfigError,
    Losses,
    MissingModelFactoryError,
    ModelSpec,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    ResumeError,
    register_model_factory,
    registered_model_factories,
    unregister_model_factory,
)
from nnx_lab.abstention import AbstentionPolicy
from nnx_lab.bundles import (
    BundleFileError,
    export_bundle,
    inspect_bundle,
    reconstruct_bundle,
    validate_bundle,
)
from nnx_lab.calibration import TemperatureCalibrator, model_fingerprint

X = f.data()[2]


def _manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def _write_manifest(bundle: Path, manifest: dict) -> None:
    (bundle / "manifest.json").write_text(json.dumps(manifest))


def _tensors_file(bundle: Path) -> Path:
    return next((bundle / "checkpoints").glob("last-*.safetensors"))


@pytest.fixture
def bundle(trained, tmp_path):
    root, _, run = trained
    return export_bundle(run.id, tmp_path / "bundle", runs_root=root)


# -- what a bundle holds and rebuilds -----------------------------------------------------------
@pytest.mark.parametrize("archive", [False, True])
def test_a_bundle_rebuilds_the_runs_predictions_bit_for_bit(trained, tmp_path, archive):
    root, model, run = trained
    path = tmp_path / ("bundle.zip" if archive else "bundle")
    assert export_bundle(run.id, path, archive=archive, runs_root=root) == path
    assert path.is_file() == archive
    info = inspect_bundle(path)
    assert (info.capability, info.run_id, info.checkpoint) == ("resumable", run.id, "last")
    assert (info.epoch, info.step) == (2, 16)
    assert info.model["net"]["hidden_dims"] == [32, 16]
    assert info.model["model"]["loss"] == "cross_entropy"
    assert set(info.files) >= {"run.yaml", "metrics.jsonl", "checkpoints/last.json"}
    assert validate_bundle(path).files == info.files
    rebuilt = reconstruct_bundle(path)
    source = NNModel.from_checkpoint(NNCheckpoint.load(run.id, runs_root=root))
    assert torch.equal(rebuilt.model.predict(X=X).logits, source.predict(X=X).logits)
    assert torch.equal(rebuilt.model.predict(X=X).logits, model.predict(X=X).logits)


def test_resuming_a_bundle_continues_its_run_as_a_local_resume_does(trained, tmp_path):
    root, _, run = trained
    path = export_bundle(run.id, tmp_path / "bundle", runs_root=root)
    elsewhere = tmp_path / "elsewhere"
    params = f.train_params(elsewhere, n_epochs=1, checkpoint_every_s=0)
    child = reconstruct_bundle(path).resume(params)
    assert child.resume_status["from_run_id"] == run.id
    assert child.resume_status["mode"] == "stateful"
    assert child.metadata["parent_run_id"] == run.id
    local = f.model().train(
        f.train_params(root, n_epochs=1, checkpoint_every_s=0, resume_from_run_id=run.id)
    )
    assert child.id == local.id  # the same config, data and parent: the same run
    ours = NNCheckpoint.load(child.id, runs_root=elsewhere).model_state
    theirs = NNCheckpoint.load(local.id, runs_root=root).model_state
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)
    # the parent was placed as exported, listed as the finished run it is, without
    # its writer's host and process; resuming again reuses it
    rows = nnx_lab.list_runs(elsewhere).set_index("run_id")
    assert rows.loc[run.id, "status"] == "finished"
    assert rows.loc[child.id, "parent_run_id"] == run.id
    assert "writer" not in (elsewhere / run.id / "metadata.yaml").read_text()
    assert (elsewhere / run.id / "run.yaml").read_bytes() == (
        root / run.id / "run.yaml"
    ).read_bytes()
    with pytest.raises(FileExistsError):
        reconstruct_bundle(path).resume(params)


def test_an_inference_bundle_rebuilds_but_refuses_to_resume(trained, tmp_path):
    from nnx_lab.engine.checkpoint import write_checkpoint

    root, model, run = trained
    ckpt = NNCheckpoint.load(run.id, runs_root=root)
    meta = {k: ckpt.sidecar[k] for k in ("run_id", "epoch", "step", "net_params", "model_params")}
    write_checkpoint(
        run.run_dir, ["last"], model_state=ckpt.model_state, training_state=None, meta=meta
    )
    path = export_bundle(run.id, tmp_path / "bundle", runs_root=root)
    assert inspect_bundle(path).capability == "inference"
    assert "metrics.jsonl" not in inspect_bundle(path).files
    rebuilt = reconstruct_bundle(path)
    assert torch.equal(rebuilt.model.predict(X=X).logits, model.predict(X=X).logits)
    elsewhere = tmp_path / "elsewhere"
    with pytest.raises(ResumeError, match="inference bundle"):
        rebuilt.resume(f.train_params(elsewhere, n_epochs=1))
    assert not elsewhere.exists()


@pytest.fixture
def encoder():
    def factory(config):
        return torch.nn.Sequential(
            torch.nn.Linear(8, config["width"]),
            torch.nn.ReLU(),
            torch.nn.Linear(config["width"], 3),
        )

    register_model_factory("test.bundle_encoder", 1, factory, replace=True)
    yield factory
    if ("test.bundle_encoder", 1) in registered_model_factories():
        unregister_model_factory("test.bundle_encoder", 1)


def test_a_registered_module_rebuilds_through_factories_never_from_the_bundle(encoder, tmp_path):
    spec = ModelSpec("test.bundle_encoder", 1, {"width": 12})
    model = NNModel(params=NNModelParams(net=spec, loss=Losses.CROSS_ENTROPY))
    run = model.train(f.train_params(tmp_path / "runs", n_epochs=1, checkpoint_every_s=0))
    path = export_bundle(run.id, tmp_path / "bundle", runs_root=tmp_path / "runs")
    assert inspect_bundle(path).model["model"]["net"]["id"] == "test.bundle_encoder"
    unregister_model_factory("test.bundle_encoder", 1)
    with pytest.raises(MissingModelFactoryError, match=r"test.bundle_encoder"):
        reconstruct_bundle(path)
    rebuilt = reconstruct_bundle(path, factories={("test.bundle_encoder", 1): encoder})
    assert torch.equal(rebuilt.model.predict(X=X).logits, model.predict(X=X).logits)
    assert ("test.bundle_encoder", 1) not in registered_model_factories()  # left as it was


def test_calibrators_and_policies_travel_with_the_bundle(trained, tmp_path):
    root, model, run = trained
    cal, pol = f.shipped_documents(model)
    path = export_bundle(run.id, tmp_path / "b.zip", [cal], [pol], archive=True, runs_root=root)
    info = inspect_bundle(path)
    assert (info.calibrators, info.policies) == (("calibrators/0.json",), ("policies/0.json",))
    rebuilt = reconstruct_bundle(path)
    assert [c.to_json() for c in rebuilt.calibrators] == [cal.to_json()]
    assert [p.to_json() for p in rebuilt.policies] == [pol.to_json()]
    assert isinstance(rebuilt.calibrators[0], TemperatureCalibrator)
    assert isinstance(rebuilt.policies[0], AbstentionPolicy)
    assert model_fingerprint(rebuilt.model) == cal.model_id


def test_a_calibrator_of_other_weights_is_refused_before_anything_is_written(trained, tmp_path):
    import dataclasses

    root, model, run = trained
    cal = dataclasses.replace(f.shipped_documents(model)[0], model_id="sha256:" + "0" * 64)
    with pytest.raises(ConfigError, match=r"calibrators\[0\]\.model_id"):
        export_bundle(run.id, tmp_path / "bundle", calibrators=[cal], runs_root=root)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"archive": "yes"}, "archive"),
        ({"checkpoint": "middle"}, "checkpoint"),
        ({"calibrators": ["calibrator.json"]}, r"calibrators\[0\]"),
        ({"run_id": "0" * 32}, "run_id"),
    ],
)
def test_export_refusals_leave_nothing(trained, tmp_path, kwargs, field):
    root, _, run = trained
    args = {"run_id": run.id, "path": tmp_path / "bundle", "runs_root": root, **kwargs}
    with pytest.raises((ConfigError, ValueError), match=field):
        export_bundle(**args)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


def test_a_bundle_is_never_written_over_an_existing_path(bundle, trained):
    root, _, run = trained
    before = _manifest(bundle)
    with pytest.raises(ConfigError, match="exists already"):
        export_bundle(run.id, bundle, runs_root=root)
    assert _manifest(bundle) == before


# -- a bundle someone altered -------------------------------------------------------------------
def test_a_tampered_payload_is_refused_naming_the_file(bundle):
    tensors = _tensors_file(bundle)
    data = bytearray(tensors.read_bytes())
    data[-1] ^= 1
    tensors.write_bytes(bytes(data))
    inspect_bundle(bundle)  # the manifest alone is fine
    for reader in (validate_bundle, reconstruct_bundle):
        with pytest.raises(BundleFileError, match=f"{tensors.name}.*SHA-256"):
            reader(bundle)


def test_a_manifest_edited_to_match_a_tampered_payload_is_still_refused(bundle):
    import hashlib

    tensors = _tensors_file(bundle)
    data = bytearray(tensors.read_bytes())
    data[-1] ^= 1
    tensors.write_bytes(bytes(data))
    manifest = _manifest(bundle)
    for entry in manifest["payloads"]:
        if entry["path"].endswith(tensors.name):
            entry["sha256"] = hashlib.sha256(bytes(data)).hexdigest()
    _write_manifest(bundle, manifest)
    validate_bundle(bundle)  # consistent with itself...
    with pytest.raises(CheckpointCorruptError, match="SHA-256"):
        reconstruct_bundle(bundle)  # ...but not with the checkpoint's own record


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda m: m.update(epoch=1), "epoch"),
        (lambda m: m.update(capability="inference"), "capability"),
        (lambda m: m["model"]["net"].update(hidden_dims=[64]), "model"),
        (lambda m: m.update(extra=1), "extra"),
        (lambda m: m.update(format="other"), "format"),
        (lambda m: m.update(calibrators=["calibrators/0.json"]), "calibrators"),
    ],
)
def test_an_edited_manifest_is_refused(bundle, edit, match):
    manifest = _manifest(bundle)
    edit(manifest)
    _write_manifest(bundle, manifest)
    with pytest.raises(BundleFileError, match=match):
        reconstruct_bundle(bundle)


def test_a_traversal_path_in_the_manifest_is_refused(bundle, outside):
    manifest = _manifest(bundle)
    manifest["payloads"][0]["path"] = "../outside/victim.txt"
    _write_manifest(bundle, manifest)
    with pytest.raises(BundleFileError, match="outside its own files"):
        validate_bundle(bundle)
    assert (outside / "victim.txt").read_text() == "do not delete me\n"


def test_links_extra_and_missing_files_are_refused(bundle, outside):
    (bundle / "notes.txt").write_text("hi")
    with pytest.raises(BundleFileError, match=r"notes.txt.*extra file"):
        validate_bundle(bundle)
    os.unlink(bundle / "notes.txt")
    real = bundle / "run.yaml"
    (outside / "run.yaml").write_bytes(real.read_bytes())
    real.unlink()
    with pytest.raises(BundleFileError, match=r"run.yaml.*missing"):
        validate_bundle(bundle)
    real.symlink_to(outside / "run.yaml")  # the same bytes, through a link
    with pytest.raises(BundleFileError, match="is a link"):
        validate_bundle(bundle)


def _rezip(bundle: Path, target: Path, extra: list[tuple[zipfile.ZipInfo, bytes]]) -> Path:
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(bundle.rglob("*")):
            if p.is_file():
                zf.writestr(p.relative_to(bundle).as_posix(), p.read_bytes())
        for info, data in extra:
            zf.writestr(info, data)
    return target


def test_a_zip_with_a_traversal_member_or_a_link_is_refused(bundle, tmp_path):
    plain = _rezip(bundle, tmp_path / "plain.zip", [])
    assert validate_bundle(plain).run_id == inspect_bundle(bundle).run_id
    evil = _rezip(bundle, tmp_path / "evil.zip", [(zipfile.ZipInfo("../evil.txt"), b"x")])
    with pytest.raises(BundleFileError, match=r"\.\./evil\.txt.*extra file"):
        reconstruct_bundle(evil)
    assert not (tmp_path.parent / "evil.txt").exists()
    # every file present with its listed bytes, but run.yaml stored as a link member
    link = zipfile.ZipInfo("run.yaml")
    link.external_attr = 0o120777 << 16
    linked = tmp_path / "linked.zip"
    with zipfile.ZipFile(linked, "w") as zf:
        for p in sorted(bundle.rglob("*")):
            rel = p.relative_to(bundle).as_posix()
            if p.is_file():
                zf.writestr(link if rel == "run.yaml" else rel, p.read_bytes())
    with pytest.raises(BundleFileError, match=r"run\.yaml: is a link or a special file"):
        validate_bundle(linked)


def test_a_zip_bomb_is_refused_before_it_is_inflated(bundle, tmp_path, monkeypatch):
    # a member whose header says more than the manifest lists
    bomb = tmp_path / "bomb.zip"
    manifest = _manifest(bundle)
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        for p in sorted(bundle.rglob("*")):
            rel = p.relative_to(bundle).as_posix()
            if p.is_file() and rel != "manifest.json":
                data = b"\0" * (64 << 20) if rel == "metrics.jsonl" else p.read_bytes()
                zf.writestr(rel, data)
    assert bomb.stat().st_size < 1 << 20
    with pytest.raises(BundleFileError, match=r"metrics.jsonl.*declares 67,108,864 bytes"):
        validate_bundle(bomb)
    # a manifest declaring more than a bundle may hold: refused from the manifest alone
    monkeypatch.setenv("NNX_MAX_BUNDLE_BYTES", "1000")
    with pytest.raises(BundleFileError, match="NNX_MAX_BUNDLE_BYTES"):
        inspect_bundle(bundle)


_KILLED = """
import os, sys
from nnx_lab.bundles import export_bundle
from nnx_lab.engine.write_faults import FAULT_ENV
os.environ[FAULT_ENV] = sys.argv[4]
export_bundle(sys.argv[1], sys.argv[2], runs_root=sys.argv[3], archive=sys.argv[5] == "zip")
os._exit(3)
"""


@pytest.mark.parametrize(("point", "form"), [("bundle.payload@2", "dir"), ("bundle.rename", "zip")])
def test_a_killed_writer_leaves_no_bundle(trained, tmp_path, point, form):
    root, _, run = trained
    target = tmp_path / ("bundle.zip" if form == "zip" else "bundle")
    env = {**os.environ, "PYTHONPATH": str(Path(nnx_lab.__file__).resolve().parents[1])}
    done = subprocess.run(
        [sys.executable, "-c", _KILLED, run.id, str(target), str(root), point, form],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -9, done.stderr
    assert not target.exists()  # only a hidden temp file beside it
    assert any(p.name.startswith(f".{target.name}.") for p in tmp_path.iterdir())
    with pytest.raises(BundleFileError, match="no such bundle"):
        validate_bundle(target)
    export_bundle(run.id, target, runs_root=root, archive=form == "zip")
    assert validate_bundle(target).run_id == run.id


def test_resume_refuses_its_own_resume_and_a_differing_run_of_that_id(bundle, trained, tmp_path):
    root, _, run = trained
    rebuilt = reconstruct_bundle(bundle)
    same = rebuilt.resume(f.train_params(root, n_epochs=1, checkpoint_every_s=0))
    assert same.resume_status["from_run_id"] == run.id  # the author's own run, reused
    with pytest.raises(ConfigError, match="resume_from_run_id"):
        rebuilt.resume(f.train_params(tmp_path / "x", resume_from_run_id=run.id))
    (root / run.id / "run.yaml").write_bytes(
        b"# edited\n" + (root / run.id / "run.yaml").read_bytes()
    )
    with pytest.raises(ConfigError, match=r"run.yaml differs"):
        rebuilt.resume(f.train_params(root, n_epochs=1))
