"""Importable factories for nnx_lab.launch tests: the launched processes import them by
name from the plan's JSON (``launch_factories:make_train_loader``)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset


def _tensors(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long()


def make_train_loader() -> DataLoader:
    return DataLoader(TensorDataset(*_tensors(256, 0)), batch_size=32)


def make_val_loader() -> DataLoader:
    return DataLoader(TensorDataset(*_tensors(66, 1)), batch_size=32)


def make_long_train_loader() -> DataLoader:
    return DataLoader(TensorDataset(*_tensors(8192, 2)), batch_size=32, shuffle=True)


def make_odd_batch_loader() -> DataLoader:
    return DataLoader(TensorDataset(*_tensors(64, 3)), batch_size=15)


def fails_on_rank_one() -> DataLoader:
    if os.environ.get("RANK") == "1":
        raise ValueError("rank 1 could not read its shard (a test failure on purpose)")
    return make_train_loader()


# -- failing ranks, and slow moments to stop in (the tests of a failing rank and of stop) --


def _marker(name: str) -> None:
    """A file the test waits for: ``NNX_TEST_MARKERS/<name>``."""
    folder = os.environ.get("NNX_TEST_MARKERS")
    if folder:
        with open(os.path.join(folder, name), "w") as fh:
            fh.write(str(os.getpid()))


class RaiseAtEpochEndOnRankOne:
    """A callback raising on rank 1 as epoch 1 ends (the others wait in a collective)."""

    def on_epoch_ended(self, event):
        if os.environ.get("RANK") == "1" and event.epoch == 1:
            raise ValueError("rank 1's callback fails at the end of epoch 1 (on purpose)")


class _RowsFailingOnRankOne(Dataset):
    """Rows that cannot be read on rank 1 after its ``after``-th read (``when``: "train"
    while gradients are on, "val" under validation's no_grad)."""

    def __init__(self, n: int, seed: int, after: int, when: str) -> None:
        self.x, self.y = _tensors(n, seed)
        self.after, self.when, self.reads = after, when, 0

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i):
        if os.environ.get("RANK") == "1":
            validating = not torch.is_grad_enabled()
            if (self.when == "val") == validating:
                self.reads += 1
                if self.reads > self.after:
                    raise OSError(f"rank 1 cannot read row {i} ({self.when}, on purpose)")
        return self.x[i], self.y[i]


def fails_loading_mid_epoch_on_rank_one() -> DataLoader:
    # rank 1 reads 16 rows a step: the 150th read is inside epoch 2 (or later)
    return DataLoader(_RowsFailingOnRankOne(256, 0, after=150, when="train"), batch_size=32)


def fails_validating_on_rank_one() -> DataLoader:
    return DataLoader(_RowsFailingOnRankOne(66, 1, after=0, when="val"), batch_size=32)


class BreakCheckpointsOnRankZero:
    """Rank 0's checkpoints folder replaced by a file: its first checkpoint write fails."""

    def on_run_started(self, event):
        if os.environ.get("RANK") == "0" and event.run_dir:
            folder = Path(event.run_dir) / "checkpoints"
            shutil.rmtree(folder, ignore_errors=True)
            folder.write_text("not a folder")


class SlowStartOnRankZero:
    """Rank 0 takes 3 s as the run starts (its folder exists, no step trained yet)."""

    def on_run_started(self, event):
        if os.environ.get("RANK") == "0":
            _marker("run_started")
            time.sleep(3.0)


class SlowSaveOnRankZero:
    """Rank 0 takes 3 s after writing epoch 1's checkpoint (the others wait for it)."""

    def on_checkpoint_written(self, event):
        if os.environ.get("RANK") == "0" and not os.path.exists(_marker_path("saving")):
            _marker("saving")
            time.sleep(3.0)


def _marker_path(name: str) -> str:
    return os.path.join(os.environ.get("NNX_TEST_MARKERS", "/nonexistent"), name)


def make_slow_train_loader() -> DataLoader:
    """Slow to build (3 s on every rank): the ranks are still starting."""
    _marker(f"building{os.environ.get('RANK', '')}")
    time.sleep(3.0)
    return make_train_loader()


# -- for the tests themselves ------------------------------------------------------------


def processes_of(folder) -> list[int]:
    """Live processes whose command line names the launch folder (torchrun, workers)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
        except OSError:
            continue
        if str(folder) in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


def wait_for(predicate, timeout: float = 90.0, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
