"""Every check before the run directory; clean failures after it (bad later batches, NaN data).

Part of the hardening review: each test tries to break one promise.
"""

from __future__ import annotations

import re
from pathlib import Path

import engine_factories as f
import pytest
import torch
import yaml

from nnx_lab import (
    ConfigError,
    DataError,
    Losses,
    NNOptimParams,
    NNRun,
    NNTrainParams,
    ResumeError,
)

ROOT = Path(__file__).resolve().parents[3]


# -- every check before the run directory; clean failures after it ------------------------
def _batches(*extra):
    X, y, _, _ = f.data(n_train=96)
    good = [(X[i : i + 32], y[i : i + 32]) for i in range(0, 96, 32)]
    return good[:2] + list(extra) + good[2:]


@pytest.mark.parametrize(
    ("bad", "text"),
    [
        (
            (torch.randn(32, 8), torch.full((32,), 7)),
            r"batch 2 of epoch 1's class targets span \[7, 7\]",
        ),
        (
            (torch.randn(32, 5), torch.zeros(32).long()),
            "batch 2 of epoch 1's features have shape (32, 5)",
        ),
        ((torch.randn(32, 8), torch.zeros(32, 1).long()), "y.squeeze(1)"),
        ((torch.randn(32, 8).double(), torch.zeros(32).long()), "dtype torch.float64"),
        ((torch.randn(32, 8), torch.zeros(32).long(), torch.zeros(32)), "not an (X, y) pair"),
    ],
)
def test_a_bad_later_batch_fails_the_run_cleanly_and_a_rerun_is_allowed(runs_root, bad, text):
    params = f.train_params(runs_root, train_loader=_batches(bad), val_loader=None)
    with pytest.raises(DataError, match=re.escape(text) if "[" not in text else text):
        f.model().train(params)
    (run_dir,) = [p for p in runs_root.iterdir() if not p.name.startswith(".")]
    meta = yaml.safe_load((run_dir / "metadata.yaml").read_text())
    assert meta["status"] == "failed"
    assert "DataError" in meta["error"]
    with pytest.warns(RuntimeWarning, match="moved to"), pytest.raises(DataError):
        f.model().train(params)  # the same failure again: not FileExistsError
    assert len(list((runs_root / ".replaced").iterdir())) == 1


def test_a_bad_validation_batch_is_named(runs_root):
    _, _, Xv, yv = f.data()
    val = [(Xv[:32], yv[:32]), (Xv[32:], torch.full((32,), 9))]
    with pytest.raises(DataError, match="validation batch 1 after epoch 1"):
        f.model().train(f.train_params(runs_root, val_loader=val))


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: NNOptimParams(max_lr=1e300), "max_lr"),
        (lambda: NNTrainParams(seed=2**64), "seed"),
        (lambda: NNTrainParams(seed=-1), "seed"),
    ],
)
def test_out_of_range_numbers_are_refused_where_they_are_typed(build, field):
    with pytest.raises(ConfigError, match=field):
        build()


def test_a_one_shot_generator_is_refused_before_a_run(runs_root):
    X, y, _, _ = f.data()
    gen = ((X[i : i + 32], y[i : i + 32]) for i in range(0, 256, 32))
    with pytest.raises(DataError, match="one-shot iterator"):
        f.model().train(f.train_params(runs_root, train_loader=gen, val_loader=None))
    assert not runs_root.exists()


def test_a_stateful_resume_with_another_loss_is_refused(trained):
    root, _, run = trained
    for loss in (Losses.MEAN_SQUARED_ERROR, Losses.NEGATIVE_LOG_LIKELIHOOD):
        model = f.model(loss=loss)
        X, _, _, _ = f.data()
        kw = {}
        if loss is Losses.MEAN_SQUARED_ERROR:
            kw = {"train_loader": [(X[:32], torch.zeros(32, 3))], "val_loader": None}
        before = sorted(p.name for p in root.iterdir())
        with pytest.raises(ResumeError, match="resume loss mismatch"):
            model.train(f.train_params(root, n_epochs=1, resume_from_run_id=run.id, **kw))
        assert sorted(p.name for p in root.iterdir()) == before


@pytest.mark.parametrize("where", ["features", "targets"])
def test_nan_data_in_a_later_batch_fails_the_run_naming_the_step(runs_root, where):
    X = torch.randn(160, 8)
    y = X[:, :1] * 2
    if where == "features":
        X[130, 3] = float("nan")  # batch 4 (of 32 rows)
    else:
        y[130, 0] = float("nan")
    batches = [(X[i : i + 32], y[i : i + 32]) for i in range(0, 160, 32)]
    model = f.model(net={"output_dim": 1}, loss=Losses.MEAN_SQUARED_ERROR)
    params = f.train_params(runs_root, n_epochs=2, train_loader=batches, val_loader=None)
    with pytest.raises(
        FloatingPointError, match=r"non-finite training loss at step 5 \(epoch 1, batch 4\)"
    ):
        model.train(params)
    run = NNRun.load(model.last_run.id, runs_root=runs_root)
    assert run.status.value == "failed"
    assert "step 5" in run.error
    opted_out = f.model(net={"output_dim": 1}, loss=Losses.MEAN_SQUARED_ERROR).train(
        params.replace(stop_on_nonfinite=False, runs_root=str(runs_root / "b"))
    )
    assert opted_out.status.value == "finished"
