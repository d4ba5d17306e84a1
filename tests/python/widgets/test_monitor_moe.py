"""The TrainingMonitor with a MoE: its load-balancing term (the epoch summary's ``aux``)
is a per-epoch column beside the task loss, live and read back from the log alike."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import Losses, Nets, NNModel, NNModelParams, NNMoEParams, NNTrainParams
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend


@pytest.fixture(autouse=True)
def _no_bar(monkeypatch):
    monkeypatch.setenv("NNX_TQDM_DISABLE", "1")


def test_the_moe_term_is_an_epoch_column_live_and_replayed(tmp_path):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(96, 6, generator=g)
    y = (X[:, 0] > 0).long()
    moe = NNMoEParams(input_dim=6, output_dim=2, num_experts=3, top_k=1, hidden_dim=8)
    model = NNModel(moe, NNModelParams(net=Nets.FEED_FWD_MOE, loss=Losses.CROSS_ENTROPY))
    monitor = TrainingMonitor()
    fe = FakeFrontend(monitor)
    loader = DataLoader(TensorDataset(X, y), batch_size=32)
    params = NNTrainParams(n_epochs=2, train_loader=loader, runs_root=str(tmp_path))
    run = model.train(params=params, callbacks=[monitor])
    assert monitor.status == "finished"
    rows = monitor.epoch_rows
    logged = [epoch["train"]["aux"]["load_balance"] for epoch in run.epochs]
    assert [r["train"]["load_balance"] for r in rows] == pytest.approx(logged)
    assert all(r["train"]["loss"] is not None for r in rows)  # the task loss beside it
    assert fe.state["status"] == "finished"
    replay = TrainingMonitor.from_run(run.id, runs_root=tmp_path)
    assert replay.epoch_rows == rows
    replay.close()
    monitor.close()
