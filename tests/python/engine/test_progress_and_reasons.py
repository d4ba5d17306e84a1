"""What a run says when it ends early and complete: the progress bar is a success, not
an error, and the reason names the monitored value in words (issue 21 §11)."""

from __future__ import annotations

import pytest
import tqdm.auto
import tqdm.notebook

from nnx_lab import TrainingControl
from nnx_lab.engine.handlers import EarlyStopping, ProgressBar
from nnx_lab.engine.monitor_names import monitor_label
from nnx_lab.engine.selection import MonitorSpec
from nnx_lab.runs import EpochEnded, RunFinished, RunStarted, StepEnded


# -- the bar -------------------------------------------------------------------------------
@pytest.fixture
def notebook_bars(monkeypatch):
    """ProgressBar draws tqdm.notebook bars (what a notebook shows); the bars made."""
    made = []

    class Recorded(tqdm.notebook.tqdm):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(tqdm.auto, "tqdm", Recorded)
    return made


def _run(bar: ProgressBar, steps: int, status: str, reason: str | None = None) -> None:
    bar.on_run_started(RunStarted("abcdef1234", None, 4, 1, 0, steps_per_epoch=10))
    for s in range(1, steps + 1):
        bar.on_step_ended(
            StepEnded(step=s, epoch=1 + (s - 1) // 10, batch=(s - 1) % 10, samples=10)
        )
    bar.on_run_finished(RunFinished("abcdef1234", status, steps // 10, steps, stop_reason=reason))


def test_an_early_stopped_run_closes_its_bar_as_a_success(notebook_bars):
    _run(ProgressBar(), 30, "finished", "early stopping: no improvement of validation error")
    (bar,) = notebook_bars
    _, widget, _ = bar.container.children
    assert widget.bar_style == "success"  # not "danger": stopping early is a success
    assert widget.value == widget.max == 30 == bar.total
    assert "early stopping" in bar.postfix


def test_a_stopped_or_failed_run_still_shows_where_it_ended(notebook_bars):
    _run(ProgressBar(), 30, "stopped", "stopped from the monitor")
    _run(ProgressBar(), 12, "failed")
    for bar in notebook_bars:
        _, widget, _ = bar.container.children
        assert widget.bar_style == "danger"
        assert bar.total == widget.max == 40  # the planned steps, short of the end


def test_a_complete_run_is_a_success_as_before(notebook_bars):
    _run(ProgressBar(), 40, "finished")
    _, widget, _ = notebook_bars[0].container.children
    assert widget.bar_style == "success"
    assert widget.max == 40


# -- the words -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("val_edp.error", "validation error"),
        ("val_edp.loss", "validation loss"),
        ("train_edp.loss", "training loss"),
        ("val_edp.metrics.mae", "validation MAE"),
        ("val_edp.metrics.nll", "validation NLL"),
        ("val_edp.metrics.ece(bins=10)", "validation ECE (bins=10)"),
        ("val_edp.metrics.f1_weighted", "validation weighted F1"),
        ("train_edp.metrics.my_score", "training my score"),
        (None, "validation error"),
        ("something else", "something else"),
    ],
)
def test_monitor_label_says_the_value_in_words(source, words):
    assert monitor_label(source) == words


def _epoch(n: int, val: dict) -> EpochEnded:
    return EpochEnded(
        epoch=n,
        step=n * 10,
        lr=0.01,
        train={},
        val=val,
        signal=None,
        signal_source=None,
        improved=False,
        seconds=0.1,
    )


@pytest.mark.parametrize(
    ("monitor", "val", "words"),
    [
        (None, lambda v: {"error": v, "loss": 1.0}, "validation error"),
        (MonitorSpec("mae"), lambda v: {"loss": 1.0, "metrics": {"mae": v}}, "validation MAE"),
    ],
)
def test_the_early_stopping_reason_names_the_value_in_words(monitor, val, words):
    stopper = EarlyStopping(patience=2, monitor=monitor)
    control = TrainingControl()
    stopper.on_attach(control)
    for n, v in enumerate([0.5, 0.6, 0.7], start=1):
        stopper.on_epoch_ended(_epoch(n, val(v)))
    assert control.stop_reason == f"early stopping: no improvement of {words} for 2 epochs"
    assert "_edp" not in control.stop_reason
