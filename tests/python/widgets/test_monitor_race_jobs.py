"""TrainJobs raced in one TrainingMonitor beside plans (issue 25, Mixup against no
Mixup): each job checked by the engine's own pre-run checks before the first starts,
the same weights as training it alone, Stop, a failing job, and jobs mixed with plans."""

from __future__ import annotations

import inspect
import json
import threading
import time

import pytest
import torch
from plan_factories import toy_plan
from step_factories import mlp_model, tabular_params

from nnx_lab import MonitorSpec, NNModel, NNTrainParams, TrainJob
from nnx_lab.errors import ConfigError
from nnx_lab.paradigms import mixup_train_step_factory
from nnx_lab.plans import PlanError
from nnx_lab.widgets import TrainingMonitor

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _params(root, n_epochs=2, **kw):
    # no loader generator: the shuffling draws from the streams the run seeds (seed=3)
    return tabular_params(root, n_epochs, loader_seed=None, log_every=1, **kw)


def _model():
    return mlp_model()


def _jobs(root, **kw):
    return {
        "mixup": TrainJob(
            _model(), _params(root, **kw), train_step_fn=mixup_train_step_factory(0.4, seed=1)
        ),
        "none": TrainJob(_model(), _params(root, **kw)),
    }


@pytest.fixture
def monitor():
    m = TrainingMonitor()
    yield m
    m.close()


def _weights(model):
    return {k: v.detach().clone() for k, v in model.net.state_dict().items()}


def test_a_race_of_jobs_trains_what_each_trains_alone(monitor, tmp_path):
    jobs = _jobs(tmp_path / "race")
    results = monitor.race(jobs).wait(timeout=120)
    assert list(results) == ["mixup", "none"]
    assert [r["status"] for r in monitor.runs] == ["finished", "finished"]
    assert [r["name"] for r in monitor.runs] == ["mixup", "none"]
    assert [r["run_id"] for r in monitor.runs] == [results[n].id for n in jobs]
    assert [results[n].metadata.get("name") for n in jobs] == ["mixup", "none"]
    assert monitor.results.keys() == results.keys()
    # the Mixup run's lane holds its term (lam) beside its loss, for the view to draw
    mixed, plain = monitor._lanes
    lines = (results["mixup"].run_dir / "metrics.jsonl").read_text().splitlines()
    lams = [x["terms"]["lam"] for x in map(json.loads, lines) if x["event"] == "step"]
    assert mixed.steps.column("term.lam").tolist() == pytest.approx(lams, rel=1e-6)
    assert not plain.steps.has("term.lam")
    for lane in monitor._lanes:  # each lane holds its own run's step losses
        losses = [idp.train_edp.loss for idp in results[lane.name].idps]
        assert lane.steps.column("loss").tolist() == pytest.approx(losses, rel=1e-6)
        assert len(lane.steps) == 8
        assert len(lane.epochs) == 2
    # alone, in another runs root, with fresh objects: the same run ids and weights
    alone = _jobs(tmp_path / "alone")
    for name, job in alone.items():
        run = job.run()
        assert run.id == results[name].id
        raced = _weights(jobs[name].model)
        assert all(torch.equal(raced[k], v) for k, v in _weights(job.model).items())
    # and Mixup did change the training (the two runs differ)
    a, b = (_weights(jobs[n].model) for n in jobs)
    assert not all(torch.equal(a[k], b[k]) for k in a)


def test_a_refused_job_starts_nothing(monitor, tmp_path):
    jobs = _jobs(tmp_path / "runs")
    bad = _params(tmp_path / "runs", monitor=MonitorSpec("accuracy", split="val"))
    jobs["bad"] = TrainJob(_model(), bad)  # monitors validation without a val_loader
    with pytest.raises(PlanError) as info:
        monitor.race(jobs)
    assert [p.field for p in info.value.problems] == ["bad: NNTrainParams.monitor"]
    assert "val_loader" in info.value.problems[0].fix
    # the engine's own refusal, the one train() raises, is the cause
    assert isinstance(info.value.__cause__, ConfigError)
    with pytest.raises(ConfigError, match="val_loader"):
        jobs["bad"].model.train(bad)
    assert not (tmp_path / "runs").exists()  # no run directory, for any job
    assert monitor._job is None
    assert monitor.runs == []


