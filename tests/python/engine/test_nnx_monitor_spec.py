"""``MonitorSpec`` in NNx's spelling (issue 29): the defaults (``metric="loss"``,
``mode=None``), NNx's positional order, and ``on_missing`` / ``on_nonfinite``."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    ConfigError,
    MetricSpec,
    MonitorSpec,
    MonitorUnavailableError,
    NNModel,
    NNModelParams,
    NNParams,
    NNTrainParams,
)
from nnx_lab.engine.selection import MonitorState

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_monitor_spec_takes_nnx_defaults_and_positional_order():
    assert MonitorSpec() == MonitorSpec("loss", mode="min")
    assert MonitorSpec("accuracy", mode=None).mode == "max"  # the natural direction
    nnx_order = MonitorSpec("loss", "train", "min", 0.01)  # (metric, split, mode, min_delta)
    assert nnx_order == MonitorSpec("loss", min_delta=0.01, split="train")
    assert MonitorSpec("nll", "val") == MonitorSpec("nll")
    # ours stays: (metric, min_delta, mode, split)
    assert MonitorSpec("nll", 0.5, "auto", "train").min_delta == 0.5
    # the default policies leave the JSON (so run ids and records) as before
    assert MonitorSpec("nll").to_json() == {
        "metric": "nll", "min_delta": 0.0, "mode": "min", "split": "val",
    }  # fmt: skip
    strict = MonitorSpec("nll", on_missing="error", on_nonfinite="error")
    assert MonitorSpec.from_json(strict.to_json()) == strict
    assert strict.to_json()["on_missing"] == "error"
    for field in ("on_missing", "on_nonfinite"):
        with pytest.raises(ConfigError, match=f"MonitorSpec.{field}='raise'"):
            MonitorSpec("nll", **{field: "raise"})


def test_on_missing_and_on_nonfinite_error_stop_at_that_epoch():
    skip = MonitorState(MonitorSpec("nll"))
    assert [skip.observe(v).status for v in (None, math.nan)] == ["unavailable"] * 2
    missing = MonitorState(MonitorSpec("nll", on_missing="error"))
    assert missing.observe(math.inf).status == "unavailable"  # only a missing value stops
    with pytest.raises(MonitorUnavailableError, match=r"'val_edp\.metrics\.nll' has no value"):
        missing.observe(None)
    nonfinite = MonitorState(MonitorSpec("nll", on_nonfinite="error"))
    assert nonfinite.observe(None).status == "unavailable"
    with pytest.raises(MonitorUnavailableError, match="non-finite"):
        nonfinite.observe(math.nan)
    assert issubclass(MonitorUnavailableError, ValueError)  # NNx's base


def test_a_run_with_on_missing_error_stops_at_the_first_epoch_without_a_value(tmp_path):
    """AUROC of a one-class validation set is undefined: the run stops at epoch 1."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(60, 4, generator=g)
    y = (X[:, 0] > 0).long()
    monitor = MonitorSpec("auroc", on_missing="error")
    params = NNTrainParams(
        n_epochs=3,
        seed=1,
        train_loader=DataLoader(TensorDataset(X, y), batch_size=20),
        val_loader=DataLoader(TensorDataset(X, torch.zeros_like(y)), batch_size=30),
        metrics=[MetricSpec("auroc")],
        monitor=monitor,
        runs_root=str(tmp_path),
        progress=False,
        checkpoint_every_s=0,
    )
    model = NNModel(NNParams(input_dim=4, output_dim=2, hidden_dims=[8]), NNModelParams())
    with pytest.raises(MonitorUnavailableError, match="auroc"):
        model.train(params)
