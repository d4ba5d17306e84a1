"""LRFinderWidget on the kernel side: the curve sent live through the shared transport, a
pick becoming chosen_lr, "Use this LR" feeding the plan and a linked PlanBuilder, Stop
mid-sweep leaving the model and the random streams as they were, a reload mid-sweep
getting the whole curve again, errors under the widget, refused input from the view."""

from __future__ import annotations

import random
import threading
import time

import engine_factories as f
import numpy as np
import plan_factories as pf
import pytest
import torch
import traitlets

from nnx_lab import ConfigError, ExperimentPlan
from nnx_lab.plans import PlanError
from nnx_lab.widgets import LRFinderWidget, PlanBuilder
from nnx_lab.widgets._lr_finder import LR_PATH
from nnx_lab.widgets._testing import FakeFrontend

F32 = np.float32


@pytest.fixture
def plan(tmp_path):
    return (
        ExperimentPlan()
        .with_net(input_dim=8, output_dim=3, hidden_dims=[16])
        .with_data(pf.make_train_loader, val=pf.make_val_loader, identity="toy")
        .with_seed(3)
        .with_epochs(1)
        .with_runs_root(str(tmp_path / "runs"))
    )


class Gate:
    """A sweep sink that holds the sweep once it has reported ``at`` points, until
    released (the widget, first among the sinks, has those points by then)."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.points: list[tuple[int, float, float, float]] = []
        self.reached = threading.Event()
        self.release = threading.Event()

    def on_sweep_points(self, event) -> None:
        self.points.extend(event.points)
        if len(self.points) >= self.at and not self.release.is_set():
            self.reached.set()
            assert self.release.wait(30), "the test never released the sweep"


def wait_for(predicate, timeout=10.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def columns_sent(fe: FakeFrontend, kinds=("snapshot",), view=None):
    """The sweep columns the given messages carry, concatenated in order."""
    out: dict[str, list[float]] = {}
    for content, buffers in fe.custom_with_buffers():
        if content.get("kind") not in kinds or (view and content.get("to") not in (None, view)):
            continue
        cols = FakeFrontend.decode(content, buffers).get("sweep")
        if not cols:
            continue
        for name, arr in cols.items():
            out.setdefault(name, []).extend(arr.tolist())
    return out


def three_digits(lr: float) -> float:
    """What "Use this LR" writes: the rate to three significant digits."""
    return float(f"{lr:.3g}")


def close(*widgets):
    for w in widgets:
        w.close()


# ---------------------------------------------------------------------------- live curve


def test_the_curve_is_sent_live_throttled_and_complete(plan):
    gate = Gate(at=20)
    w = LRFinderWidget(
        plan, num_iter=40, end_lr=1.0, callbacks=[gate], update_interval=0.05, autostart=False
    )
    fe = FakeFrontend(w)
    fe.hello()  # a view is shown before the sweep starts
    try:
        w.start()
        assert gate.reached.wait(30)
        # while the sweep is held mid-way, the view already has those points
        wait_for(lambda: fe.length_after("sweep") >= 20, what="a live update")
        assert w.status == "running"
        assert w.can_stop
        assert fe.state["points"] >= 20
        gate.release.set()
        result = w.wait(60)
    finally:
        gate.release.set()
        close(w)
    n = len(result.lrs)
    assert w.status == "finished"
    assert fe.length_after("sweep") == n == w.points
    sent = columns_sent(fe, kinds=("update",))
    # every point once, in order, as float32 on the wire
    assert sent["lr"] == [float(F32(v)) for v in result.lrs]
    assert sent["loss"] == [float(F32(v)) for v in result.losses]
    assert sent["smoothed"] == [float(F32(v)) for v in result.smoothed]
    assert sent["step"] == list(range(1, n + 1))
    # coalesced: far fewer updates than the sweep's point events (one per 5 steps)
    updates = [c for c in fe.custom if c["kind"] == "update"]
    assert 2 <= len(updates) < n / 5 + 2
    # the result's state reaches the view
    assert fe.state["suggested_lr"] == result.suggested_lr
    assert fe.state["rule"] == result.rule == "valley"
    assert fe.state["suggestions"] == result.suggestions
    assert fe.state["chosen_lr"] == result.suggested_lr  # the default choice
    assert fe.state["status"] == "finished"


def test_a_broken_display_never_fails_the_sweep(plan, monkeypatch):
    w = LRFinderWidget(plan, num_iter=20, end_lr=1.0, autostart=False)

    def broken(columns):
        raise OSError("disk on fire")

    monkeypatch.setattr(w._series, "extend", broken)
    try:
        w.start()
        result = w.wait(60)
    finally:
        close(w)
    assert w.error.startswith("OSError: disk on fire")
    assert w.status == "finished"
    assert len(result.lrs) > 0
    assert result.suggested_lr is not None


def test_memory_is_bounded_by_max_points(plan):
    w = LRFinderWidget(plan, num_iter=80, end_lr=1.0, max_points=16, diverge_margin=1e9)
    try:
        result = w.wait(60)
        held = w.series()
    finally:
        close(w)
    assert len(result.lrs) == 80 == w.points
    assert len(held["lr"]) <= 16
    assert held["n"]
    assert sum(held["n"]) == 80
    assert held["lr"][-1] == pytest.approx(result.lrs[-1], rel=1e-6)


# ---------------------------------------------------------------------------- picking


def test_a_pick_from_the_view_becomes_chosen_lr_at_full_precision(plan):
    w = LRFinderWidget(plan, num_iter=30, end_lr=1.0)
    fe = FakeFrontend(w)
    try:
        result = w.wait(60)
        target = result.lrs[12]
        fe.clear()
        # the view read the rate from a float32 column and sets the traitlet
        w.set_state({"chosen_lr": float(F32(target))})
        assert w.chosen_lr == target  # the swept rate itself, not its float32 copy
        assert w.input_error == ""
        # the kernel's (snapped) value goes back to the views
        assert fe.state["chosen_lr"] == target
        # a value between swept rates is kept as it is
        w.set_state({"chosen_lr": 0.0123})
        assert w.chosen_lr == 0.0123
        # Python sets it too, and the views follow
        w.chosen_lr = result.lrs[3]
        assert fe.state["chosen_lr"] == result.lrs[3]
        assert w.choose(None) is None
        assert not w.can_use
    finally:
        close(w)


def test_refused_input_from_the_view_is_shown_and_the_kernel_keeps_its_value(plan):
    w = LRFinderWidget(plan, num_iter=20, end_lr=1.0)
    fe = FakeFrontend(w)
    try:
        w.wait(60)
        w.chosen_lr = 0.01
        for bad, words in [
            (-1.0, "chosen_lr=-1.0: pass a learning rate > 0"),
            (0.0, "chosen_lr=0.0: pass a learning rate > 0"),
            (50.0, "chosen_lr=50.0 is out of the swept range"),
        ]:
            fe.clear()
            w.set_state({"chosen_lr": bad})  # what the comm does with the view's state
            assert w.chosen_lr == 0.01, bad
            assert w.input_error.startswith(words), w.input_error
            assert "click the curve" in w.input_error or "pick a rate" in w.input_error
            # the view is sent the kept value back, and the message
            assert any(u.get("chosen_lr") == 0.01 for u in fe.updates), fe.updates
            assert fe.state["input_error"] == w.input_error
        # typed text
        fe.clear()
        fe.widget._dispatch_frontend_msg(w, {"kind": "choose", "text": "abc"}, [])
        assert w.chosen_lr == 0.01
        assert w.input_error == "chosen_lr='abc': type a learning rate as a number, e.g. 3e-3"
        fe.widget._dispatch_frontend_msg(w, {"kind": "choose", "text": "-3"}, [])
        assert w.chosen_lr == 0.01
        assert "pass a learning rate > 0" in w.input_error
        fe.widget._dispatch_frontend_msg(w, {"kind": "choose", "text": " 2e-3 "}, [])
        assert w.chosen_lr == 0.002
        assert w.input_error == ""
        assert fe.state["input_error"] == ""
        # from Python, a refused value raises and changes nothing
        with pytest.raises(traitlets.TraitError, match=r"chosen_lr=inf"):
            w.chosen_lr = float("inf")
        assert w.chosen_lr == 0.002
    finally:
        close(w)


# ---------------------------------------------------------------------------- use this LR


def test_use_this_lr_updates_the_plan_and_a_linked_builder(plan):
    builder = PlanBuilder(plan, run_id=False)
    w = LRFinderWidget(plan, num_iter=25, end_lr=1.0)
    fe = FakeFrontend(w)
    try:
        result = w.wait(60)
        assert w.plan is plan
        assert w.can_use
        assert not w.linked
        w.set_state({"chosen_lr": float(F32(result.lrs[10]))})
        fe.widget._dispatch_frontend_msg(w, {"kind": "use"}, [])  # the button
        assert w.error == ""
        assert w.plan.value(LR_PATH) == three_digits(result.lrs[10])
        assert plan.value(LR_PATH) == 0.001  # plans are immutable
        assert builder.plan.value(LR_PATH) == 0.001  # not linked yet
        assert w.applied_lr == three_digits(result.lrs[10])

        w.link(builder)
        assert w.linked
        assert fe.state["linked"]
        assert w.plan_lr == 0.001  # the builder's rate, which Use would change
        w.chosen_lr = result.lrs[14]
        fe.widget._dispatch_frontend_msg(w, {"kind": "use"}, [])
        assert builder.plan.value(LR_PATH) == three_digits(result.lrs[14])
        assert builder.values[LR_PATH] == three_digits(result.lrs[14])  # the form shows it
        assert w.plan.value(LR_PATH) == three_digits(result.lrs[14])
        assert w.plan_lr == three_digits(result.lrs[14])
        assert w.chosen_lr == result.lrs[14]  # the pick itself keeps full precision
        assert "PlanBuilder" in w.applied_note
        # an edit in the builder is seen by the widget
        builder.set_value(LR_PATH, 0.05)
        assert w.plan_lr == 0.05
    finally:
        close(w, builder)


def test_a_builder_is_swept_and_linked_and_sweep_again_takes_its_edits(plan):
    builder = PlanBuilder(plan, run_id=False)
    w = LRFinderWidget(builder, num_iter=20, end_lr=1.0)
    try:
        first = w.wait(60)
        assert w.source == "builder"
        assert w.linked
        lr = first.lrs[9]
        assert w.use_lr(lr) is builder.plan
        assert builder.plan.value(LR_PATH) == three_digits(lr)
        builder.set_value("net.hidden_dims", [4])
        w._dispatch_frontend_msg(w, {"kind": "restart"}, [])  # Sweep again
        second = w.wait(60)
        assert list(w.plan.value("net.hidden_dims")) == [4]  # the builder's plan as it is now
        assert second.losses != first.losses
    finally:
        close(w, builder)


def test_use_without_a_plan_says_what_to_do(plan):
    model = f.model(net={"dropout_prob": 0.0})
    loader, _ = f.loaders()
    w = LRFinderWidget(model, loader, num_iter=10, end_lr=1.0)
    try:
        w.wait(60)
        assert w.chosen_lr is not None
        assert not w.can_use  # a model and no builder: nothing to give the rate to
        w._dispatch_frontend_msg(w, {"kind": "use"}, [])
        assert w.error.startswith("RuntimeError: no plan to give the learning rate to")
        assert "widget.link(builder)" in w.error
        builder = PlanBuilder(plan, run_id=False)
        w.link(builder)
        assert w.can_use
        w._dispatch_frontend_msg(w, {"kind": "use"}, [])
        assert w.error == ""
        assert builder.plan.value(LR_PATH) == three_digits(w.chosen_lr)
        builder.close()
    finally:
        close(w)


def test_a_rate_the_builder_refuses_is_shown(plan):
    builder = PlanBuilder(plan, run_id=False)
    w = LRFinderWidget(plan, num_iter=10, end_lr=1.0, autostart=False)
    try:
        w.link(builder)
        w.chosen_lr = 0.01

        def refuse(path, value, **kw):
            from nnx_lab.plans import Problem

            return [Problem(path, value, "a test refusal")]

        builder.set_value = refuse
        with pytest.raises(PlanError, match="a test refusal"):
            w.use_lr()
        w._dispatch_frontend_msg(w, {"kind": "use"}, [])
        assert "a test refusal" in w.error
        assert w.applied_lr is None
    finally:
        close(w, builder)


def test_use_this_lr_writes_three_significant_digits_into_the_builder(plan):
    builder = PlanBuilder(plan, run_id=False)
    w = LRFinderWidget(builder, num_iter=10, start_lr=1e-4, end_lr=1.0, autostart=False)
    fe = FakeFrontend(w)
    try:
        w.chosen_lr = 0.010476157527896641  # a pick on the curve, as the sweep found it
        fe.widget._dispatch_frontend_msg(w, {"kind": "use"}, [])
        assert w.error == ""
        assert builder.values[LR_PATH] == 0.0105  # what the form's field shows
        assert builder.plan.value(LR_PATH) == 0.0105
        assert w.applied_lr == 0.0105
        assert w.plan_lr == 0.0105
        assert w.applied_note == f"{LR_PATH} = 0.0105 in the PlanBuilder"
        assert w.chosen_lr == 0.010476157527896641
        assert w.use_lr(2.3456e-4).value(LR_PATH) == 0.000235
    finally:
        close(w, builder)


# ---------------------------------------------------------------------------- stop


def _state(model, loader):
    return {
        "weights": {k: v.clone() for k, v in model.net.state_dict().items()},
        "modes": [m.training for m in model.net.modules()],
        "python": random.getstate(),
        "numpy": np.random.get_state()[1].copy(),
        "torch": torch.get_rng_state(),
        "loader": loader.generator.get_state(),
    }


def _assert_same(a, b):
    assert a["weights"].keys() == b["weights"].keys()
    for k in a["weights"]:
        assert torch.equal(a["weights"][k], b["weights"][k]), k
    assert a["modes"] == b["modes"]
    assert a["python"] == b["python"]
    assert np.array_equal(a["numpy"], b["numpy"])
    assert torch.equal(a["torch"], b["torch"])
    assert torch.equal(a["loader"], b["loader"])


def test_stop_mid_sweep_leaves_the_model_and_the_random_streams_untouched():
    model = f.model()  # dropout: the sweep draws random numbers
    X, y, _, _ = f.data()
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(X, y),
        batch_size=16,
        shuffle=True,
        generator=torch.Generator().manual_seed(5),
    )
    model.net.eval()  # a mode the sweep must put back
    before = _state(model, loader)
    gate = Gate(at=10)
    w = LRFinderWidget(model, loader, num_iter=60, end_lr=1.0, callbacks=[gate])
    fe = FakeFrontend(w)
    try:
        assert gate.reached.wait(30)
        moved = model.net.state_dict()
        assert any(not torch.equal(moved[k], before["weights"][k]) for k in moved)  # it trains
        fe.click_stop()
        assert w.status == "stopping"
        assert not w.can_stop
        gate.release.set()
        result = w.wait(60)
    finally:
        gate.release.set()
        close(w)
    assert w.status == "stopped" == result.status
    assert result.reason == "stopped from the LR finder"
    assert 10 <= len(result.lrs) < 60
    statuses = [u["status"] for u in fe.updates if "status" in u]
    assert statuses[-2:] == ["stopping", "stopped"]
    _assert_same(before, _state(model, loader))


class StopAfterTheSteps:
    """Clicks Stop once the sweep's last step is reported: the click lands while the
    curve is being read."""

    def __init__(self, num_iter: int) -> None:
        self.num_iter, self.click = num_iter, None

    def on_sweep_points(self, event) -> None:
        if any(p[0] == self.num_iter - 1 for p in event.points):
            self.click()


def test_stop_while_the_curve_is_read_ends_with_an_honest_stopped_state(plan):
    clicker = StopAfterTheSteps(40)
    w = LRFinderWidget(plan, num_iter=40, end_lr=1.0, callbacks=[clicker], autostart=False)
    fe = FakeFrontend(w)
    clicker.click = fe.click_stop
    try:
        w.start()
        result = w.wait(60)
    finally:
        close(w)
    assert len(result.lrs) == 40
    assert w.status == "stopped" == result.status
    assert not w.can_stop
    assert w.reason == (
        "stopped from the LR finder while the curve was read: the valley rule was not computed"
    )
    assert w.suggestions["valley"] is None
    assert w.suggestions["min_div_10"] is not None
    statuses = [u["status"] for u in fe.updates if "status" in u]
    assert statuses[-2:] == ["stopping", "stopped"]  # never left at "stopping"


# ---------------------------------------------------------------------------- reload


def test_a_reload_mid_sweep_gets_the_whole_curve_again_in_parts(plan):
    gate = Gate(at=25)
    w = LRFinderWidget(plan, num_iter=50, end_lr=1.0, callbacks=[gate], diverge_margin=1e9)
    fe = FakeFrontend(w)
    fe.hello()
    try:
        assert gate.reached.wait(30)
        # the page is reloaded: a new view says hello and gets everything so far
        w._transport.max_message_bytes = 200  # force a snapshot in several parts
        fe.clear()
        fe.view = "after-reload"
        fe.hello()
        parts = [c for c in fe.custom if c["kind"] == "snapshot" and c["to"] == "after-reload"]
        assert len(parts) > 1
        assert [c["part"] for c in parts] == list(range(parts[0]["parts"]))
        got = columns_sent(fe, kinds=("snapshot",), view="after-reload")
        so_far = gate.points
        assert got["lr"] == [float(F32(p[1])) for p in so_far]
        assert got["loss"] == [float(F32(p[2])) for p in so_far]
        assert got["step"] == list(range(1, len(so_far) + 1))
        gate.release.set()
        result = w.wait(60)
        # and the updates after the snapshot complete the curve for that view
        assert fe.length_after("sweep") == len(result.lrs) == 50
    finally:
        gate.release.set()
        close(w)


# ---------------------------------------------------------------------------- errors


class FailingLoader:
    """Batches of ``loader``, then an error at batch ``at`` (a broken data source)."""

    def __init__(self, loader, at: int) -> None:
        self.loader, self.at = loader, at

    def __iter__(self):
        for i, batch in enumerate(self.loader):
            if i == self.at:
                raise RuntimeError(f"boom at batch {self.at}")
            yield batch


def test_an_error_in_the_sweep_is_shown_and_the_model_restored():
    model = f.model()
    base, _ = f.loaders()
    loader = FailingLoader(base, at=7)
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    w = LRFinderWidget(model, loader, num_iter=20, end_lr=1.0)
    fe = FakeFrontend(w)
    try:
        with pytest.raises(RuntimeError, match="boom at batch 7"):
            w.wait(60)
        assert w.status == "failed"
        assert w.error.startswith("RuntimeError: boom at batch 7")
        assert "Traceback" in w.error
        assert fe.state["error"] == w.error
        assert fe.state["status"] == "failed"
        assert not w.can_stop
        assert "boom at batch 7" in repr(w)
        for k, v in model.net.state_dict().items():
            assert torch.equal(v, before[k]), k
    finally:
        close(w)


def test_bad_arguments_are_refused_before_anything_starts(plan):
    model = f.model()
    loader, _ = f.loaders()
    threads = threading.active_count()
    with pytest.raises(ConfigError, match=r"lr_finder\.start_lr.*below end_lr"):
        LRFinderWidget(plan, start_lr=1.0, end_lr=0.1)
    with pytest.raises(ConfigError, match=r"lr_finder\.num_iter"):
        LRFinderWidget(model, loader, num_iter=1)
    with pytest.raises(TypeError, match=r"unknown sweep argument\(s\) \['num_iters'\]"):
        LRFinderWidget(plan, num_iters=10)
    with pytest.raises(TypeError, match="owns the sweep's control"):
        LRFinderWidget(plan, control=object())
    with pytest.raises(TypeError, match="pass it as the second argument"):
        LRFinderWidget(model)
    with pytest.raises(TypeError, match="brings its own data"):
        LRFinderWidget(plan, loader)
    with pytest.raises(TypeError, match="pass an ExperimentPlan, a PlanBuilder, or an NNModel"):
        LRFinderWidget(model.net, loader)
    with pytest.raises(PlanError, match="data"):
        LRFinderWidget(ExperimentPlan().with_net(input_dim=8, output_dim=3))
    assert threading.active_count() == threads  # no sweep thread was started


def test_a_second_start_while_sweeping_is_refused(plan):
    gate = Gate(at=5)
    w = LRFinderWidget(plan, num_iter=30, end_lr=1.0, callbacks=[gate])
    try:
        assert gate.reached.wait(30)
        with pytest.raises(RuntimeError, match="a sweep is running"):
            w.start()
        w._dispatch_frontend_msg(w, {"kind": "restart"}, [])
        assert w.error.startswith("RuntimeError: a sweep is running")
    finally:
        gate.release.set()
        w.wait(60)
        close(w)


# ---------------------------------------------------------------------------- text


def test_text_repr(plan):
    w = LRFinderWidget(plan, num_iter=20, end_lr=1.0, autostart=False)
    try:
        assert repr(w) == "LRFinderWidget(status=created, 0 of 20 steps, chosen none)"
        w.start()
        result = w.wait(60)
        text = repr(w)
        assert text.startswith(f"LRFinderWidget(status=finished, {len(result.lrs)} of 20 steps")
        assert f"suggested {result.suggested_lr:.3g} by valley" in text
        w.use_lr(0.01)
        assert repr(w).endswith("chosen 0.01, used 0.01)")
    finally:
        close(w)
