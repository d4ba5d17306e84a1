"""Paths and ids: nothing a run id, a link or a sidecar names leaves the runs root.

Part of the hardening review: each test tries to break one promise.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import engine_factories as f
import pytest

from nnx_lab import (
    CheckpointCorruptError,
    ConfigError,
    NNCheckpoint,
    NNRun,
    NNTrainParams,
)
from nnx_lab.engine.checkpoint import _sidecar_digest

ROOT = Path(__file__).resolve().parents[3]


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its SHA-256 (to prove it was not touched)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _rewrite_sidecar(path: Path, change) -> None:
    """Edit a sidecar and recompute its checksum, as a careful forger would."""
    sidecar = json.loads(path.read_text())
    change(sidecar)
    if "sidecar_sha256" in sidecar:
        sidecar["sidecar_sha256"] = _sidecar_digest(sidecar)
    path.write_text(json.dumps(sidecar))


# -- paths and ids: nothing leaves the runs root -----------------------------------------
@pytest.mark.parametrize("bad", ["../outside/x", "/abs/dir", "..", "", "a" * 300, 123, None])
def test_ids_that_are_not_run_ids_are_refused_without_touching_anything(trained, outside, bad):
    root, _, _ = trained
    before = snapshot(outside)
    for call in (
        lambda: NNRun.load(id=bad, runs_root=root),
        lambda: NNCheckpoint.load(run=bad, runs_root=root),
        lambda: NNCheckpoint.load_with_training_state(run=bad, runs_root=root),
    ):
        with pytest.raises(ValueError, match="not a run id"):
            call()
    assert snapshot(outside) == before
    assert not list(outside.rglob(".lock"))


@pytest.mark.parametrize("bad", ["../outside/x", "/abs/dir", "..", "", "A" * 32, 123])
def test_a_resume_from_a_non_id_is_refused_where_it_is_typed(bad):
    with pytest.raises(ConfigError, match="resume_from_run_id"):
        NNTrainParams(resume_from_run_id=bad)


def test_a_run_folder_that_links_outside_the_root_is_refused(trained, outside):
    root, _, run = trained
    elsewhere = outside / "moved"
    shutil.move(str(run.run_dir), elsewhere)
    os.symlink(elsewhere, run.run_dir)
    before = snapshot(outside)
    with pytest.raises(ValueError, match="leads outside the runs root"):
        NNRun.load(run.id, runs_root=root)
    with pytest.raises(ValueError, match="leads outside the runs root"):
        NNCheckpoint.load(run=run.id, runs_root=root)
    assert snapshot(outside) == before


def test_a_resumed_run_records_a_validated_parent(trained):
    root, _, run = trained
    child = f.model().train(f.train_params(root, n_epochs=1, resume_from_run_id=run.id))
    assert child.metadata["parent_run_id"] == run.id
    assert child.resume_status["from_run_id"] == run.id


def test_a_tampered_sidecar_never_makes_the_writer_delete_outside_the_run(tmp_path, outside):
    """The writer deletes the tensors file the previous sidecar names: a sidecar pointing
    at ../../victim.txt (checksums recomputed) must not cost the victim its life."""
    victim = outside / "victim.txt"

    class Tamper:
        def on_checkpoint_written(self, event):
            if event.type == "last" and event.epoch == 1:
                rel = os.path.relpath(victim, Path(event.path).parent)
                _rewrite_sidecar(Path(event.path), lambda s: s.update(tensors_file=rel))

    run = f.model().train(
        f.train_params(tmp_path / "runs", n_epochs=3, checkpoint_every_s=0), callbacks=[Tamper()]
    )
    assert run.status.value == "finished"
    assert victim.read_text() == "do not delete me\n"
    ckpt = NNCheckpoint.load(run.id, runs_root=tmp_path / "runs")  # the last write is clean
    assert ckpt.epoch == 3


@pytest.mark.parametrize("name", ["../../outside/victim.txt", "/etc/passwd", "best.json"])
def test_a_sidecar_naming_anything_but_its_own_tensors_file_is_refused(trained, name):
    root, _, run = trained
    _rewrite_sidecar(run.run_dir / "checkpoints/last.json", lambda s: s.update(tensors_file=name))
    with pytest.raises(CheckpointCorruptError, match="may only name a tensors file"):
        NNCheckpoint.load(run.id, runs_root=root)
