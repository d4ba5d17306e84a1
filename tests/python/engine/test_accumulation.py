"""Gradient accumulation: exact for uneven micro-batches.

Each micro-batch's loss is weighted by its sample count and the summed gradient is
divided by the window's total, so an accumulated run takes the same updates as the
un-accumulated run on the union batches (to float tolerance: only the summation order
differs).
"""

from __future__ import annotations

import json

import pytest
import torch

from nnx_lab import (
    Losses,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
)
from nnx_lab.errors import ConfigError

# Bitwise comparisons between runs: one intra-op thread keeps reductions in one order.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _data(loss, n):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 8, generator=g)
    if loss is Losses.MEAN_SQUARED_ERROR:
        return X, torch.stack([X.sum(1), X[:, 0] - X[:, 1]], 1)
    return X, (X @ torch.randn(8, 3, generator=g)).argmax(1)


def _split(X, y, sizes):
    out, start = [], 0
    for size in sizes:
        out.append((X[start : start + size], y[start : start + size]))
        start += size
    assert start == len(X)
    return out


def _train(root, loss, batches, accumulation_steps, optim, epochs=2):
    out_dim = 2 if loss is Losses.MEAN_SQUARED_ERROR else 3
    model = NNModel(
        net_params=NNParams(input_dim=8, output_dim=out_dim, hidden_dims=[16]),
        params=NNModelParams(loss=loss),
    )
    run = model.train(
        NNTrainParams(
            n_epochs=epochs,
            train_loader=batches,
            accumulation_steps=accumulation_steps,
            optim=optim,
            runs_root=str(root),
        )
    )
    return model, run


OPTIMS = {
    "adam+clip": NNOptimParams(max_lr=1e-2, grad_clip_norm=0.5),
    "sgd": NNOptimParams.builder().sgd(max_lr=0.05).build(),
}


@pytest.mark.parametrize("optim", sorted(OPTIMS))
@pytest.mark.parametrize("loss", [Losses.CROSS_ENTROPY, Losses.MEAN_SQUARED_ERROR])
@pytest.mark.parametrize(
    ("micro", "union", "k"),
    [
        ([5, 3, 7, 1, 6, 2], [8, 8, 8], 2),  # uneven micro-batches
        ([4, 4, 4, 4, 4], [8, 8, 4], 2),  # a short final window
        ([1, 9, 2, 4, 4, 4], [12, 12], 3),
    ],
)
def test_accumulation_equals_the_union_batch(tmp_path, loss, optim, micro, union, k):
    X, y = _data(loss, sum(micro))
    acc_model, acc = _train(tmp_path / "acc", loss, _split(X, y, micro), k, OPTIMS[optim])
    one_model, one = _train(tmp_path / "one", loss, _split(X, y, union), 1, OPTIMS[optim])
    assert [p.train_edp.samples for p in acc.idps] == [p.train_edp.samples for p in one.idps]
    assert [p.iteration for p in acc.idps] == [p.iteration for p in one.idps]
    assert [p.train_edp.loss for p in acc.idps] == pytest.approx(
        [p.train_edp.loss for p in one.idps], rel=1e-5
    )
    for name, weight in acc_model.net.state_dict().items():
        torch.testing.assert_close(weight, one_model.net.state_dict()[name], rtol=1e-5, atol=1e-6)
    # Per-epoch metrics are over the same samples.
    samples = [[e["train"]["samples"] for e in r.epochs] for r in (acc, one)]
    assert samples[0] == samples[1]
    if loss is Losses.CROSS_ENTROPY:
        assert [p.train_edp.accuracy for p in acc.idps] == [p.train_edp.accuracy for p in one.idps]


def test_steps_per_epoch_count_updates_not_micro_batches(tmp_path):
    X, y = _data(Losses.CROSS_ENTROPY, 40)
    _, run = _train(
        tmp_path, Losses.CROSS_ENTROPY, _split(X, y, [8] * 5), 2, OPTIMS["sgd"], epochs=1
    )
    started = json.loads((run.run_dir / "metrics.jsonl").read_text().splitlines()[0])
    assert started["event"] == "run_started"
    assert started["steps_per_epoch"] == 3
    assert [p.batch for p in run.idps] == [0, 1, 2]


def test_accumulation_steps_is_validated():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match=r"NNTrainParams\.accumulation_steps"):
            NNTrainParams(accumulation_steps=bad)
