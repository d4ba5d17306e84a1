"""Runs raced in one TrainingMonitor: plans fitted one after another, each drawn in its
own colour with its own status; finished runs compared the same way; the message
volume of the overlay; Stop and failures in a race; a single fit afterwards."""

from __future__ import annotations

import threading
import time

import pytest
from plan_factories import make_train_loader, make_val_loader

from nnx_lab import ExperimentPlan
from nnx_lab.engine.events import StepEnded
from nnx_lab.plans import PlanError
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend, scripted_run

LANES = r"^lane\d+\.(steps|epochs)$"  # js/monitor/race.js isLaneSeries


@pytest.fixture
def base(tmp_path):
    return (
        ExperimentPlan()
        .with_net(input_dim=8, output_dim=3, hidden_dims=[16])
        .with_data(make_train_loader, val=make_val_loader, identity="toy")
        .with_seed(3)
        .with_epochs(3)
        .with_train(log_every=1)
        .with_runs_root(str(tmp_path / "runs"))
    )


@pytest.fixture
def monitor():
    m = TrainingMonitor()
    yield m
    m.close()


def lane_lengths(monitor):
    return {lane.name: (len(lane.steps), len(lane.epochs)) for lane in monitor._lanes}


def test_a_race_fits_each_plan_into_its_own_lane(monitor, base):
    fe = FakeFrontend(monitor)
    plans = {"base": base, "fast": base.with_lr(1e-2), "seed 4": base.with_seed(4)}
    results = monitor.race(plans).wait(timeout=120)
    assert list(results) == ["base", "fast", "seed 4"]
    # the same run ids as fitting each plan on its own would give
    for name, plan in plans.items():
        assert results[name].run.id == plan.expected_run_id()
    runs = monitor.runs
    assert [r["name"] for r in runs] == ["base", "fast", "seed 4"]
    assert [r["status"] for r in runs] == ["finished"] * 3
    assert [r["run_id"] for r in runs] == [results[n].run.id for n in plans]
    # each run is named after its branch, in its record (the runs panel shows it first)
    assert [results[n].run.metadata.get("name") for n in plans] == ["base", "fast", "seed 4"]
    assert all(r["epoch"] == 3 and r["n_epochs"] == 3 and r["step"] == 12 for r in runs)
    assert lane_lengths(monitor) == dict.fromkeys(plans, (12, 3))
    # each lane holds its own run's losses (step records of its metrics.jsonl)
    for lane in monitor._lanes:
        losses = [idp.train_edp.loss for idp in results[lane.name].run.idps]
        assert lane.steps.column("loss").tolist() == pytest.approx(losses, rel=1e-6)
    assert len({tuple(lane.steps.column("loss").tolist()) for lane in monitor._lanes}) == 3
    # every lane's rows reached the views, and the synced list names them
    sent = {
        op["series"] for c in fe.series_messages() for op in c["ops"] if op["series"][:4] == "lane"
    }
    assert sent == {f"{lane.key}.{kind}" for lane in monitor._lanes for kind in ("steps", "epochs")}
    assert fe.state["runs"] == runs
    assert monitor.results.keys() == results.keys()
    assert monitor.run is None  # a race has several: see results
    assert monitor.summary().startswith("race of 3 runs: base finished loss ")


def test_a_page_reload_during_a_race_brings_back_every_run(monitor, base):
    fe = FakeFrontend(monitor)
    gate = threading.Event()

    class Gate:
        def on_step_ended(self, event):
            if event.step == 6:
                gate.set()
                time.sleep(0.3)

    monitor.race({"a": base, "b": base.with_lr(1e-2)}, callbacks=[Gate()])
    assert gate.wait(60)
    fe.hello()  # the reloaded page: a snapshot of everything, lanes included
    snap_ops = [
        op for c in fe.custom if c["kind"] == "snapshot" and c["to"] == fe.view for op in c["ops"]
    ]
    assert {op["series"] for op in snap_ops} >= {"lane0.steps", "lane0.epochs", "lane1.steps"}
    monitor.wait(timeout=120)
    for lane in monitor._lanes:
        steps, epochs = lane.series_names
        assert fe.length_after(steps) == len(lane.steps) == 12
        assert fe.length_after(epochs) == len(lane.epochs) == 3


def test_stop_ends_the_running_plan_and_skips_the_queued_ones(monitor, base, tmp_path):
    started = threading.Event()

    class Slow:
        def on_step_ended(self, event):
            started.set()
            time.sleep(0.02)

    long = base.with_epochs(50)
    monitor.race({"a": long, "b": long.with_seed(5), "c": long.with_seed(6)}, callbacks=[Slow()])
    assert started.wait(60)
    monitor._dispatch_frontend_msg(monitor, {"kind": "stop"}, [])  # the Stop button
    results = monitor.wait(timeout=120)
    assert [r["status"] for r in monitor.runs] == ["stopped", "skipped", "skipped"]
    assert monitor.runs[1]["stop_reason"].startswith("not started: stop requested")
    assert list(results) == ["a"]
    assert results["a"].run.status.value == "stopped"
    assert monitor.status == "stopped"
    # the skipped plans never created a run directory
    assert len(list((tmp_path / "runs").iterdir())) == 1


