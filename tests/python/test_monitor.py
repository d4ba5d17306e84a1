"""TrainingMonitor driven by scripted event sequences (no torch, no browser)."""

from __future__ import annotations

import json
import math
import threading
import time

import pytest

from nnx_lab.engine.events import RunStarted, StepEnded, StepMetrics, StepRecord, TrainingControl
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets import _monitor as monitor_module
from nnx_lab.widgets._testing import FakeFrontend, feed, scripted_run


@pytest.fixture
def monitor():
    m = TrainingMonitor()
    yield m
    m.close()


def test_state_after_a_scripted_run(monitor):
    fe = FakeFrontend(monitor)
    feed(monitor, scripted_run(run_id="abc", n_epochs=3, steps_per_epoch=10, batch_size=32))
    assert monitor.run_id == "abc"
    assert monitor.status == "finished"
    assert (monitor.epoch, monitor.n_epochs) == (3, 3)
    assert (monitor.step, monitor.total_steps) == (30, 30)
    assert monitor.samples == 960
    assert monitor.loss_points == 30
    assert monitor.elapsed == pytest.approx(0.3)  # RunFinished.time - RunStarted.time
    assert monitor.samples_per_sec == pytest.approx(960 / 0.3)
    assert monitor.eta is None
    assert monitor.error == ""
    series = monitor.series()
    assert series["step"] == list(range(1, 31))
    assert series["loss"] == pytest.approx([1 / s for s in range(1, 31)], rel=1e-6)
    assert series["lr"][0] == pytest.approx(0.01)
    assert series["lr"][-1] == pytest.approx(0.0025)
    rows = monitor.epoch_rows
    assert [r["epoch"] for r in rows] == [1, 2, 3]
    assert rows[0]["val"] == {"loss": 0.5, "accuracy": pytest.approx(0.6)}
    # what a view holds equals what the kernel holds
    assert fe.columns["step"] == series["step"]
    assert fe.columns["loss"] == pytest.approx(series["loss"])
    assert fe.epochs == rows
    assert fe.state["status"] == "finished"


def test_text_fallback(monitor):
    assert repr(monitor) == "TrainingMonitor(run=-, status=created, step 0)"
    feed(monitor, scripted_run(run_id="r1", n_epochs=2, steps_per_epoch=5))
    text = repr(monitor)
    assert text == "TrainingMonitor(run=r1, status=finished, epoch 2/2, step 10/10, loss 0.1)"
    bundle = monitor._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert data["text/plain"] == text
    assert "application/vnd.jupyter.widget-view+json" in data

    class Printer:
        def __init__(self):
            self.out = ""

        def text(self, s):
            self.out += s

    p = Printer()
    monitor._repr_pretty_(p, False)
    assert p.out == text


def test_coalescing_sends_few_messages_and_an_exact_last_state(monitor):
    fe = FakeFrontend(monitor)
    n = 10_000
    events = scripted_run(run_id="big", n_epochs=1, steps_per_epoch=n, log_every=1)
    assert sum(isinstance(e, StepMetrics) for e in events) == n
    assert sum(isinstance(e, StepEnded) for e in events) == n
    fe.clear()
    t0 = time.monotonic()
    feed(monitor, events)
    seconds = time.monotonic() - t0
    # at most ~10 flushes a second (2 messages each) plus the forced ones at epoch/run end
    limit = 2 * (seconds / monitor.update_interval + 1) + 10
    assert len(fe.messages) <= max(40, limit), (len(fe.messages), seconds)
    assert fe.points == n
    assert fe.columns["step"][-1] == n
    assert fe.columns["loss"][-1] == pytest.approx(1 / n)
    assert fe.state["step"] == n
    assert fe.state["status"] == "finished"
    assert monitor.samples == 32 * n


def test_coalescing_with_a_controlled_clock(monitor):
    """1 ms per step for 10,000 steps = 10 s: at most ~100 series messages."""
    fe = FakeFrontend(monitor)
    now = [0.0]
    monitor._clock = lambda: now[0]
    events = scripted_run(n_epochs=1, steps_per_epoch=10_000, log_every=10)
    fe.clear()
    for event in events:
        if isinstance(event, StepEnded):
            now[0] += 0.001
        getattr(monitor, event.hook, lambda e: None)(event)
    appends = [c for c in fe.custom if c["kind"] == "append"]
    assert 90 <= len(appends) <= 102
    assert len(fe.updates) <= 2 * len(appends) + 5
    assert sum(c["count"] for c in appends) == 10_000
    assert fe.points == 10_000


def test_hello_sends_the_whole_history_once(monitor, monkeypatch):
    fe = FakeFrontend(monitor)
    feed(monitor, scripted_run(n_epochs=2, steps_per_epoch=50))
    fe.clear()
    fe.hello()
    assert [c["kind"] for c in fe.custom] == ["reset"]
    assert fe.custom[0]["count"] == 100
    assert len(fe.custom[0]["epochs"]) == 2
    assert fe.points == 100
    # a long history goes as a reset and appends of bounded size
    monkeypatch.setattr(monitor_module, "MAX_POINTS_PER_MESSAGE", 30)
    fe.clear()
    fe.hello()
    assert [(c["kind"], c["start"], c["count"]) for c in fe.custom] == [
        ("reset", 0, 30),
        ("append", 30, 30),
        ("append", 60, 30),
        ("append", 90, 10),
    ]
    assert fe.points == 100
    assert len(fe.epochs) == 2


