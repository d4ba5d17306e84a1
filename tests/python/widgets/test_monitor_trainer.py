"""The TrainingMonitor on a Trainer run (§3.2): each optimizer's learning rate is its
own step column, live and read back from the run's log alike."""

from __future__ import annotations

import math

import pytest
from trainer_factories import gan_model, gan_step, trainer_params

from nnx_lab import NNSchedulerParams, Trainer
from nnx_lab.widgets import TrainingMonitor

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _plain(col):
    return [None if math.isnan(v) else pytest.approx(v, rel=1e-6) for v in col]


def test_each_optimizers_rate_is_its_own_column_live_and_replayed(runs_root):
    sched = {"G": NNSchedulerParams(patience=0, factor=0.5, threshold=1.0)}
    live = TrainingMonitor()
    run = Trainer(gan_model()).train(
        trainer_params(runs_root, n_epochs=2, schedulers=sched),
        trainer_step_fn=gan_step,
        callbacks=[live],
    )
    replay = TrainingMonitor.from_run(run.id, runs_root=runs_root)
    try:
        s = live.series()
        assert s["step"] == [2, 4, 6, 8, 10, 12, 14, 16]
        assert _plain(s["lr.G"]) == [1e-3] * 4 + [5e-4] * 4  # halved after epoch 1
        assert _plain(s["lr.D"]) == [2e-3] * 8
        assert _plain(replay.series()["lr.G"]) == _plain(s["lr.G"])
        assert _plain(replay.series()["lr.D"]) == _plain(s["lr.D"])
    finally:
        live.close()
        replay.close()
