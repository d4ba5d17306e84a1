"""Checkpoints survive a SIGKILL mid-write, and a damaged file is refused by name.

A child process trains and kills itself with SIGKILL at a chosen point inside the
second epoch's ``write_checkpoint``: mid-way through the tensors file, right after it,
mid-way through the sidecar, after the first sidecar (LAST committed, BEST not yet), and
after both sidecars (before the cleanup). Every time the run keeps a LAST (and BEST)
that loads and verifies, and a stateful resume from it continues exactly as the
uninterrupted run did.

One "zygote" process imports torch once and forks a child per kill point, so the kills
cost one interpreter start rather than five.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import torch
from fault_factories import build, killed_runs, trained_whole, zygote
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    CheckpointCorruptError,
    Checkpoints,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNParams,
    NNTrainParams,
)

EPOCHS = 3

ZYGOTE = zygote(
    """
import os, signal, tempfile
from nnx_lab.engine import checkpoint as ck

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def partial_write(path, data):
    # What a process killed inside atomic_write_bytes leaves: half a temp file.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data[: len(data) // 2])
        fh.flush()
    die()

def arm(point):
    real_write, real_cleanup, real_checkpoint = (
        ck.atomic_write_bytes, ck._remove_orphans, ck.write_checkpoint)
    calls = {"checkpoints": 0, "sidecars": 0}

    def write(path, data):
        if calls["checkpoints"] < 2:
            return real_write(path, data)
        tensors = path.suffix == ".safetensors"
        if point == "mid_tensors" and tensors:
            partial_write(path, data)
        if point == "mid_sidecar" and not tensors:
            partial_write(path, data)
        real_write(path, data)
        if point == "after_tensors" and tensors:
            die()
        if not tensors:
            calls["sidecars"] += 1
            if point == "after_first_sidecar" and calls["sidecars"] == 1:
                die()

    def cleanup(folder):
        if calls["checkpoints"] >= 2 and point == "before_cleanup":
            die()
        real_cleanup(folder)

    def checkpoint(*args, **kwargs):
        calls["checkpoints"] += 1
        return real_checkpoint(*args, **kwargs)

    ck.atomic_write_bytes, ck._remove_orphans = write, cleanup
    import nnx_lab.engine.handlers.checkpoints as policy
    policy.write_checkpoint = checkpoint
