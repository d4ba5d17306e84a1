"""A step's, an epoch's and an evaluation's classification metrics come from per-class
counts (``Task.step_counts``, ``Task.counts``), not from ``k x k`` matrices: the counts are
a matrix's diagonal, row sums and column sums exactly (the matrix built here
independently with ``np.add.at``), and the metrics equal a plain reference computed
from the rows (sklearn's macro average, zero_division=0; the positive class for a
binary model), for many classes, ignored targets, empty steps and the binary task. A
partial epoch a checkpoint saved as a matrix, before the counts, resumes as its counts.
"""

from __future__ import annotations

import numpy as np
import pytest

from nnx_lab.engine.edp import finalize
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


def _marginals(matrix):
    """A matrix's true positives, targets and predictions per class (``[..., 3, k]``)."""
    diagonal = np.diagonal(matrix, axis1=-2, axis2=-1)
    return np.stack([diagonal, matrix.sum(-1), matrix.sum(-2)], axis=-2)


def _reference(kind, truth, pred):
    """The metrics of one group of rows, computed from the rows themselves."""
    if truth.size == 0:
        return {"accuracy": 0.0, "precision": 0.0, "recall": 0.0, "f1": 0.0}
    accuracy = float(np.mean(truth == pred))
    classes = [1] if kind == "binary" else np.union1d(truth, pred)
    p, r, f = [], [], []
    for c in classes:
        tp = np.sum((pred == c) & (truth == c))
        pp, sup = np.sum(pred == c), np.sum(truth == c)
        pc, rc = (tp / pp if pp else 0.0), (tp / sup if sup else 0.0)
        p, r, f = [*p, pc], [*r, rc], [*f, 2 * pc * rc / (pc + rc) if pc + rc else 0.0]
    return {"accuracy": accuracy, "precision": np.mean(p), "recall": np.mean(r), "f1": np.mean(f)}


@pytest.mark.parametrize(("kind", "k", "ignore"), CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_step_counts_are_the_matrices_marginals_and_score_as_the_rows_do(kind, k, ignore, seed):
    task = Task(kind, k, ignore)
    steps, truth, pred, n = _rows(k, ignore, seed)
    counts = task.step_counts(steps, truth, pred, n)
    dense = _matrices(steps, truth, pred, n, k, ignore)
    assert counts.shape == (n, 3, k)
    assert np.array_equal(counts, _marginals(dense))  # every count, exactly
    keep = np.ones(truth.size, bool) if ignore is None else truth != ignore
    got = finalize(counts, kind)
    for i in range(n):
        rows = keep & (steps == i)
        want = _reference(kind, truth[rows], pred[rows])
        for name, value in want.items():
            assert got[name][i] == pytest.approx(value, abs=1e-12), (i, name)
        assert got["error"][i] == pytest.approx(1 - want["accuracy"], abs=1e-12)
    epoch = finalize(counts.sum(0), kind)  # the epoch's: the steps' counts summed
    for name, value in _reference(kind, truth[keep], pred[keep]).items():
        assert float(epoch[name]) == pytest.approx(value, abs=1e-12), name


def test_an_empty_step_scores_nothing_and_a_full_hit_scores_one():
    task = Task("categorical", 4)
    steps = np.array([1, 1, 1])
    truth = np.array([0, 2, 3])
    counts = task.step_counts(steps, truth, truth.copy(), 2)
    got = finalize(counts, "categorical")
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
    assert np.array_equal(counts, _marginals(matrix))