def test_a_failing_plan_is_shown_and_the_race_goes_on(monitor, base):
    first = base.fit(report=False)  # its run exists: fitting it again is refused
    monitor.race({"again": base, "other": base.with_seed(9)})
    results = monitor.wait(timeout=120)
    assert [r["status"] for r in monitor.runs] == ["failed", "finished"]
    assert monitor.runs[0]["error"].startswith("FileExistsError")
    assert list(results) == ["other"]
    assert isinstance(monitor.race_errors["again"], FileExistsError)
    assert monitor.error.startswith("[again] FileExistsError")
    assert first.run.id in monitor.error


def test_every_plan_is_checked_before_the_race_starts(monitor, base, tmp_path):
    bad = base.with_lr(-1.0)
    with pytest.raises(PlanError, match=r"broken: train\.optim\.max_lr") as info:
        monitor.race({"good": base, "broken": bad})
    assert info.value.problems[0].field == "broken: train.optim.max_lr"
    assert not (tmp_path / "runs").exists()  # nothing ran, nothing was written
    assert monitor.runs == []
    with pytest.raises(TypeError, match="not an ExperimentPlan"):
        monitor.race({"x": "a plan?"})
    with pytest.raises(ValueError, match="at most 12"):
        monitor.race([base.with_seed(i) for i in range(13)])


def test_a_single_fit_after_a_race_shows_one_run_again(monitor, base):
    monitor.race({"a": base, "b": base.with_seed(4)}).wait(timeout=120)
    lane_series = {name for lane in monitor._lanes for name in lane.series_names}
    result = monitor.fit_plan(base.with_seed(11)).wait(timeout=120)
    assert monitor.runs == []
    assert lane_series.isdisjoint(monitor._transport.series)
    assert monitor.run_id == result.run.id == monitor.run.id
    assert monitor.status == "finished"
    assert monitor.loss_points == 12


def test_compare_draws_finished_runs_the_same_way(monitor, base, tmp_path):
    results = monitor.race({"a": base, "b": base.with_lr(1e-2)}).wait(timeout=120)
    ids = {name: r.run.id for name, r in results.items()}
    cmp = TrainingMonitor.compare(ids, runs_root=tmp_path / "runs")
    try:
        fe = FakeFrontend(cmp)
        assert [r["name"] for r in cmp.runs] == ["a", "b"]
        assert [r["status"] for r in cmp.runs] == ["finished", "finished"]
        for live, read in zip(monitor._lanes, cmp._lanes, strict=True):
            assert read.run_id == live.run_id
            assert read.steps.column("loss").tolist() == live.steps.column("loss").tolist()
            val = "val.loss"
            assert read.epochs.column(val).tolist() == live.epochs.column(val).tolist()
        assert cmp.from_log
        assert not cmp.can_stop
        with pytest.raises(RuntimeError, match="from their logs"):
            cmp.fit_plan(base)
        fe.hello()
        assert fe.length_after("lane0.steps") == 12
        # prefixes work, and the names default to the ids' first characters
        by_prefix = TrainingMonitor.compare(
            [i[:10] for i in ids.values()], runs_root=tmp_path / "runs"
        )
        assert [r["name"] for r in by_prefix.runs] == [i[:8] for i in ids.values()]
        by_prefix.close()
    finally:
        cmp.close()


def test_compare_refuses_what_it_cannot_show(tmp_path):
    (tmp_path / "runs").mkdir()
    with pytest.raises(TypeError, match="several run ids"):
        TrainingMonitor.compare("abc", runs_root=tmp_path / "runs")
    with pytest.raises(ValueError, match="at least one"):
        TrainingMonitor.compare([], runs_root=tmp_path / "runs")
    with pytest.raises(ValueError, match="at most 12"):
        TrainingMonitor.compare(["ab"] * 13, runs_root=tmp_path / "runs")
    with pytest.raises(FileNotFoundError):
        TrainingMonitor.compare(["abcdef"], runs_root=tmp_path / "runs")