def test_hello_during_a_run_then_appends_do_not_duplicate(monitor):
    fe = FakeFrontend(monitor)
    events = scripted_run(n_epochs=1, steps_per_epoch=40, log_every=5)
    monitor.update_interval = 10.0  # nothing goes out by time in this test
    half = len(events) // 2
    feed(monitor, events[:half])
    fe.hello()  # page reload mid-run
    held = fe.points
    assert held == monitor.loss_points > 0
    feed(monitor, events[half:])
    assert fe.points == 40
    assert fe.columns["step"] == list(range(1, 41))


def test_a_second_run_resets_the_view(monitor):
    fe = FakeFrontend(monitor)
    feed(monitor, scripted_run(run_id="first", n_epochs=1, steps_per_epoch=20))
    feed(monitor, scripted_run(run_id="second", n_epochs=1, steps_per_epoch=7))
    assert monitor.run_id == "second"
    assert monitor.loss_points == 7
    assert fe.points == 7
    assert len(fe.epochs) == 1


def test_unknown_steps_per_epoch_learned_after_the_first_epoch(monitor):
    events = scripted_run(n_epochs=3, steps_per_epoch=4)
    first = events[0]
    events[0] = RunStarted(
        run_id=first.run_id,
        run_dir=first.run_dir,
        n_epochs=3,
        start_epoch=1,
        start_step=0,
        steps_per_epoch=None,
        time=first.time,
    )
    feed(monitor, events[:5])  # four steps, no epoch end yet
    assert monitor.total_steps is None
    feed(monitor, events[5:])
    assert monitor.total_steps == 12


def test_rates_and_eta_while_running(monitor):
    now = [100.0]
    monitor._clock = lambda: now[0]
    events = scripted_run(n_epochs=2, steps_per_epoch=100, batch_size=10, log_every=10)
    for event in events:
        if isinstance(event, StepEnded):
            now[0] += 0.01  # 100 steps/s, 1,000 samples/s
            if event.step == 150:
                break
        getattr(monitor, event.hook, lambda e: None)(event)
    monitor._flush()
    assert monitor.status == "running"
    assert monitor.samples_per_sec == pytest.approx(1000, rel=0.05)
    assert monitor.eta == pytest.approx((200 - 149) / 100, rel=0.1)
    assert monitor.elapsed == pytest.approx(1.49, abs=0.02)


def test_non_finite_values_never_reach_json(monitor):
    fe = FakeFrontend(monitor)
    events = scripted_run(n_epochs=1, steps_per_epoch=3)
    nan_record = StepRecord(step=4, epoch=1, batch=3, lr=0.01, samples=1, loss=math.nan)
    events.insert(-3, StepMetrics(records=(nan_record,)))
    feed(monitor, events)
    assert math.isnan(fe.columns["loss"][-1])
    # every message encodes as strict JSON (FakeFrontend uses allow_nan=False)
    for msg, _ in fe.messages:
        json.dumps(msg, allow_nan=False)


def test_stop_requests_the_control_and_shows_stopping(monitor):
    fe = FakeFrontend(monitor)
    control = TrainingControl()
    monitor.on_attach(control)
    events = scripted_run(n_epochs=1, steps_per_epoch=10, stop_after=4, status="stopped")
    feed(monitor, events[:3])
    # attached from the main thread (a blocking train): a click could not arrive in time
    assert monitor.can_stop is False
    fe.click_stop()  # but a stop that does arrive still works
    assert control.stop_requested
    assert control.stop_reason == "stop requested from the monitor"
    assert monitor.status == "stopping"
    feed(monitor, events[3:])
    monitor.on_detach()
    assert monitor.status == "stopped"
    assert monitor.stop_reason == "stop requested"
    assert monitor.can_stop is False
    assert fe.state["status"] == "stopped"
    monitor.stop()  # after the end: nothing to do, no error
    assert monitor.status == "stopped"


def test_stop_is_offered_when_the_loop_runs_in_another_thread(monitor):
    worker = threading.Thread(target=monitor.on_attach, args=(TrainingControl(),))
    worker.start()
    worker.join()
    assert monitor.can_stop is True
    feed(monitor, scripted_run(n_epochs=1, steps_per_epoch=2)[:1])
    assert monitor.can_stop is True
    assert monitor.status == "running"


def test_stop_without_a_run_is_a_no_op(monitor):
    monitor.stop()
    assert monitor.status == "created"


def test_failed_run_shows_error_with_traceback(monitor):
    fe = FakeFrontend(monitor)
    feed(monitor, scripted_run(n_epochs=2, steps_per_epoch=3, stop_after=4, status="failed"))
    assert monitor.status == "failed"
    assert monitor.error.startswith("RuntimeError: boom")
    assert "Traceback" in monitor.error
    assert fe.state["error"] == monitor.error
    assert "RuntimeError: boom" in repr(monitor)


