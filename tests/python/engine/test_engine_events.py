"""The event stream: order, bulk records, JSON round trip, stop, interrupt and failure."""

from __future__ import annotations

import json
import math

import engine_factories as f
import pytest
import yaml

from nnx_lab import Callback, Checkpoints, NNCheckpoint, NNRun, RunStatus
from nnx_lab.engine import events as ev


class Recorder(Callback):
    def __init__(self):
        self.events = []

    def on_run_started(self, e):
        self.events.append(e)

    on_step_ended = on_step_metrics = on_epoch_ended = on_run_started
    on_checkpoint_written = on_run_finished = on_run_started


def test_a_run_emits_one_ordered_stream(runs_root):
    rec = Recorder()
    run = f.model().train(
        f.train_params(runs_root, n_epochs=3, log_every=5, checkpoint_every_s=0), callbacks=[rec]
    )
    kinds = [type(e).__name__ for e in rec.events]
    assert kinds[0] == "RunStarted"
    assert kinds[-1] == "RunFinished"
    steps = [e for e in rec.events if isinstance(e, ev.StepEnded)]
    assert [s.step for s in steps] == list(range(1, 25))
    records = [r for e in rec.events if isinstance(e, ev.StepMetrics) for r in e.records]
    assert [r.step for r in records] == list(range(1, 25))  # every step once, in order
    n_batches = sum(isinstance(e, ev.StepMetrics) for e in rec.events)
    assert n_batches == 6  # 8 steps an epoch, log_every=5: 5+3 per epoch, one sync each
    epochs = [e for e in rec.events if isinstance(e, ev.EpochEnded)]
    assert [e.epoch for e in epochs] == [1, 2, 3]
    assert all(e.val is not None and e.signal_source == "val_edp.error" for e in epochs)
    written = [e.type for e in rec.events if isinstance(e, ev.CheckpointWritten)]
    assert written.count("last") == 3
    assert "best" in written
    assert rec.events[-1].status == "finished"
    assert run.status is RunStatus.FINISHED
    # each epoch's records were emitted before its EpochEnded
    for e in epochs:
        idx = rec.events.index(e)
        seen = [
            r.step for x in rec.events[:idx] if isinstance(x, ev.StepMetrics) for r in x.records
        ]
        assert seen[-1] == e.step


def test_every_logged_event_round_trips_through_json(runs_root):
    rec = Recorder()
    run = f.model().train(f.train_params(runs_root, n_epochs=2), callbacks=[rec])
    for e in rec.events:
        if isinstance(e, ev.StepEnded):
            continue
        back = ev.event_from_json(json.loads(json.dumps(e.to_json())))
        assert back == e
    lines = (runs_root / run.id / "metrics.jsonl").read_text().splitlines()
    replayed = [ev.event_from_json(json.loads(x)) for x in lines]
    records = [r for e in replayed if isinstance(e, ev.StepMetrics) for r in e.records]
    live = [r for e in rec.events if isinstance(e, ev.StepMetrics) for r in e.records]
    assert records == live


def test_unknown_event_kind_is_refused():
    with pytest.raises(ValueError, match="unknown event kind"):
        ev.event_from_json({"event": "banana"})


class StopAt(Callback):
    def __init__(self, step):
        self.step, self.control = step, None

    def on_attach(self, control):
        self.control = control

    def on_step_ended(self, e):
        if e.step == self.step:
            self.control.request_stop("test asked")


def test_a_stop_request_ends_after_the_current_step_with_last_written(runs_root):
    run = f.model().train(f.train_params(runs_root, n_epochs=5), callbacks=[StopAt(11)])
    assert run.status is RunStatus.STOPPED
    assert len(run.idps) == 11
    meta = yaml.safe_load((run.run_dir / "metadata.yaml").read_text())
    assert meta["status"] == "stopped"
    assert meta["stop_reason"] == "test asked"
    last = NNCheckpoint.load(run=run, type=Checkpoints.LAST)
    assert last.step == 11
    assert last.sidecar["epoch_complete"] is False
    loaded = NNRun.load(id=run.id, runs_root=runs_root)
    assert loaded.status is RunStatus.STOPPED
    assert len(loaded.idps) == 11


class InterruptAt(StopAt):
    def on_step_ended(self, e):
        if e.step == self.step:
            raise KeyboardInterrupt