def _scripted_race(monitor, n_lanes, steps, *, interleaved):
    """Feed ``n_lanes`` scripted runs to race lanes, 1 ms of the monitor's clock per step
    (one after another, or interleaved step by step as runs in parallel threads would)."""
    now = [0.0]
    monitor._clock = lambda: now[0]
    monitor._transport.timer_factory = None  # flushes only when the clock says so
    lanes = [monitor._new_lane(f"run {i}", forward=False) for i in range(n_lanes)]
    scripts = [
        scripted_run(run_id=f"{i:032x}", n_epochs=2, steps_per_epoch=steps // 2, log_every=10)
        for i in range(n_lanes)
    ]
    order = (
        [(i, e) for group in zip(*scripts, strict=False) for i, e in enumerate(group)]
        if interleaved
        else [(i, e) for i, script in enumerate(scripts) for e in script]
    )
    for i, event in order:
        if isinstance(event, StepEnded):
            now[0] += 0.001 / (n_lanes if interleaved else 1)
        getattr(lanes[i], event.hook, lambda e: None)(event)
    return now[0]


@pytest.mark.parametrize("interleaved", [False, True], ids=["one-after-another", "interleaved"])
def test_the_overlay_still_coalesces_to_a_few_messages_a_second(monitor, interleaved):
    fe = FakeFrontend(monitor)
    fe.clear()
    seconds = _scripted_race(monitor, 4, 4_000, interleaved=interleaved)
    updates = [c for c in fe.custom if c["kind"] == "update"]
    # 16,000 steps of 4 runs in 16 s (or 4 s side by side): at most one update every
    # 0.1 s, plus one per run start and end (the status goes out with its last rows)
    assert len(updates) <= seconds / monitor.update_interval + 2 * 4 + 2
    assert len(fe.updates) <= len(updates) + 2 * 4 + 2  # the synced state rides along
    per_second = (len(updates) + len(fe.updates)) / seconds
    assert per_second <= 2 / monitor.update_interval + 2 * 4 / seconds + 1
    for lane in monitor._lanes:
        assert fe.rows_sent(f"{lane.key}.steps") >= len(lane.steps) == 4_000
        assert lane.status == "finished"
    assert [r["status"] for r in fe.state["runs"]] == ["finished"] * 4


def test_the_lanes_stay_within_their_bound():
    monitor = TrainingMonitor(max_points=1000, max_epochs=100)
    try:
        lane = monitor._new_lane("long", forward=False)
        from nnx_lab.widgets._testing import feed

        feed(lane, scripted_run(n_epochs=400, steps_per_epoch=100, log_every=50))
        assert len(lane.steps) <= 1000
        assert len(lane.epochs) <= 100
        assert lane.steps.total == 40_000
        assert lane.steps.capacity == 1000
    finally:
        monitor.close()


def test_a_view_that_joins_mid_race_holds_every_run_as_the_kernel_does(tmp_path):
    """The race's messages through the real view-side transport (Node): each lane's
    series, decimated, equal the kernel's value for value."""
    from test_widget_contract import kernel_columns, replay

    monitor = TrainingMonitor(max_points=1_000, max_epochs=100)
    try:
        fe = FakeFrontend(monitor)
        monitor._transport.timer_factory = None
        now = [0.0]
        monitor._clock = lambda: now[0]
        lanes = [monitor._new_lane(name, forward=False) for name in ("a", "b")]
        runs = [
            scripted_run(run_id=f"{i:032x}", n_epochs=60, steps_per_epoch=50, log_every=5)
            for i in range(2)
        ]
        order = [(i, e) for group in zip(*runs, strict=False) for i, e in enumerate(group)]
        half = len(order) // 2

        def play(part):
            for i, event in part:
                now[0] += 0.01
                getattr(lanes[i], event.hook, lambda e: None)(event)

        play(order[:half])
        fe.clear()
        fe.hello()  # a page reload mid-race
        play(order[half:])
        assert all(lane.steps.width > 1 for lane in lanes)  # decimated after the view joined
        held = replay(fe.custom_with_buffers(), fe.view, tmp_path, accept=LANES)
        assert held["synced"] is True
        for lane in lanes:
            for name, series in zip(lane.series_names, (lane.steps, lane.epochs), strict=True):
                js = held["series"][name]
                assert (js["length"], js["width"], js["total"]) == (
                    len(series),
                    series.width,
                    series.total,
                )
                for field, values in kernel_columns(series).items():
                    got = [v if isinstance(v, str) else float(v) for v in js["columns"][field]]
                    assert got == values, (name, field)
    finally:
        monitor.close()


def test_a_race_names_each_run_after_its_branch_and_its_plan(base):
    from nnx_lab.widgets._monitor_jobs import _run_name

    assert _run_name(base, "high lr") == "high lr"
    assert _run_name(base.with_train(name="baseline"), "high lr") == "baseline · high lr"
    assert _run_name(base.with_train(name="high lr"), "high lr") == "high lr"
    assert _run_name(base.with_train(name="b" * 95), "high lr") == "high lr"  # too long
