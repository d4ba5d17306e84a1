"""The TrainingMonitor on a Trainer run (§3.2): each optimizer's learning rate is its
own step column, live and read back from the run's log alike."""

from __future__ import annotations

import math

import pytest
from trainer_factories import gan_model, gan_step, optims, trainer_params

from nnx_lab import NNSchedulerParams, Trainer
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend

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


def _sent_columns(fe, series):
    """The columns of ``series`` in the snapshot the view ``fe`` got last: what a page
    (a fresh one, or one reloaded) draws."""
    from nnx_lab.widgets._protocol import SNAPSHOT

    cols = {}
    for content, buffers in fe.custom_with_buffers():
        if content.get("kind") == SNAPSHOT and content.get("to") == fe.view:
            if content["part"] == 0:
                cols = {}
            cols.update(FakeFrontend.decode(content, buffers).get(series, {}))
    return cols


def test_a_race_lane_of_a_trainer_run_sends_each_optimizers_rate_again_after_a_reload(
    runs_root,
):
    """A race of Trainer runs (``compare``: a Trainer run is not a ``TrainJob``) holds each
    optimizer's rate in the run's lane series, and a reloaded page receives them again
    (js/monitor/race.js draws a line per optimizer from these columns)."""
    sched = {"G": NNSchedulerParams(patience=0, factor=0.5, threshold=1.0)}
    runs = {
        "slow D": Trainer(gan_model()).train(
            trainer_params(runs_root, schedulers=sched), trainer_step_fn=gan_step
        ),
        "fast D": Trainer(gan_model()).train(
            trainer_params(runs_root, optims=optims(d_lr=4e-3)), trainer_step_fn=gan_step
        ),
    }
    cmp = TrainingMonitor.compare({n: r.id for n, r in runs.items()}, runs_root=runs_root)
    try:
        fe = FakeFrontend(cmp)
        for _ in range(2):  # the page, then the same page reloaded
            fe.clear()
            fe.hello()
            slow, fast = _sent_columns(fe, "lane0.steps"), _sent_columns(fe, "lane1.steps")
            assert _plain(slow["lr.G"]) == [1e-3] * 4 + [5e-4] * 4  # halved after epoch 1
            assert _plain(slow["lr.D"]) == [2e-3] * 8
            assert _plain(fast["lr.D"]) == [4e-3] * 8
            assert _plain(slow["lr"]) == [None] * 8  # the Trainer logs no single lr
    finally:
        cmp.close()
