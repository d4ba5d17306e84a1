"""TrainingMonitor driven by scripted event sequences (no torch, no browser).

These tests check what the kernel side holds and what it sends. What a view holds
after those messages is tested on the real JavaScript (tests/js, and
test_widget_contract.py, which replays these messages through it).
"""

from __future__ import annotations

import json
import math
import threading
import time

import pytest

from nnx_lab.engine.events import RunStarted, StepEnded, StepMetrics, StepRecord, TrainingControl
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend, feed, scripted_run

RUN = "ab" * 16
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


@pytest.fixture
def monitor():
    m = TrainingMonitor()
    yield m
    m.close()


def no_timer(m: TrainingMonitor) -> TrainingMonitor:
    """Flushes happen only when the test's clock says so."""
    m._transport.timer_factory = None
    return m


def test_state_after_a_scripted_run(monitor):
    fe = FakeFrontend(monitor)
    feed(monitor, scripted_run(run_id=RUN, n_epochs=3, steps_per_epoch=10, batch_size=32))
    assert monitor.run_id == RUN
    assert monitor.status == "finished"
    assert (monitor.epoch, monitor.n_epochs) == (3, 3)
    assert (monitor.step, monitor.total_steps) == (30, 30)
    assert monitor.samples == 960
    assert monitor.loss_points == monitor.steps_seen == 30
    assert monitor.elapsed == pytest.approx(0.3)  # RunFinished.time - RunStarted.time
    assert monitor.samples_per_sec == pytest.approx(960 / 0.3)
    assert monitor.eta is None
    assert monitor.error == ""
    assert monitor.last_loss == pytest.approx(1 / 30)
    assert monitor.loss_nonfinite_since is None
    series = monitor.series()
    assert series["step"] == list(range(1, 31))
    assert series["loss"] == pytest.approx([1 / s for s in range(1, 31)], rel=1e-6)
    assert series["lr"][0] == pytest.approx(0.01)
    assert series["lr"][-1] == pytest.approx(0.0025)
    assert series["n"] == [1] * 30
    rows = monitor.epoch_rows
    assert [r["epoch"] for r in rows] == [1, 2, 3]
    assert rows[0]["val"] == {"loss": 0.5, "accuracy": pytest.approx(0.6)}
    assert rows[2]["train"] == {"loss": pytest.approx(1 / 30), "accuracy": 0.5}
    assert "samples" not in rows[0]["train"]  # counts are not metrics
    # everything the kernel holds went out to the views
    assert fe.rows_sent("steps") == 30
    assert fe.rows_sent("epochs") == 3
    assert fe.state["status"] == "finished"


def test_text_fallback(monitor):
    assert repr(monitor) == "TrainingMonitor(run=-, status=created, step 0)"
    feed(monitor, scripted_run(run_id=RUN, n_epochs=2, steps_per_epoch=5))
    text = repr(monitor)
    assert text == f"TrainingMonitor(run={RUN}, status=finished, epoch 2/2, step 10/10, loss 0.1)"
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
    events = scripted_run(run_id=RUN, n_epochs=1, steps_per_epoch=n, log_every=1)
    assert sum(isinstance(e, StepMetrics) for e in events) == n
    fe.clear()
    t0 = time.monotonic()
    feed(monitor, events)
    seconds = time.monotonic() - t0
    # at most ~10 flushes a second (2 messages each) plus the forced ones at the end
    limit = 2 * (seconds / monitor.update_interval + 1) + 10
    assert len(fe.messages) <= max(40, limit), (len(fe.messages), seconds)
    assert fe.rows_sent("steps") == n
    assert fe.state["step"] == n
    assert fe.state["status"] == "finished"
    assert monitor.samples == 32 * n


def test_coalescing_with_a_controlled_clock(monitor):
    """1 ms per step for 10,000 steps = 10 s: about 100 updates, whatever the step rate."""
    fe = FakeFrontend(no_timer(monitor))
    now = [0.0]
    monitor._clock = lambda: now[0]
    events = scripted_run(n_epochs=1, steps_per_epoch=10_000, log_every=10)
    fe.clear()
    for event in events:
        if isinstance(event, StepEnded):
            now[0] += 0.001
        getattr(monitor, event.hook, lambda e: None)(event)
    updates = [c for c in fe.custom if c["kind"] == "update"]
    assert 90 <= len(updates) <= 102
    assert [c["seq"] for c in updates] == list(range(1, len(updates) + 1))
    assert len(fe.updates) <= 2 * len(updates) + 5
    assert fe.rows_sent("steps") == 10_000


def test_an_epoch_end_does_not_force_a_message(monitor):
    """A 20,000-epoch run of tiny epochs must not send 20,000 messages."""
    fe = FakeFrontend(no_timer(monitor))
    now = [0.0]
    monitor._clock = lambda: now[0]
    events = scripted_run(n_epochs=2_000, steps_per_epoch=1, log_every=1)
    for event in events:
        now[0] += 0.0001  # 2,000 epochs in under a second
        getattr(monitor, event.hook, lambda e: None)(event)
    updates = [c for c in fe.custom if c["kind"] == "update"]
    assert len(updates) <= 12
    assert fe.rows_sent("epochs") == 2_000


