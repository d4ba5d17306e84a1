"""A training step's and epoch's classification metrics come from per-class counts
(``Task.step_counts``), not from ``k x k`` matrices: the same numbers, bit for bit, as
the matrices' (built here independently with ``np.add.at``), for many classes, ignored
targets, empty steps and the binary task; a partial epoch a checkpoint saved as a
matrix, before the counts, resumes to the same counts."""

from __future__ import annotations

import numpy as np
import pytest

from nnx_lab.engine.edp import finalize, finalize_counts
from nnx_lab.engine.tasks import Task

CASES = [
    ("categorical", 3, None),
    ("categorical", 256, None),
    ("categorical", 256, -100),
    ("categorical", 5, 2),  # an ignore_index that is also a class index
    ("binary", 2, None),
]


def _rows(k, ignore, seed):
    rng = np.random.default_rng(seed)
    sizes = [int(s) for s in rng.integers(0, 40, size=12)] + [0, 7]  # empty steps too
    steps = np.repeat(np.arange(len(sizes)), sizes)
    truth = rng.integers(0, k, size=steps.size)
    # a prediction that often hits, so some classes have true positives
    pred = np.where(rng.random(steps.size) < 0.4, truth, rng.integers(0, k, size=steps.size))
    if ignore is not None:
        truth = np.where(rng.random(steps.size) < 0.2, ignore, truth)
        truth[steps == len(sizes) - 1] = ignore  # a step whose targets are all ignored
    return steps, truth.astype(np.int64), pred.astype(np.int64), len(sizes)


def _matrices(steps, truth, pred, n, k, ignore):
    keep = np.ones(truth.size, bool) if ignore is None else truth != ignore
    dense = np.zeros((n, k, k), dtype=np.int64)
    np.add.at(dense, (steps[keep], truth[keep], pred[keep]), 1)
    return dense


@pytest.mark.parametrize(("kind", "k", "ignore"), CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_step_metrics_from_counts_are_the_matrices_metrics_bit_for_bit(kind, k, ignore, seed):
    task = Task(kind, k, ignore)
    steps, truth, pred, n = _rows(k, ignore, seed)
    counts = task.step_counts(steps, truth, pred, n)
    dense = _matrices(steps, truth, pred, n, k, ignore)
    assert counts.shape == (n, 3, k)
    assert np.array_equal(counts[:, 1].sum(-1), dense.sum((1, 2)))  # targets scored
    # each step's metrics, then the epoch's (the steps' counts summed, one matrix)
    for got, want in (
        (finalize_counts(counts, kind), finalize(dense, kind)),
        (finalize_counts(counts.sum(0), kind), finalize(dense.sum(0), kind)),
    ):
        assert set(got) == set(want)
        for name in want:
            assert got[name].dtype == want[name].dtype
            assert np.array_equal(got[name], want[name]), name  # equal, not close


def test_an_empty_step_scores_nothing_and_a_full_hit_scores_one():
    task = Task("categorical", 4)
    steps = np.array([1, 1, 1])
    truth = np.array([0, 2, 3])
    counts = task.step_counts(steps, truth, truth.copy(), 2)
    got = finalize_counts(counts, "categorical")
    assert counts[0].sum() == 0
    assert got["accuracy"].tolist() == [0.0, 1.0]
    assert got["f1"].tolist() == [0.0, 1.0]


def test_a_partial_epoch_saved_as_a_matrix_resumes_as_its_counts():
    import torch

    from nnx_lab.engine.epoch_sums import EpochSums

    cpu = torch.device("cpu")
    task = Task("categorical", 6)
    steps, truth, pred, n = _rows(6, None, 3)
    counts = task.step_counts(steps, truth, pred, n).sum(0)
    matrix = _matrices(steps, truth, pred, n, 6, None).sum(0)
    base = {"loss_sum": 1.5, "weight": 3.0, "samples": int(steps.size)}
    old, new = EpochSums(task, None), EpochSums(task, None)
    old.restore({**base, "confusion": torch.from_numpy(matrix)}, cpu, statistics=True)
    new.restore({**base, "counts": torch.from_numpy(counts)}, cpu, statistics=True)
    assert np.array_equal(old.counts, counts)  # an older checkpoint's matrix, as counts
    assert np.array_equal(new.counts, counts)
    assert old.summary(None, None) == new.summary(None, None)
    new.batches = 1  # a partial epoch is saved once a batch trained
    saved = new.to_partial()
    assert "confusion" not in saved
    assert np.array_equal(saved["counts"].numpy(), counts)
    again = EpochSums(task, None)
    again.restore(saved, cpu, statistics=True)
    assert again.summary(None, None) == new.summary(None, None)


@pytest.mark.parametrize(("kind", "k", "ignore"), CASES)
def test_the_devices_counts_are_the_matrixs_without_its_ignored_row(kind, k, ignore):
    """``Task.counts`` (evaluation's, on the device) against the ``(k + 1) x k`` matrix
    whose last row collects the ignored targets."""
    import torch

    task = Task(kind, k, ignore)
    _, truth, pred, _ = _rows(k, ignore, 4)
    y, p = torch.from_numpy(truth), torch.from_numpy(pred)
    if kind == "binary":
        y = y.float()
    counts = task.counts(p, y).numpy()
    keep = np.ones(truth.size, bool) if ignore is None else truth != ignore
    matrix = np.zeros((k, k), dtype=np.int64)
    np.add.at(matrix, (truth[keep], pred[keep]), 1)
    assert counts.shape == (3, k)
    assert np.array_equal(counts[0], np.diagonal(matrix))
    assert np.array_equal(counts[1], matrix.sum(1))
    assert np.array_equal(counts[2], matrix.sum(0))
