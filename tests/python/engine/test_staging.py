"""Batches staged on the device ahead of time (issue 23), tested on CPU with a fake hook.

The fake hook stands for the CUDA side stream: ``start`` is the copy being issued,
``ready`` the compute stream waiting for it. Its log proves the order (one batch ahead,
the source's order), the phase boundaries (an epoch's training, then its validation,
never both in flight) and that nothing is started after a phase ends, fails or stops.
"""

from __future__ import annotations

import engine_factories as f
import pytest
import torch

import nnx_lab.engine.evaluate as evaluate_module
import nnx_lab.engine.loop as loop_module
from nnx_lab import ExperimentPlan, RunStatus
from nnx_lab.engine.sinks import Callback
from nnx_lab.engine.staging import device_hook, staged, staging_note

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class FakeHook:
    """Records what a device hook is asked; hands batches back as they are (cloned,
    as a copy to the device would)."""

    def __init__(self, log: list, phase: str = "") -> None:
        self.log, self.phase = log, phase

    def start(self, batch):
        self.log.append(("start", self.phase, _key(batch)))
        if isinstance(batch, list | tuple):
            return type(batch)(t.clone() if isinstance(t, torch.Tensor) else t for t in batch)
        return batch

    def ready(self, moved):
        self.log.append(("ready", self.phase, _key(moved)))
        return moved


def _key(batch):
    if isinstance(batch, int):
        return batch
    return int(batch[0].reshape(-1)[0]) if isinstance(batch, list | tuple) else None


def _source(n: int, log: list, fail_at: int | None = None):
    for i in range(n):
        if i == fail_at:
            raise ValueError(f"batch {i} is broken")
        log.append(("fetch", "", i))
        yield i


def test_without_a_hook_the_source_is_iterated_as_it_is():
    batches = [1, 2, 3]
    it = staged(batches, None)
    assert type(it) is type(iter(batches))
    assert list(it) == [1, 2, 3]


def test_the_next_batch_is_started_before_this_one_is_handed_out():
    log: list = []
    for b in staged(_source(3, log), FakeHook(log)):
        log.append(("step", "", b))
    assert log == [
        ("fetch", "", 0), ("start", "", 0),
        ("fetch", "", 1), ("start", "", 1), ("ready", "", 0), ("step", "", 0),
        ("fetch", "", 2), ("start", "", 2), ("ready", "", 1), ("step", "", 1),
        ("ready", "", 2), ("step", "", 2),
    ]  # fmt: skip


def test_nothing_is_started_after_the_consumer_stops():
    log: list = []
    it = staged(_source(10, log), FakeHook(log))
    for b in it:
        log.append(("step", "", b))
        if b == 1:
            break
    it.close()
    starts = [e for e in log if e[0] == "start"]
    assert starts == [("start", "", 0), ("start", "", 1), ("start", "", 2)]
    assert log[-1] == ("step", "", 1)


def test_a_failing_source_still_hands_out_the_batch_before_it():
    log: list = []
    it = staged(_source(5, log, fail_at=2), FakeHook(log))
    got = [next(it), next(it)]
    with pytest.raises(ValueError, match="batch 2 is broken"):
        next(it)
    assert got == [0, 1]  # batch 1 trains before batch 2's failure is raised
    assert [e for e in log if e[0] == "start"] == [("start", "", 0), ("start", "", 1)]


def test_a_failing_step_starts_nothing_more():
    log: list = []

    def steps():
        for b in staged(_source(5, log), FakeHook(log)):
            if b == 1:
                raise RuntimeError("step failed")

    with pytest.raises(RuntimeError, match="step failed"):
        steps()
    assert [e[2] for e in log if e[0] == "start"] == [0, 1, 2]


def test_an_empty_source_stages_nothing():
    log: list = []
    assert list(staged(iter(()), FakeHook(log))) == []
    assert log == []


# -- through training -----------------------------------------------------------------------
class StopAt(Callback):
    def __init__(self, step):
        self.step, self.control = step, None

    def on_attach(self, control):
        self.control = control

    def on_step_ended(self, e):
        if e.step == self.step:
            self.control.request_stop("test asked")