def test_hello_gets_a_snapshot_addressed_to_that_view(monitor):
    fe = FakeFrontend(monitor)
    feed(monitor, scripted_run(n_epochs=2, steps_per_epoch=50))
    fe.clear()
    fe.hello()
    (snap,) = fe.custom
    assert snap["kind"] == "snapshot"
    assert (snap["to"], snap["req"], snap["part"], snap["parts"]) == (fe.view, 1, 0, 1)
    assert snap["seq"] == monitor._transport.seq
    ops = {op["series"]: op for op in snap["ops"]}
    assert (ops["steps"]["at"], ops["steps"]["count"]) == (0, 100)
    assert (ops["epochs"]["at"], ops["epochs"]["count"]) == (0, 2)
    cols = FakeFrontend.decode(*fe.custom_with_buffers()[0])
    assert cols["steps"]["step"].tolist() == list(range(1, 101))
    assert cols["epochs"]["val.loss"].tolist() == pytest.approx([0.5, 1 / 3])


def test_a_hello_without_a_view_id_is_shown_as_an_error(monitor):
    monitor._dispatch_frontend_msg(monitor, {"kind": "hello", "version": 2}, [])
    assert monitor.error.startswith("ValueError: a hello without a view id")


def test_a_long_history_goes_out_in_messages_of_bounded_size(monitor):
    """The issue's case: reloading a 20,000-epoch run sent one 8.6 MB message."""
    fe = FakeFrontend(monitor)
    feed(monitor, scripted_run(n_epochs=20_000, steps_per_epoch=5, log_every=5))
    fe.clear()
    fe.hello()
    snaps = fe.custom_with_buffers()
    assert len(snaps) > 1
    assert all(c["kind"] == "snapshot" for c, _ in snaps)
    assert [c["part"] for c, _ in snaps] == list(range(len(snaps)))
    for _, buffers in snaps:
        assert sum(len(b) for b in buffers) <= monitor._transport.max_message_bytes
    assert sum(op["count"] for c, _ in snaps for op in c["ops"] if op["series"] == "epochs") == (
        monitor._epochs.length
    )


def test_a_second_run_clears_the_views(monitor):
    fe = FakeFrontend(monitor)
    feed(monitor, scripted_run(run_id="1" * 32, n_epochs=1, steps_per_epoch=20))
    fe.clear()
    feed(monitor, scripted_run(run_id="2" * 32, n_epochs=1, steps_per_epoch=7))
    assert monitor.run_id == "2" * 32
    assert monitor.loss_points == 7
    first = fe.custom[0]
    assert {(o["series"], o["at"], o["count"]) for o in first["ops"]} == {
        ("steps", 0, 0),
        ("epochs", 0, 0),
    }


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
    no_timer(monitor)
    now = [100.0]
    monitor._clock = lambda: now[0]
    events = scripted_run(n_epochs=2, steps_per_epoch=100, batch_size=10, log_every=10)
    for event in events:
        if isinstance(event, StepEnded):
            now[0] += 0.01  # 100 steps/s, 1,000 samples/s
            if event.step == 150:
                break
        getattr(monitor, event.hook, lambda e: None)(event)
    monitor._transport.flush()
    assert monitor.status == "running"
    assert monitor.samples_per_sec == pytest.approx(1000, rel=0.05)
    assert monitor.eta == pytest.approx((200 - 149) / 100, rel=0.1)
    assert monitor.elapsed == pytest.approx(1.49, abs=0.02)


def test_a_loss_that_turns_non_finite_is_reported_not_hidden(monitor):
    fe = FakeFrontend(monitor)
    feed(monitor, scripted_run(run_id=RUN, n_epochs=3, steps_per_epoch=10, nonfinite_from=14))
    assert monitor.status == "finished"  # what the run recorded; the monitor does not judge
    assert monitor.loss_nonfinite_since == 14
    assert monitor.loss_nonfinite_steps == 17
    assert monitor.last_loss is None
    assert (monitor.last_finite_step, monitor.last_finite_loss) == (13, pytest.approx(1 / 13))
    assert "loss non-finite since step 14" in repr(monitor)
    loss = monitor.series()["loss"]
    assert all(math.isnan(v) for v in loss[13:])
    assert monitor.series()["bad"][13:] == [1] * 17
    assert fe.state["loss_nonfinite_since"] == 14
    # non-finite values travel as NaN in the buffers; every JSON part stays strict JSON
    for msg, _ in fe.messages:
        json.dumps(msg, allow_nan=False)


