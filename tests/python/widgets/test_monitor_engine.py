"""TrainingMonitor with the real engine: blocking train, fit, Stop, failures, from_run."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from nnx_lab import (
    Devices,
    Losses,
    Nets,
    NNModel,
    NNModelParams,
    NNParams,
    NNRun,
    NNTrainParams,
)
from nnx_lab.engine.checkpoint import NNCheckpoint
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend


@pytest.fixture(autouse=True)
def _no_bar(monkeypatch):
    monkeypatch.setenv("NNX_TQDM_DISABLE", "1")


def _model():
    return NNModel(
        net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=[16]),
        params=NNModelParams(net=Nets.FEED_FWD, device=Devices.CPU, loss=Losses.CROSS_ENTROPY),
    )


def _loaders(n=256, batch=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    X, y = torch.randn(n, 8, generator=g), torch.randint(0, 3, (n,), generator=g)
    train = DataLoader(TensorDataset(X, y), batch_size=batch, shuffle=True)
    val = DataLoader(TensorDataset(X[:64], y[:64]), batch_size=32)
    return train, val


class _Slow:
    """A sink that slows each step down and remembers the last step it saw."""

    def __init__(self, delay):
        self.delay = delay
        self.step = 0

    def on_step_ended(self, event):
        self.step = event.step
        time.sleep(self.delay)


def test_blocking_train_updates_the_monitor(tmp_path):
    train, val = _loaders()
    monitor = TrainingMonitor()
    fe = FakeFrontend(monitor)
    params = NNTrainParams(
        n_epochs=3, train_loader=train, val_loader=val, runs_root=str(tmp_path), log_every=3
    )
    run = _model().train(params=params, callbacks=[monitor])
    assert monitor.run_id == run.id
    assert monitor.status == "finished" == run.status.value
    assert (monitor.epoch, monitor.n_epochs) == (3, 3)
    assert monitor.step == monitor.total_steps == 24
    assert monitor.loss_points == 24 == fe.rows_sent("steps")
    assert monitor.samples == 3 * 256
    rows = monitor.epoch_rows
    assert [r["epoch"] for r in rows] == [1, 2, 3]
    assert set(rows[0]["val"]) >= {"loss", "accuracy"}
    assert fe.state["status"] == "finished"
    assert len(fe.messages) < 60
    assert "status=finished" in repr(monitor)
    # the same run read back from its metrics.jsonl looks the same
    replay = TrainingMonitor.from_run(run.id, runs_root=tmp_path)
    assert replay.series() == monitor.series()
    assert replay.epoch_rows == rows
    assert replay.status == "finished"
    replay.close()
    monitor.close()


def test_stop_from_another_thread_stops_within_one_step(tmp_path):
    train, _ = _loaders(n=2048, batch=16)
    monitor = TrainingMonitor()
    fe = FakeFrontend(monitor)
    slow = _Slow(0.005)
    params = NNTrainParams(n_epochs=5, train_loader=train, runs_root=str(tmp_path), log_every=10)
    model = _model()
    monitor.fit(model, params, callbacks=[slow])
    deadline = time.monotonic() + 60
    while slow.step < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert monitor.status == "running"
    fe.click_stop()  # what the browser's Stop button sends; this is not the training thread
    seen = slow.step
    assert monitor.status in ("stopping", "stopped")
    run = monitor.wait(timeout=60)
    assert isinstance(run, NNRun)
    assert run.status.value == "stopped"
    assert monitor.status == "stopped"
    assert fe.state["status"] == "stopped"
    assert monitor.step <= seen + 1
    assert monitor.step < 5 * 128
    assert monitor.stop_reason == "stop requested from the monitor"
    assert NNRun.load(run.id, runs_root=tmp_path).status.value == "stopped"
    NNCheckpoint.load(run=run.id, type="last", runs_root=tmp_path)  # LAST was written
    monitor.close()


class _Exploding(Dataset):
    def __init__(self, n, bad_from):
        g = torch.Generator().manual_seed(0)
        self.X, self.y = torch.randn(n, 8, generator=g), torch.randint(0, 3, (n,), generator=g)
        self.bad_from = bad_from
        self.armed = False

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        if self.armed and i >= self.bad_from:
            raise ValueError(f"corrupt sample {i}")
        return self.X[i], self.y[i]


def test_an_exception_in_the_training_thread_reaches_the_widget(tmp_path):
    data = _Exploding(256, bad_from=100)
    train = DataLoader(data, batch_size=32, shuffle=False)
    monitor = TrainingMonitor()
    fe = FakeFrontend(monitor)
    model = _model()

    class Arm:  # break the data once training has started (the checks read it first)
        def on_run_started(self, event):
            data.armed = True

    params = NNTrainParams(
        n_epochs=2, train_loader=train, runs_root=str(tmp_path), data_id="exploding-v1"
    )
    monitor.fit(model, params, callbacks=[Arm()])
    with pytest.raises(ValueError, match="corrupt sample 100"):
        monitor.wait(timeout=60)
    assert monitor.status == "failed"
    assert "ValueError: corrupt sample 100" in monitor.error
    assert "Traceback" in monitor.error
    assert fe.state["error"] == monitor.error
    assert monitor.run is None
    run = NNRun.load(model.last_run.id, runs_root=tmp_path)
    assert run.status.value == "failed"
    monitor.close()


def test_from_run_follows_a_real_run_while_it_is_written(tmp_path):
    train, val = _loaders(n=512, batch=16, seed=1)
    writer = TrainingMonitor()
    slow = _Slow(0.003)
    model = _model()
    params = NNTrainParams(
        n_epochs=2, train_loader=train, val_loader=val, runs_root=str(tmp_path), log_every=5
    )
    writer.fit(model, params, callbacks=[slow])
    deadline = time.monotonic() + 60
    while not writer.run_id and time.monotonic() < deadline:
        time.sleep(0.01)
    follower = TrainingMonitor.from_run(writer.run_id[:8], runs_root=tmp_path, poll_interval=0.05)
    fe = FakeFrontend(follower)
    fe.hello()
    seen_running = follower.status == "running"
    run = writer.wait(timeout=120)
    follower.wait(timeout=30)
    assert seen_running
    assert follower.status == "finished"
    assert follower.series() == writer.series()
    assert follower.epoch_rows == writer.epoch_rows
    assert fe.length_after("steps") == 64 == follower.loss_points
    assert follower.run_id == run.id
    follower.close()
    writer.close()


def test_a_stop_before_the_loop_starts_is_kept(tmp_path):
    train, _ = _loaders(n=512, batch=16)
    monitor = TrainingMonitor()
    params = NNTrainParams(n_epochs=3, train_loader=train, runs_root=str(tmp_path))
    monitor.fit(_model(), params)
    threading.Thread(target=monitor.stop).start()
    run = monitor.wait(timeout=60)
    assert run.status.value == "stopped"
    assert monitor.status == "stopped"
    assert monitor.step < 3 * 32
    monitor.close()


def test_a_failure_before_the_run_starts_is_shown(tmp_path):
    train, _ = _loaders(n=64, batch=32)
    params = NNTrainParams(n_epochs=1, train_loader=train, runs_root=str(tmp_path))
    monitor = TrainingMonitor()
    monitor.fit(_model(), params)
    first = monitor.wait(timeout=60)
    monitor.fit(_model(), params)  # the same run again: its id exists already
    with pytest.raises(FileExistsError):
        monitor.wait(timeout=60)
    assert monitor.status == "failed"
    assert monitor.error.startswith("FileExistsError")
    assert first.id in monitor.error
    monitor.close()


class _StopAt:
    def __init__(self, step):
        self.at = step

    def on_attach(self, control):
        self.control = control

    def on_step_ended(self, event):
        if event.step == self.at:
            self.control.request_stop("mid-epoch")


def test_a_run_resumed_mid_epoch_expects_the_right_total(tmp_path):
    train, val = _loaders()  # 8 steps an epoch
    params = NNTrainParams(
        n_epochs=4, seed=1, train_loader=train, val_loader=val, runs_root=tmp_path
    )
    stopped = _model().train(params, callbacks=[_StopAt(11)])  # in epoch 2, 3 steps done
    assert stopped.status.value == "stopped"
    monitor = TrainingMonitor()
    FakeFrontend(monitor)
    child = params.replace(resume_from_run_id=stopped.id, resume_epochs="additional", n_epochs=2)
    resumed = _model().train(child, callbacks=[monitor])
    # epochs 2 (its last 5 steps) and 3: it ends at step 24, not 11 + 2 x 8 = 27
    assert resumed.idps[-1].iteration == 24
    assert monitor.total_steps == 24
    assert monitor.n_epochs == 3