def test_a_failing_frontend_handler_is_shown_under_the_widget(monitor, monkeypatch):
    fe = FakeFrontend(monitor)

    def broken(content, buffers):
        raise ValueError("bad hello")

    monkeypatch.setattr(monitor, "_on_hello", broken)
    fe.hello()
    assert monitor.error.startswith("ValueError: bad hello")
    assert "Traceback" in monitor.error
    # an unknown kind is ignored (logged), not an error
    monitor.error = ""
    monitor._dispatch_frontend_msg(monitor, {"kind": "nonsense"}, [])
    assert monitor.error == ""


def test_a_broken_monitor_never_fails_the_run(monitor, monkeypatch):
    def broken(records):
        raise OSError("disk on fire")

    monkeypatch.setattr(monitor._series, "extend", broken)
    feed(monitor, scripted_run(n_epochs=1, steps_per_epoch=5))  # raises nothing
    assert monitor.error.startswith("OSError: disk on fire")
    assert monitor.status == "finished"


def test_update_interval_is_validated():
    with pytest.raises(ValueError, match="update_interval"):
        TrainingMonitor(update_interval=0)
    with pytest.raises(TypeError):
        TrainingMonitor(update_intervall=0.1)  # type: ignore[call-arg]


class _ScriptedModel:
    """Stands in for NNModel: train() feeds scripted events to its callbacks."""

    def __init__(self, events, *, fail_at=None, step_delay=0.0):
        self.events = events
        self.fail_at = fail_at
        self.step_delay = step_delay
        self.seen_callbacks = None

    def train(self, params, callbacks=()):
        self.seen_callbacks = list(callbacks)
        control = TrainingControl()
        for cb in callbacks:
            if hasattr(cb, "on_attach"):
                cb.on_attach(control)
        try:
            for event in self.events:
                if isinstance(event, StepEnded):
                    if self.fail_at is not None and event.step == self.fail_at:
                        raise RuntimeError(f"exploded at step {event.step}")
                    if control.stop_requested:
                        return "stopped-run"
                    time.sleep(self.step_delay)
                for cb in callbacks:
                    hook = getattr(cb, event.hook, None)
                    if hook is not None:
                        hook(event)
            return f"run:{params}"
        finally:
            for cb in callbacks:
                if hasattr(cb, "on_detach"):
                    cb.on_detach()


def test_fit_runs_in_a_thread_and_wait_returns_the_run(monitor):
    model = _ScriptedModel(scripted_run(n_epochs=2, steps_per_epoch=5), step_delay=0.001)
    extra = object.__new__(type("Sink", (), {"on_run_started": lambda self, e: None}))
    assert monitor.fit(model, "P", callbacks=[extra]) is monitor
    assert monitor.wait(timeout=30) == "run:P"
    assert monitor.run == "run:P"
    assert model.seen_callbacks == [monitor, extra]
    assert monitor.status == "finished"


def test_fit_refuses_a_second_concurrent_run(monitor):
    model = _ScriptedModel(scripted_run(n_epochs=1, steps_per_epoch=200), step_delay=0.005)
    monitor.fit(model, "P")
    with pytest.raises(RuntimeError, match="already training"):
        monitor.fit(model, "P")
    monitor.stop()
    monitor.wait(timeout=30)


def test_stop_from_another_thread_right_after_fit(monitor):
    model = _ScriptedModel(scripted_run(n_epochs=1, steps_per_epoch=10_000), step_delay=0.001)
    monitor.fit(model, "P")
    stopper = threading.Thread(target=monitor.stop)
    stopper.start()  # may run before the loop attached: the stop is kept for it
    stopper.join()
    assert monitor.wait(timeout=30) == "stopped-run"
    assert monitor.loss_points < 10_000


def test_an_exception_in_the_training_thread_reaches_the_widget(monitor):
    fe = FakeFrontend(monitor)
    model = _ScriptedModel(scripted_run(n_epochs=1, steps_per_epoch=10), fail_at=5)
    monitor.fit(model, "P")
    with pytest.raises(RuntimeError, match="exploded at step 5"):
        monitor.wait(timeout=30)
    assert monitor.status == "failed"
    assert monitor.error.startswith("RuntimeError: exploded at step 5")
    assert "Traceback (most recent call last)" in monitor.error
    assert fe.state["error"] == monitor.error
    assert monitor.run is None


def test_wait_times_out_while_training(monitor):
    model = _ScriptedModel(scripted_run(n_epochs=1, steps_per_epoch=10_000), step_delay=0.001)
    monitor.fit(model, "P")
    with pytest.raises(TimeoutError, match="still running"):
        monitor.wait(timeout=0.05)
    monitor.stop()
    monitor.wait(timeout=30)


def test_wait_without_fit_returns_none(monitor):
    assert monitor.wait() is None
    assert monitor.run is None
