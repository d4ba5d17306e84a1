"""Bounded memory on long runs (the "Hardening" issue): a monitor fed 2,000,000 steps
and 200,000 epochs holds at most its documented rows, and its memory stops growing.

docs/widgets.md ("Memory") documents the bound this test holds the monitor to:
``max_points`` step rows of 32 bytes and ``max_epochs`` epoch rows of
36 + 12 x (metrics) bytes, allocated once; 5.3 MB with the defaults and 4 metrics.
"""

from __future__ import annotations

import gc
import json
import tracemalloc

import pytest

from nnx_lab.engine.events import EpochEnded, RunStarted, StepMetrics, StepRecord
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend

MB = 1024 * 1024
STEPS = 2_000_000
EPOCHS = 200_000
STEPS_PER_EPOCH = STEPS // EPOCHS


def documented_bound(max_points: int, max_epochs: int, metrics: int) -> int:
    """The bound docs/widgets.md states, in bytes."""
    return max_points * 32 + max_epochs * (36 + 12 * metrics)


def events(epoch_from: int, epoch_to: int):
    """Epochs of 10 steps, logged in one batch each, with two train and two val metrics."""
    for epoch in range(epoch_from, epoch_to):
        first = (epoch - 1) * STEPS_PER_EPOCH + 1
        records = tuple(
            StepRecord(step=s, epoch=epoch, batch=s - first, lr=1e-3, samples=32, loss=1.0 / s)
            for s in range(first, first + STEPS_PER_EPOCH)
        )
        yield StepMetrics(records=records)
        yield EpochEnded(
            epoch=epoch,
            step=first + STEPS_PER_EPOCH - 1,
            lr=1e-3,
            train={"loss": 1.0 / epoch, "accuracy": 0.5, "samples": 320},
            val={"loss": 2.0 / epoch, "accuracy": 0.6},
            signal=2.0 / epoch,
            signal_source="val_edp.loss",
            improved=epoch % 7 == 0,
            seconds=0.01,
        )


def feed_range(monitor, a, b):
    for event in events(a, b):
        getattr(monitor, event.hook)(event)


@pytest.mark.timeout(900)
def test_a_long_run_keeps_the_monitor_within_its_documented_bound():
    monitor = TrainingMonitor()
    fe = FakeFrontend(monitor)  # a view is open: the messages are built (and dropped)
    monitor._transport.timer_factory = None
    monitor.on_run_started(
        RunStarted(
            run_id="ef" * 16,
            run_dir="runs/x",
            n_epochs=EPOCHS,
            start_epoch=1,
            start_step=0,
            steps_per_epoch=STEPS_PER_EPOCH,
            time=0.0,
        )
    )
    # 90% of the run untraced (tracing slows Python down several times over)...
    traced_from = EPOCHS - EPOCHS // 10 + 1
    feed_range(monitor, 1, traced_from)
    fe.clear()
    monitor._transport.flush()
    gc.collect()
    # ...and the last 200,000 steps and 20,000 epochs traced: a monitor that keeps
    # every point (2.2 KB per step and epoch, as before) would grow by some 44 MB here
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        feed_range(monitor, traced_from, EPOCHS + 1)
        monitor._transport.flush()
        fe.clear()
        gc.collect()
        after, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert monitor.steps_seen == STEPS
    assert monitor._epochs.total == EPOCHS
    assert monitor.loss_points <= 100_000
    assert len(monitor._epochs) <= 20_000
    bound = documented_bound(100_000, 20_000, metrics=4)
    assert monitor._steps.nbytes() + monitor._epochs.nbytes() <= bound
    assert after - before <= 0.25 * MB, (after - before) / MB  # a plateau
    assert peak - before <= 8 * MB, (peak - before) / MB  # working memory stays small
    # the history's extremes survive the decimation: min and max are kept per bucket
    series = monitor.series()
    assert max(series["loss:max"]) == pytest.approx(1.0)
    assert min(series["loss:min"]) == pytest.approx(1 / STEPS)
    monitor.close()


def _big_log(run_dir, megabytes: int) -> int:
    """A finished run's log of about ``megabytes`` MB: step lines padded with a field
    the log's shape does not know (ignored), so the replay is bytes, not steps."""
    run_dir.mkdir(parents=True)
    started = {
        "event": "run_started",
        "run_id": run_dir.name,
        "run_dir": str(run_dir),
        "n_epochs": 1,
        "start_epoch": 1,
        "start_step": 0,
        "steps_per_epoch": None,
        "config": {},
        "time": 1796000000.0,
    }
    pad = "x" * 4000
    steps = (megabytes << 20) // 4100
    with (run_dir / "metrics.jsonl").open("w") as fh:
        fh.write(json.dumps(started) + "\n")
        for s in range(1, steps + 1):
            line = {"event": "step", "step": s, "epoch": 1, "batch": s - 1, "lr": 1e-3}
            fh.write(json.dumps({**line, "samples": 32, "loss": 1.0 / s, "pad": pad}) + "\n")
        fh.write(
            json.dumps(
                {
                    "event": "run_finished",
                    "run_id": run_dir.name,
                    "status": "finished",
                    "epochs_completed": 1,
                    "steps": steps,
                    "time": 1796000100.0,
                }
            )
            + "\n"
        )
    return steps


def _replay_peak(root, run_id) -> tuple[int, int]:
    gc.collect()
    tracemalloc.start()
    try:
        monitor = TrainingMonitor.from_run(run_id, runs_root=root, follow=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    steps = monitor.steps_seen
    monitor.close()
    return peak, steps


def test_from_run_reads_a_log_in_memory_bounded_whatever_its_size(tmp_path):
    """The issue: from_run on a 200 MB log took 400 MB at once. The log is read as a
    stream: a log four times larger costs the same peak, and far less than the file."""
    root = tmp_path / "runs"
    small, big = "1" * 32, "2" * 32
    small_steps = _big_log(root / small, 6)
    big_steps = _big_log(root / big, 24)
    peak_small, seen_small = _replay_peak(root, small)
    peak_big, seen_big = _replay_peak(root, big)
    assert (seen_small, seen_big) == (small_steps, big_steps)
    assert peak_big < 12 * MB, peak_big / MB  # the 24 MB log is never held
    assert peak_big - peak_small < 2 * MB, (peak_small / MB, peak_big / MB)