def test_keyboard_interrupt_writes_last_records_stopped_and_propagates(runs_root):
    model = f.model()
    with pytest.raises(KeyboardInterrupt):
        model.train(f.train_params(runs_root, n_epochs=5), callbacks=[InterruptAt(13)])
    run = model.last_run
    meta = yaml.safe_load((run.run_dir / "metadata.yaml").read_text())
    assert meta["status"] == "stopped"
    last_line = json.loads((run.run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert last_line["event"] == "run_finished"
    assert last_line["status"] == "stopped"
    assert NNCheckpoint.load(run=run, type=Checkpoints.LAST).step == 13


class Boom(Callback):
    def on_epoch_ended(self, e):
        if e.epoch == 2:
            raise RuntimeError("sink exploded")


def test_a_failure_is_recorded_as_failed_with_the_error_and_reraised(runs_root):
    model = f.model()
    with pytest.raises(RuntimeError, match="sink exploded"):
        model.train(f.train_params(runs_root, n_epochs=4), callbacks=[Boom()])
    run = NNRun.load(id=model.last_run.id, runs_root=runs_root)
    assert run.status is RunStatus.FAILED
    assert "RuntimeError: sink exploded" in run.error
    finished = json.loads((run.run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert "Traceback" in finished["traceback"]


def test_early_stopping_finishes_the_run_and_names_the_reason(runs_root):
    from nnx_lab import EarlyStopping

    stopper = EarlyStopping(patience=1, monitor="train_edp.loss", min_delta=10.0)
    run = f.model().train(f.train_params(runs_root, n_epochs=6), callbacks=[stopper])
    assert run.status is RunStatus.FINISHED  # a complete run, ended early
    assert len(run.epochs) == 2
    assert stopper.stopped_epoch == 2
    assert "early stopping" in run.metadata["stop_reason"]


def test_early_stopping_without_validation_warns_once_and_never_stops(runs_root):
    from nnx_lab import EarlyStopping

    train, _ = f.loaders()
    with pytest.warns(RuntimeWarning, match="no value to read"):
        run = f.model().train(
            f.train_params(runs_root, train_loader=train, val_loader=None, n_epochs=3),
            callbacks=[EarlyStopping(patience=1)],
        )
    assert len(run.epochs) == 3
    assert all(e["signal_source"] == "train_edp.error" for e in run.epochs)
    assert all(math.isfinite(e["signal"]) for e in run.epochs)


def test_checkpoints_are_throttled_but_the_end_state_and_best_are_always_written(runs_root):
    """With the default interval a short run writes LAST once, at its end; BEST waits in
    memory and lands with it, holding the best epoch's weights."""
    rec = Recorder()
    model = f.model()
    run = model.train(f.train_params(runs_root, n_epochs=4), callbacks=[rec])
    written = [(e.type, e.epoch) for e in rec.events if isinstance(e, ev.CheckpointWritten)]
    assert [w for w in written if w[0] == "last"] == [("last", 4)]
    best_epoch = min(run.epochs, key=lambda e: (e["signal"], e["epoch"]))["epoch"]
    best = NNCheckpoint.load(run=run, type=Checkpoints.BEST)
    assert best.epoch == best_epoch
    assert ("best", best_epoch) in written
    if best_epoch != 4:  # the pending snapshot kept that epoch's weights, not the last ones
        assert any(
            not __import__("torch").equal(v, model.net.state_dict()[k])
            for k, v in best.model_state.items()
        )


def test_a_stop_commits_the_pending_best(runs_root):
    run = f.model().train(f.train_params(runs_root, n_epochs=5), callbacks=[StopAt(19)])
    assert run.status is RunStatus.STOPPED
    improved = [e["epoch"] for e in run.epochs if e["improved"]]
    assert NNCheckpoint.load(run=run, type=Checkpoints.BEST).epoch == improved[-1]
    assert NNCheckpoint.load(run=run, type=Checkpoints.LAST).step == 19


def test_a_records_extra_fields_are_set_as_dataclasses_replace_would():
    import dataclasses

    from nnx_lab.engine.step_buffer import _with

    # the read-back copies a record's fields without its __init__: only sound while the
    # record runs no __post_init__ (a check or a conversion there would be skipped)
    assert not hasattr(ev.StepRecord, "__post_init__")
    record = ev.StepRecord(3, 1, 2, 0.01, 32, 0.5, 0.1, 0.9, 0.8, 0.7, 0.75)
    for changes in ({"terms": {"a": 1.0}}, {"aux": {"load": 0.2}}, {"lr": None, "lrs": {"G": 0.1}}):
        got = _with(record, **changes)
        assert got == dataclasses.replace(record, **changes)
        assert type(got) is ev.StepRecord
        with pytest.raises(dataclasses.FrozenInstanceError):
            got.loss = 1.0  # type: ignore[misc]
    assert record.terms is None  # the original is untouched
    assert record.lr == 0.01