def test_a_loss_that_recovers_clears_the_since_but_keeps_the_count(monitor):
    events = scripted_run(n_epochs=1, steps_per_epoch=10, log_every=1)
    for i, e in enumerate(events):
        if isinstance(e, StepMetrics) and e.records[0].step in (4, 5):
            r = e.records[0]
            events[i] = StepMetrics(
                records=(StepRecord(r.step, r.epoch, r.batch, r.lr, r.samples, math.inf),)
            )
    feed(monitor, events)
    assert monitor.loss_nonfinite_since is None
    assert monitor.loss_nonfinite_steps == 2
    assert monitor.last_loss == pytest.approx(0.1)


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


def test_the_final_rows_go_out_before_the_final_status(monitor):
    fe = FakeFrontend(no_timer(monitor))
    monitor._clock = lambda: 0.0  # nothing goes out by time
    feed(monitor, scripted_run(n_epochs=1, steps_per_epoch=30, log_every=7))
    kinds = [
        ("rows", m["content"]["ops"])
        if m.get("method") == "custom"
        else ("status", m["state"].get("status"))
        for m, _ in fe.messages
    ]
    finished = next(i for i, (k, v) in enumerate(kinds) if k == "status" and v == "finished")
    last_rows = max(i for i, (k, _) in enumerate(kinds) if k == "rows")
    assert last_rows < finished


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
    def broken(columns):
        raise OSError("disk on fire")

    monkeypatch.setattr(monitor._steps, "extend", broken)
    feed(monitor, scripted_run(n_epochs=1, steps_per_epoch=5))  # raises nothing
    assert monitor.error.startswith("OSError: disk on fire")
    assert monitor.status == "finished"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"update_interval": 0}, "update_interval=0 is out of range"),
        ({"max_points": 10}, "max_points=10 is out of range"),
        ({"max_epochs": 1.5}, "max_epochs=1.5 is out of range"),
    ],
)
def test_settings_are_checked(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TrainingMonitor(**kwargs)


def test_a_picture_from_the_view_is_kept_for_the_fallback_output(monitor):
    feed(monitor, scripted_run(run_id=RUN, n_epochs=1, steps_per_epoch=3))
    monitor._dispatch_frontend_msg(
        monitor, {"kind": "snapshot_png", "run_id": RUN, "status": "finished"}, [PNG]
    )
    assert monitor.snapshot_of == f"{RUN}:finished"
    html = monitor._fallback_bundle()["text/html"]
    assert 'src="data:image/png;base64,iVBORw0KGgo' in html
    assert f'TrainingMonitor.from_run("{RUN}")' in html
    assert "status=finished" in html
    # a picture of another run, or not a PNG, is not kept
    monitor._dispatch_frontend_msg(monitor, {"kind": "snapshot_png", "run_id": "x"}, [PNG + b"1"])
    assert monitor.snapshot_of == f"{RUN}:finished"
    monitor._dispatch_frontend_msg(monitor, {"kind": "snapshot_png", "run_id": RUN}, [b"GIF89a"])
    assert monitor.error.startswith("ValueError: snapshot_png: not a PNG")


def test_the_fallback_says_how_to_get_the_monitor_back(monitor):
    before = monitor._fallback_bundle()
    assert "run this cell again" in before["text/html"]
    feed(monitor, scripted_run(run_id=RUN, n_epochs=1, steps_per_epoch=3))
    after = monitor._fallback_bundle()
    assert "<img" not in after["text/html"]  # no picture yet: the text still says it
    assert f'TrainingMonitor.from_run("{RUN}") brings the live monitor back' in after["text/plain"]


def test_the_fallback_says_what_it_holds_and_when_it_was_written(monitor):
    events = scripted_run(run_id=RUN, n_epochs=1, steps_per_epoch=3)
    feed(monitor, events[:1])  # the run has started: the output is written now
    running = monitor._fallback_bundle()
    for text in (running["text/html"], running["text/plain"]):
        assert "static picture" not in text  # there is none to promise
        assert "No picture of the charts was saved with this output" in text
        assert "last written while the run was running" in text
        assert "metrics.jsonl holds what followed" in text
    feed(monitor, events[1:])
    ended = monitor._fallback_bundle()
    assert "last written while" not in ended["text/plain"]
    assert "status=finished" in ended["text/plain"]
    monitor._dispatch_frontend_msg(
        monitor, {"kind": "snapshot_png", "run_id": RUN, "status": "finished"}, [PNG]
    )
    pictured = monitor._fallback_bundle()["text/html"]
    assert "A static picture of the charts (finished), saved with the notebook." in pictured
    assert "No picture" not in pictured


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


def test_fit_runs_in_the_context_of_the_calling_cell(monitor):
    import contextvars

    cell = contextvars.ContextVar("cell")
    cell.set("cell 7")
    seen = []

    class Probe:
        def on_run_started(self, event):
            seen.append(cell.get(None))

    monitor.fit(
        _ScriptedModel(scripted_run(n_epochs=1, steps_per_epoch=2)), "P", callbacks=[Probe()]
    )
    monitor.wait(timeout=30)
    assert seen == ["cell 7"]


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
    assert monitor.steps_seen < 10_000


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
