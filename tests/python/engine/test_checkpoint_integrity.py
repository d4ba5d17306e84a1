"""Integrity: a tampered, edited, copied or damaged checkpoint or log never loads silently wrong.

Part of the hardening review: each test tries to break one promise.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import engine_factories as f
import pytest
import yaml

from nnx_lab import (
    CheckpointCorruptError,
    Checkpoints,
    NNCheckpoint,
    NNRun,
)
from nnx_lab.engine.checkpoint import _sidecar_digest
from nnx_lab.runs import LogDamagedError, RunRecordError

ROOT = Path(__file__).resolve().parents[3]


def _rewrite_sidecar(path: Path, change) -> None:
    """Edit a sidecar and recompute its checksum, as a careful forger would."""
    sidecar = json.loads(path.read_text())
    change(sidecar)
    if "sidecar_sha256" in sidecar:
        sidecar["sidecar_sha256"] = _sidecar_digest(sidecar)
    path.write_text(json.dumps(sidecar))


# -- integrity: nothing loads silently wrong --------------------------------------------
def test_a_sidecar_without_its_checksum_is_corrupt(trained):
    """Deleting the self-checksum once let an edited activation build a tanh network."""
    root, _, run = trained
    path = run.run_dir / "checkpoints/last.json"

    def edit(s):
        s["model_params"]["loss"] = "mean_squared_error"
        del s["sidecar_sha256"]

    _rewrite_sidecar(path, edit)
    with pytest.raises(CheckpointCorruptError, match="no checksum of its own"):
        NNCheckpoint.load(run.id, runs_root=root)


def test_an_edited_recipe_is_refused_even_with_checksums_recomputed(trained):
    root, _, run = trained
    path = run.run_dir / "checkpoints/last.json"
    _rewrite_sidecar(path, lambda s: s["net_params"].update(activation="tanh"))
    with pytest.raises(CheckpointCorruptError, match="recorded"):
        NNCheckpoint.load(run.id, runs_root=root)


def test_a_flipped_weight_byte_is_refused(trained):
    root, _, run = trained
    folder = run.run_dir / "checkpoints"
    sidecar = json.loads((folder / "last.json").read_text())
    tensors = folder / sidecar["tensors_file"]
    data = bytearray(tensors.read_bytes())
    data[-3] ^= 0x7F  # a weight's high byte
    tensors.write_bytes(bytes(data))

    def forge(s):
        s["sha256"] = hashlib.sha256(bytes(data)).hexdigest()
        del s["sidecar_sha256"]

    _rewrite_sidecar(folder / "last.json", forge)
    with pytest.raises(CheckpointCorruptError):
        NNCheckpoint.load(run.id, runs_root=root)
    with pytest.raises(CheckpointCorruptError):  # and resume does not continue from it
        f.model().train(f.train_params(root, n_epochs=1, resume_from_run_id=run.id))


def test_best_copied_over_last_is_refused(trained):
    root, _, run = trained
    folder = run.run_dir / "checkpoints"
    shutil.copy(folder / "best.json", folder / "last.json")
    with pytest.raises(CheckpointCorruptError, match="BEST checkpoint, not LAST"):
        NNCheckpoint.load(run.id, Checkpoints.LAST, runs_root=root)


def test_another_runs_checkpoint_copied_in_is_refused(trained):
    root, _, run = trained
    other = f.model().train(f.train_params(root, n_epochs=1, seed=7))
    src, dst = other.run_dir / "checkpoints", run.run_dir / "checkpoints"
    sidecar = json.loads((src / "last.json").read_text())
    shutil.copy(src / sidecar["tensors_file"], dst / sidecar["tensors_file"])
    shutil.copy(src / "last.json", dst / "last.json")
    with pytest.raises(CheckpointCorruptError, match=f"belongs to run '{other.id}'"):
        NNCheckpoint.load(run.id, runs_root=root)
    with pytest.raises(CheckpointCorruptError):
        f.model().train(f.train_params(root, n_epochs=1, resume_from_run_id=run.id))


@pytest.mark.parametrize(
    ("damage", "line"),
    [
        (b"{not json}\n", 3),
        (b"[1, 2]\n", 3),
        (b'{"event": "step", "step": "three"}\n', 3),
        (b'{"event": "nonsense"}\n', 3),
        (b"\xff\xfe\n", 3),
    ],
)
def test_a_damaged_log_names_the_file_and_the_line(trained, damage, line):
    root, _, run = trained
    log = run.run_dir / "metrics.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[line - 1] = damage
    log.write_bytes(b"".join(lines))
    with pytest.raises(LogDamagedError, match=rf"metrics\.jsonl, line {line}:") as err:
        NNRun.load(run.id, runs_root=root)
    assert err.value.line == line


def test_a_torn_last_line_is_tolerated(trained):
    root, _, run = trained
    log = run.run_dir / "metrics.jsonl"
    with log.open("ab") as fh:
        fh.write(b'{"event": "step", "st')  # the writer died mid-line
    loaded = NNRun.load(run.id, runs_root=root)
    assert len(loaded.idps) == len(run.idps)


def test_a_resume_from_a_damaged_parent_creates_nothing_and_a_retry_works(trained):
    root, _, run = trained
    log = run.run_dir / "metrics.jsonl"
    good = log.read_bytes()
    log.write_bytes(good.replace(b"\n", b"\n{oops}\n", 1))
    before = sorted(p.name for p in root.iterdir())
    params = f.train_params(root, n_epochs=1, resume_from_run_id=run.id)
    with pytest.raises(LogDamagedError, match="line 2"):
        f.model().train(params)
    assert sorted(p.name for p in root.iterdir()) == before  # no child directory
    log.write_bytes(good)
    child = f.model().train(params)  # no FileExistsError: nothing was left behind
    assert child.status.value == "finished"


def test_damaged_records_name_their_file(trained):
    root, _, run = trained
    (run.run_dir / "metadata.yaml").write_text("status: [unclosed\n")
    with pytest.raises(RunRecordError, match=r"metadata\.yaml: not valid YAML"):
        NNRun.load(run.id, runs_root=root)
    (run.run_dir / "metadata.yaml").write_text("status: finished\n")
    config = yaml.safe_load((run.run_dir / "run.yaml").read_text())
    config["train"]["n_epochs"] = 99
    (run.run_dir / "run.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(RunRecordError, match="does not hash to the run id"):
        NNRun.load(run.id, runs_root=root)
    with pytest.raises(CheckpointCorruptError, match="does not hash to the run id"):
        NNCheckpoint.load(run.id, runs_root=root)
