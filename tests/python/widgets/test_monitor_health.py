"""TrainingMonitor(health=True) (issue 28): the heatmap's payload, live and replayed,
the first problem named with its step, and `import nnx_lab.widgets` still torch-free."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    Devices,
    HealthProbe,
    Losses,
    Nets,
    NNModel,
    NNModelParams,
    NNParams,
    NNTrainParams,
)
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend


@pytest.fixture(autouse=True)
def _no_bar(monkeypatch):
    monkeypatch.setenv("NNX_TQDM_DISABLE", "1")


def _model(hidden=(16, 16)):
    return NNModel(
        net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=list(hidden), dropout_prob=0),
        params=NNModelParams(net=Nets.FEED_FWD, device=Devices.CPU, loss=Losses.CROSS_ENTROPY),
    )


def _loader(n=256, nan_row=None):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 8, generator=g)
    if nan_row is not None:
        X[nan_row] = float("nan")
    return DataLoader(TensorDataset(X, torch.randint(0, 3, (n,), generator=g)), batch_size=32)


def test_the_payload_is_tensors_by_sampled_steps_and_replays_the_same(tmp_path):
    monitor = TrainingMonitor(health=HealthProbe(every=3))
    fe = FakeFrontend(monitor)
    params = NNTrainParams(n_epochs=2, train_loader=_loader(), runs_root=str(tmp_path))
    run = _model().train(params, callbacks=[monitor])
    payload = monitor.health
    assert payload["names"] == list(monitor.health_probe.records[0].names) == [
        "layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias",
        "layers.4.weight", "layers.4.bias",
    ]  # fmt: skip
    assert payload["steps"] == [1, 3, 6, 9, 12, 15]
    assert len(payload["grad_norm"]) == 6
    assert all(len(row) == 6 for row in payload["grad_norm"])
    assert payload["grad_norm"][0][0] == pytest.approx(monitor.health_probe.records[0].grad_norm[0])
    assert set(payload["dead"]) == {"layers.1", "layers.3"}
    assert payload["first"] is None
    assert fe.state["health"]["steps"] == payload["steps"]  # synced to the page
    replay = TrainingMonitor.from_run(run.id, runs_root=tmp_path)
    assert replay.health == payload
    replay.close()
    monitor.close()


def test_a_nan_run_names_where_it_started(tmp_path):
    monitor = TrainingMonitor(health=HealthProbe(every=100))
    params = NNTrainParams(n_epochs=1, train_loader=_loader(nan_row=70), runs_root=str(tmp_path))
    with pytest.raises(Exception, match="non-finite"):
        _model().train(params, callbacks=[monitor])
    first = monitor.health["first"]
    assert first["kind"] == "nonfinite"
    assert first["step"] == 3  # the batch of rows 64..95
    assert first["layer"] == "layers.0.weight"
    monitor.close()


def test_health_off_attaches_nothing(tmp_path):
    monitor = TrainingMonitor()
    assert monitor.health_probe is None
    params = NNTrainParams(n_epochs=1, train_loader=_loader(), runs_root=str(tmp_path))
    _model().train(params, callbacks=[monitor])
    assert monitor.health == {}
    monitor.close()


def test_a_bad_health_value_is_refused():
    with pytest.raises(ValueError, match="health="):
        TrainingMonitor(health="yes")


def test_importing_the_widgets_does_not_import_torch():
    code = "import sys, nnx_lab.widgets; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