""",
    EPOCHS,
)

# point -> the epoch LAST holds after the kill (1: the previous one survived)
POINTS = {
    "mid_tensors": 1,
    "after_tensors": 1,
    "mid_sidecar": 1,
    "after_first_sidecar": 2,
    "before_cleanup": 2,
}


# Bitwise comparisons between runs: one intra-op thread keeps reductions in one order.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """Run the zygote once: one killed run per point, each under its own root."""
    base = tmp_path_factory.mktemp("killed")
    return killed_runs(ZYGOTE, {point: str(base / point) for point in POINTS})


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    return trained_whole(tmp_path_factory.mktemp("whole"), EPOCHS)


def _only_run(root: Path) -> str:
    (run_dir,) = [p for p in root.iterdir() if p.is_dir()]
    return run_dir.name


@pytest.mark.parametrize("point", list(POINTS))
def test_a_kill_during_a_checkpoint_write_leaves_a_loadable_last(
    killed, uninterrupted, point, tmp_path
):
    root, status, run_id = killed[point]
    assert status == 9, f"the child was not killed at {point} (status {status})"
    meta = (root / run_id / "metadata.yaml").read_text()
    assert "status: running" in meta  # it died without finishing
    last = NNCheckpoint.load(run=run_id, type=Checkpoints.LAST, runs_root=root)
    assert last.epoch == POINTS[point]
    best = NNCheckpoint.load(run=run_id, type=Checkpoints.BEST, runs_root=root)
    assert best.epoch in (1, 2)
    assert last.training_state()["epoch"] == last.epoch

    # The next resume works, and continues exactly as the uninterrupted run.
    whole_model, whole = uninterrupted
    model, params = build(root, EPOCHS - last.epoch, resume_from_run_id=run_id)
    resumed = model.train(params)
    assert resumed.status.value == "finished"
    assert [p.train_edp.loss for p in resumed.idps] == [p.train_edp.loss for p in whole.idps]
    for name, weight in whole_model.net.state_dict().items():
        assert torch.equal(weight, model.net.state_dict()[name]), name


def test_the_next_write_removes_what_a_killed_write_left(killed):
    from nnx_lab.engine.checkpoint import write_checkpoint

    root, _, run_id = killed["after_tensors"]
    folder = root / run_id / "checkpoints"
    referenced = {json.loads(p.read_text())["tensors_file"] for p in folder.glob("*.json")}
    leftovers = {p.name for p in folder.iterdir() if p.suffix != ".json"} - referenced
    assert leftovers  # the orphan tensors file of the killed write
    ckpt, state = NNCheckpoint.load_with_training_state(run=run_id, runs_root=root)
    meta = {k: ckpt.sidecar[k] for k in ("run_id", "epoch", "step", "net_params", "model_params")}
    write_checkpoint(
        root / run_id, ["last"], model_state=ckpt.model_state, training_state=state, meta=meta
    )
    names = {p.name for p in folder.iterdir()}
    assert not (names & leftovers)
    assert NNCheckpoint.load(run=run_id, type=Checkpoints.BEST, runs_root=root).epoch >= 1


def test_the_sweep_reads_a_sidecar_changed_since_this_process_wrote_it(tmp_path):
    # the writer knows its own sidecars without a parse only while they hold its bytes:
    # a sidecar pointed elsewhere since (another process, an edit in place) is read again,
    # so the file it names now is kept and the one it named before is swept
    from nnx_lab.engine.checkpoint import write_checkpoint

    run = _trained(tmp_path)
    folder = tmp_path / run.id / "checkpoints"
    ckpt, state = NNCheckpoint.load_with_training_state(run=run.id, runs_root=tmp_path)
    meta = {k: ckpt.sidecar[k] for k in ("run_id", "epoch", "step", "net_params", "model_params")}
    write_checkpoint(
        tmp_path / run.id, ["q1"], model_state=ckpt.model_state, training_state=state, meta=meta
    )
    sidecar = folder / "q1.json"
    before = json.loads(sidecar.read_text())["tensors_file"]
    moved = "q1-00000000-0000beef.safetensors"
    (folder / moved).write_bytes((folder / before).read_bytes())
    text = sidecar.read_text().replace(before, moved)
    with open(sidecar, "r+") as fh:  # in place: the same inode, the same size
        fh.write(text)
        fh.truncate()
    write_checkpoint(
        tmp_path / run.id, ["q2"], model_state=ckpt.model_state, training_state=state, meta=meta
    )
    names = {p.name for p in folder.iterdir()}
    assert moved in names
    assert before not in names


# -- damaged files are refused, naming the file ------------------------------------------------
def _trained(tmp_path):
    model = NNModel(
        net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=[16]), params=NNModelParams()
    )
    X = torch.randn(32, 8)
    y = torch.randint(0, 3, (32,))
    return model.train(
        NNTrainParams(
            n_epochs=1,
            train_loader=DataLoader(TensorDataset(X, y), batch_size=16),
            runs_root=str(tmp_path),
        )
    )


def _tensors_file(run) -> Path:
    folder = run.run_dir / "checkpoints"
    return folder / json.loads((folder / "last.json").read_text())["tensors_file"]


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_tensors_file_is_refused_by_name(tmp_path, damage):
    run = _trained(tmp_path)
    path = _tensors_file(run)
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data[-3] ^= 0x01
    os.unlink(path)  # LAST and BEST share the bytes through a hard link
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointCorruptError, match=f"{path}.*corrupted or truncated"):
        NNCheckpoint.load(run=run.id, type=Checkpoints.LAST, runs_root=tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    model = NNModel(net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=[16]))
    with pytest.raises(CheckpointCorruptError, match=path.name):
        model.train(
            NNTrainParams(
                n_epochs=1,
                train_loader=[(torch.randn(4, 8), torch.randint(0, 3, (4,)))],
                runs_root=str(tmp_path),
                resume_from_run_id=run.id,
            )
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    # BEST (another name for the same bytes) is untouched and still loads.
    assert NNCheckpoint.load(run=run.id, type=Checkpoints.BEST, runs_root=tmp_path).epoch == 1


def test_a_missing_tensors_file_is_refused_by_name(tmp_path):
    run = _trained(tmp_path)
    path = _tensors_file(run)
    os.unlink(path)
    with pytest.raises(CheckpointCorruptError, match=f"{path} named by .* is missing"):
        NNCheckpoint.load(run=run.id, runs_root=tmp_path)


def test_a_truncated_or_edited_sidecar_is_refused_by_name(tmp_path):
    run = _trained(tmp_path)
    sidecar = run.run_dir / "checkpoints" / "last.json"
    text = sidecar.read_text()
    edited = re.sub(r'"epoch":\s*1', '"epoch": 7', text, count=1)
    assert edited != text
    sidecar.write_text(edited)
    with pytest.raises(CheckpointCorruptError, match=f"{sidecar} is corrupted"):
        NNCheckpoint.load(run=run.id, runs_root=tmp_path)
    sidecar.write_text(text[: len(text) // 2])
    with pytest.raises(CheckpointCorruptError, match=f"{sidecar} is corrupted or truncated"):
        NNCheckpoint.load_with_training_state(run=run.id, runs_root=tmp_path)
    sidecar.write_text(text)
    assert NNCheckpoint.load(run=run.id, runs_root=tmp_path).epoch == 1
