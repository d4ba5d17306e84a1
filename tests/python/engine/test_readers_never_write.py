"""Readers never write (issue 20, section 4): a runs root nobody can write to reads in
full, and a reader without a lock stays consistent while a writer commits checkpoints.

The read-only root is truly read-only: as root (whom chmod does not stop), a tmpfs is
mounted and remounted ``ro``; as another user, the copy is made unwritable with chmod.
Either way, the test first checks that a write there fails.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import engine_factories as f
import numpy as np
import pytest
import torch

from nnx_lab import (
    Checkpoints,
    NNCheckpoint,
    NNModel,
    NNRun,
    drift_report,
    list_runs,
)
from nnx_lab.abstention import AbstentionPolicy, select_threshold
from nnx_lab.calibration import TemperatureCalibrator
from nnx_lab.data_splits import SplitManifest, plan_split
from nnx_lab.preprocessing import Standardizer
from nnx_lab.provenance import ExperimentManifest, compare


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A run with a manifest, and the saved documents beside it, in a writable folder."""
    src = tmp_path_factory.mktemp("readers-src")
    model = f.model()
    params = f.train_params(src / "runs", n_epochs=2, checkpoint_every_s=0)
    run = model.train(params, provenance=ExperimentManifest.for_model(model, train=params))
    docs = src / "docs"
    docs.mkdir()
    plan_split(list(range(30)), seed=0).save(docs / "split.json")
    Standardizer(["a", "b"], [0.0, 1.0], [1.0, 2.0]).save(docs / "standardizer.json")
    TemperatureCalibrator(
        temperature=1.5,
        kind="categorical",
        class_axis=-1,
        labels=None,
        n_outputs=3,
        model_id="m",
        split_id="cal",
        train_split_id="train",
        test_split_id=None,
        rows=10,
        nll_before=1.0,
        nll_after=0.9,
        iterations=3,
    ).save(docs / "calibrator.json")
    top = np.random.default_rng(0).uniform(0.5, 1.0, 100)
    p = np.stack([top, 1 - top], 1)
    select_threshold(p, np.zeros(100, int), risk_ceiling=0.5, split_id="val").require().save(
        docs / "policy.json"
    )
    for lock in (src / "runs" / run.id).glob(".*lock"):
        lock.unlink()  # a colleague's copy of the folder carries no lock files
    return src, run.id


def _mount_read_only(src: Path, target: Path) -> contextlib.AbstractContextManager:
    @contextlib.contextmanager
    def mounted():
        target.mkdir()
        try:
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(target)],
                check=True,
                capture_output=True,
            )
        except (OSError, subprocess.CalledProcessError) as exc:
            pytest.skip(f"cannot mount a tmpfs here ({exc}); run as another user instead")
        try:
            shutil.copytree(src, target, dirs_exist_ok=True)
            subprocess.run(["mount", "-o", "remount,ro", str(target)], check=True)
            yield target
        finally:
            subprocess.run(["umount", "-l", str(target)], check=False)

    return mounted()


def _chmod_read_only(src: Path, target: Path) -> contextlib.AbstractContextManager:
    @contextlib.contextmanager
    def unwritable():
        shutil.copytree(src, target)
        paths = [target, *target.rglob("*")]
        for p in paths:
            p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        try:
            yield target
        finally:
            for p in paths:
                p.chmod(p.stat().st_mode | stat.S_IWUSR)

    return unwritable()


@pytest.fixture
def read_only(written, tmp_path):
    src, run_id = written
    make = _mount_read_only if os.geteuid() == 0 else _chmod_read_only
    with make(src, tmp_path / "ro") as root:
        with pytest.raises(OSError, match=r"Read-only file system|Permission denied"):
            (root / "runs" / run_id / "probe").write_text("x")
        yield root, run_id


def test_every_reader_reads_a_read_only_runs_root(read_only):
    root, run_id = read_only
    runs = root / "runs"
    last = NNCheckpoint.load(run_id, runs_root=runs)
    best = NNCheckpoint.load(run_id, Checkpoints.BEST, runs_root=runs)
    ckpt, state = NNCheckpoint.load_with_training_state(run=run_id, runs_root=runs)
    assert (last.epoch, best.epoch, ckpt.epoch) == (2, best.epoch, 2)
    assert state is not None
    assert last.training_state() is not None
    model = NNModel.from_checkpoint(last)
    assert model.predict(torch.zeros(2, 8)).logits.shape == (2, 3)
    run = NNRun.load(run_id, runs_root=runs)
    assert run.provenance is not None
    table = list_runs(runs)
    assert list(table["run_id"]) == [run_id]
    assert list(table["status"]) == ["finished"]
    assert drift_report(run_id, runs_root=runs) is not None
    assert compare(run_id, run_id, runs_root=runs).same_plan is True
    docs = root / "docs"
    assert SplitManifest.load(docs / "split.json") == plan_split(list(range(30)), seed=0)
    assert Standardizer.load(docs / "standardizer.json").columns == ("a", "b")
    assert TemperatureCalibrator.load(docs / "calibrator.json").temperature == 1.5
    assert AbstentionPolicy.load(docs / "policy.json").split_id == "val"


def test_readers_leave_a_writable_folder_as_they_found_it(written, tmp_path):
    src, run_id = written
    shutil.copytree(src, tmp_path / "copy")
    runs = tmp_path / "copy" / "runs"

    def snapshot():
        return {p: p.stat().st_mtime_ns for p in sorted((tmp_path / "copy").rglob("*"))}

    before = snapshot()
    NNModel.from_checkpoint(NNCheckpoint.load(run_id, runs_root=runs))
    NNCheckpoint.load_with_training_state(run=run_id, type=Checkpoints.BEST, runs_root=runs)
    NNRun.load(run_id, runs_root=runs)
    list_runs(runs)
    drift_report(run_id, runs_root=runs)
    compare(run_id, run_id, runs_root=runs)
    assert snapshot() == before  # no .lock, no temp file, nothing touched


def test_a_lock_free_reader_stays_consistent_with_a_writer(tmp_path):
    """The writer commits 40 checkpoints while the reader loads; every load is whole:
    its tensors are those the sidecar it read names (the step is in the weights)."""
    from nnx_lab.engine.checkpoint import write_checkpoint

    run_id = "0123456789abcdef0123456789abcdef"
    run_dir = tmp_path / run_id
    (run_dir / "checkpoints").mkdir(parents=True)
    meta = {
        "run_id": run_id,
        "net_params": f.net_params().to_json(),
        "model_params": f.model_params().to_json(),
    }

    def commit(step: int) -> None:
        write_checkpoint(
            run_dir,
            ["last"],
            model_state={"w": torch.full((256, 256), float(step))},
            training_state=None,
            meta={**meta, "step": step},
        )

    commit(0)
    done, errors = threading.Event(), []

    def writer() -> None:
        try:
            for step in range(1, 41):
                commit(step)
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    loads = 0
    while not done.is_set() or loads == 0:
        ckpt = NNCheckpoint.load(run_id, runs_root=tmp_path)
        w = ckpt.model_state["w"]
        assert torch.equal(w, torch.full_like(w, float(ckpt.step)))
        loads += 1
    thread.join()
    assert errors == []
    assert NNCheckpoint.load(run_id, runs_root=tmp_path).step == 40