def _hooked(monkeypatch, log):
    monkeypatch.setattr(loop_module, "device_hook", lambda device: FakeHook(log, "train"))
    monkeypatch.setattr(evaluate_module, "device_hook", lambda device: FakeHook(log, "val"))


def _in_flight(log):
    """The most batches of each phase started and not yet ready, and whether a phase
    ever began while the other had one in flight."""
    flight = {"train": 0, "val": 0}
    most = 0
    for what, phase, _ in log:
        other = "val" if phase == "train" else "train"
        if what == "start":
            assert flight[other] == 0, "training and validation staged at once"
            flight[phase] += 1
        else:
            flight[phase] -= 1
        most = max(most, flight[phase])
    assert flight == {"train": 0, "val": 0}  # every phase ended with nothing in flight
    return most


def test_training_and_validation_each_stage_while_their_phase_runs(monkeypatch, runs_root):
    log: list = []
    _hooked(monkeypatch, log)
    train, val = f.loaders(batch=64)  # 256 rows: 4 batches; 64 rows: 1 batch
    f.model().train(f.train_params(runs_root, train, val, n_epochs=2))
    phases = [p for _, p, _ in log]
    epoch = ["train"] * 8 + ["val"] * 2
    assert phases == epoch * 2
    assert _in_flight(log) == 2  # the next started while this one's step runs


def test_a_staged_run_trains_the_same_weights_as_an_unstaged_one(monkeypatch, tmp_path):
    plain = f.model()
    plain_run = plain.train(f.train_params(tmp_path / "plain", n_epochs=2))
    log: list = []
    _hooked(monkeypatch, log)
    hooked = f.model()
    hooked_run = hooked.train(f.train_params(tmp_path / "hooked", n_epochs=2))
    assert log  # the fake hook staged every batch
    for (name, a), (_, b) in zip(
        plain.net.state_dict().items(), hooked.net.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    assert [p.train_edp.loss for p in plain_run.idps] == [p.train_edp.loss for p in hooked_run.idps]


def test_a_stop_stages_nothing_after_the_step_it_ends(monkeypatch, runs_root):
    log: list = []
    _hooked(monkeypatch, log)
    run = f.model().train(f.train_params(runs_root, n_epochs=3), callbacks=[StopAt(3)])
    assert run.status is RunStatus.STOPPED
    starts = [e for e in log if e[0] == "start"]
    readies = [e for e in log if e[0] == "ready"]
    # batches 0..2 trained, batch 3 was in flight when the stop came; no validation
    assert [e[1] for e in starts] == ["train"] * 4
    assert len(readies) == 3


# -- the device hook and the binding report -------------------------------------------------
def test_staging_is_off_on_the_cpu():
    assert device_hook("cpu") is None
    assert device_hook(torch.device("cpu")) is None
    assert staging_note("cpu") == "off: cpu"
    assert staging_note("cuda").startswith("cuda: next batch staged on a side stream")


def test_the_binding_report_says_what_is_staged():
    plan = ExperimentPlan()
    report = plan.binding_report()
    staging = [(d, v) for w, d, v in report.objects if w == "staging"]
    assert staging == [("off: cpu", "engine, from model.device")]
    assert "off: cpu" in str(report)
    cuda = plan.with_device("cuda").binding_report()
    assert [d for w, d, _ in cuda.objects if w == "staging"] == [staging_note("cuda")]
    assert {"what": "staging", "description": "off: cpu", "via": "engine, from model.device"} in (
        report.to_json()["objects"]
    )


def test_a_batchs_containers_survive_the_move():
    """What the CUDA hook applies its copy through: the batch's own container."""
    from collections import namedtuple

    from nnx_lab.engine.staging import _each_tensor

    Pair = namedtuple("Pair", "x y")
    double = lambda t: t * 2  # noqa: E731
    t = torch.ones(2)
    assert type(_each_tensor([t, "id"], double)) is list
    moved = _each_tensor((t, 3), double)
    assert type(moved) is tuple
    assert moved[1] == 3
    assert torch.equal(moved[0], t * 2)
    pair = _each_tensor(Pair(t, t), double)
    assert type(pair) is Pair
    assert torch.equal(pair.y, t * 2)
    assert torch.equal(_each_tensor(t, double), t * 2)
    assert _each_tensor({"x": t}, double) == {"x": t}  # passed on for the step to name