def test_two_jobs_sharing_a_model_or_a_step_are_refused(monitor, tmp_path):
    model, step = _model(), mixup_train_step_factory(0.4)
    root = tmp_path / "runs"
    with pytest.raises(PlanError) as info:
        monitor.race(
            {
                "a": TrainJob(model, _params(root), train_step_fn=step),
                "b": TrainJob(model, _params(root)),
                "c": TrainJob(_model(), _params(root), train_step_fn=step, salt="c"),
            }
        )
    problems = {p.field: p for p in info.value.problems}
    assert set(problems) == {"b: TrainJob", "c: TrainJob"}
    assert "'a'" in problems["b: TrainJob"].fix
    assert problems["c: TrainJob"].value == "MixingStep"
    assert not root.exists()


def test_two_jobs_of_one_run_id_are_refused(monitor, tmp_path):
    root = tmp_path / "runs"
    same = {n: TrainJob(_model(), _params(root)) for n in ("a", "b")}
    with pytest.raises(PlanError) as info:
        monitor.race(same)
    (problem,) = info.value.problems
    assert problem.field == "b: run id"
    assert problem.value == same["a"].model.expected_run_id(same["a"].params)
    assert "salt=" in problem.fix
    assert not root.exists()
    salted = {"a": same["a"], "b": TrainJob(_model(), _params(root), salt="b")}
    assert list(monitor.race(salted).wait(timeout=120)) == ["a", "b"]


def test_a_job_takes_train_keywords_only():
    with pytest.raises(ConfigError, match="distributed") as info:
        TrainJob(_model(), NNTrainParams(n_epochs=1), distributed=object())
    assert info.value.field == "TrainJob"
    with pytest.raises(ConfigError, match="NNModel"):
        TrainJob("a model", NNTrainParams(n_epochs=1))
    from nnx_lab.engine.train_job import _KEYWORDS

    assert set(_KEYWORDS) <= set(inspect.signature(NNModel.train).parameters)


def test_stop_ends_the_running_job_and_skips_the_queued(monitor, tmp_path):
    started = threading.Event()

    class Slow:
        def on_step_ended(self, event):
            started.set()
            time.sleep(0.02)

    root = tmp_path / "runs"
    jobs = {n: TrainJob(_model(), _params(root, n_epochs=50), salt=n) for n in "abc"}
    monitor.race(jobs, callbacks=[Slow()])
    assert started.wait(60)
    monitor._dispatch_frontend_msg(monitor, {"kind": "stop"}, [])  # the Stop button
    results = monitor.wait(timeout=120)
    assert [r["status"] for r in monitor.runs] == ["stopped", "skipped", "skipped"]
    assert list(results) == ["a"]
    assert results["a"].status.value == "stopped"
    assert [p.name for p in root.iterdir()] == [results["a"].id]  # b and c never started


def test_a_failing_job_is_shown_and_the_race_goes_on(monitor, tmp_path):
    def broken_step(ctx):
        raise RuntimeError("the step broke")

    root = tmp_path / "runs"
    jobs = {"broken": TrainJob(_model(), _params(root), train_step_fn=broken_step)}
    jobs["fine"] = TrainJob(_model(), _params(root))
    results = monitor.race(jobs).wait(timeout=120)
    assert [r["status"] for r in monitor.runs] == ["failed", "finished"]
    assert "the step broke" in monitor.runs[0]["error"]
    assert "[broken]" in monitor.error
    assert list(results) == ["fine"]
    assert isinstance(monitor.race_errors["broken"], RuntimeError)


def test_jobs_and_plans_race_together(monitor, tmp_path):
    plan = toy_plan(str(tmp_path / "runs"), 2)
    job = TrainJob(_model(), _params(tmp_path / "runs"))
    results = monitor.race({"plan": plan, "job": job}).wait(timeout=120)
    assert results["plan"].run.id == plan.expected_run_id()  # a FitResult
    assert results["job"].id == job.model.last_run.id  # an NNRun
    assert [r["status"] for r in monitor.runs] == ["finished", "finished"]
    with pytest.raises(TypeError, match=r"nor an nnx_lab\.TrainJob"):
        monitor.race({"x": object()})
