"""Trainer runs raced live (issue 25 follow-up): ``TrainJob(trainer, trainer_params,
trainer_step_fn= | objective=)`` in ``TrainingMonitor.race``, checked by
``Trainer.check`` (``Trainer.train``'s own refusals) before the first run starts, the
same run as ``Trainer.train`` alone, and each optimizer's lr in its lane."""

from __future__ import annotations

import functools
import inspect
import json
import math

import pytest
import torch
from step_factories import mlp_model, tabular_params
from test_monitor_trainer import _sent_columns
from trainer_factories import (
    ac_model,
    ac_optims,
    ac_two_terms,
    gan_model,
    gan_step,
    mixture,
    optims,
)
from trainer_factories import trainer_params as _trainer_params

from nnx_lab import (
    NNModel,
    NNSchedulerParams,
    NNTrainerParams,
    NNTrainParams,
    Objective,
    Trainer,
    TrainJob,
)
from nnx_lab.errors import ConfigError
from nnx_lab.plans import PlanError
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend

pytestmark = pytest.mark.usefixtures("one_torch_thread")

_SCHED = {"G": NNSchedulerParams(patience=0, factor=0.5, threshold=1.0)}


def _step():
    """The GAN step, one object per job: two jobs of a race never share a step (the
    run id counts it by ``gan_step``'s code, as the plain function)."""
    return functools.partial(gan_step)


def _ac_params(root):
    return NNTrainerParams(
        optims=ac_optims(), train_loader=mixture(), runs_root=str(root), progress=False, log_every=1
    )


def _jobs(root):
    """A GAN stepped by a trainer_step_fn (G's rate halved after epoch 1), a faster D,
    and an actor-critic objective: each with its own model and Trainer."""
    return {
        "slow D": TrainJob(
            Trainer(gan_model()),
            _trainer_params(root, schedulers=_SCHED),
            trainer_step_fn=_step(),
        ),
        "fast D": TrainJob(
            Trainer(gan_model()),
            _trainer_params(root, optims=optims(d_lr=4e-3)),
            trainer_step_fn=_step(),
        ),
        "actor-critic": TrainJob(
            Trainer(ac_model()), _ac_params(root), objective=Objective(ac_two_terms)
        ),
    }


def _alone(root):
    """The same three runs by ``Trainer.train`` itself, with fresh objects:
    ``{name: (NNRun, NNModel)}``."""
    return {
        name: (job.trainer.train(job.params, **job.keywords), job.model)
        for name, job in _jobs(root).items()
    }


def _records(run):
    """The run's log less what two runs of it differ by: the clock (``time``,
    ``seconds``) and the runs root in its paths."""
    root = str(run.run_dir.parent)
    lines = (run.run_dir / "metrics.jsonl").read_text().replace(root, "<root>").splitlines()
    return [
        {k: v for k, v in x.items() if k not in ("time", "seconds")} for x in map(json.loads, lines)
    ]


def _plain(col):
    return [None if math.isnan(v) else pytest.approx(v, rel=1e-6) for v in col]


@pytest.fixture
def monitor():
    m = TrainingMonitor()
    yield m
    m.close()


def test_a_raced_trainer_job_is_the_run_trainer_train_records_alone(monitor, tmp_path):
    jobs = _jobs(tmp_path / "race")
    results = monitor.race(jobs).wait(timeout=300)
    assert [r["status"] for r in monitor.runs] == ["finished"] * 3
    assert [results[n].metadata.get("name") for n in jobs] == list(jobs)
    alone = _alone(tmp_path / "alone")
    for name, job in jobs.items():
        (own, own_model), raced = alone[name], results[name]
        assert raced.id == own.id, name
        mine, theirs = job.model.net.state_dict(), own_model.net.state_dict()
        assert all(torch.equal(mine[k], theirs[k]) for k in mine), name
        assert _records(raced) == _records(own), name  # the whole log, line by line
    # the Trainers differ: D's rate, and the objective's optimizers
    assert results["slow D"].id != results["fast D"].id


def test_a_trainer_jobs_lane_draws_each_optimizers_rate_live_and_after_a_reload(monitor, tmp_path):
    jobs = _jobs(tmp_path / "runs")
    results = monitor.race(jobs).wait(timeout=300)
    slow, fast, ac = monitor._lanes
    assert _plain(slow.steps.column("lr.G")) == [1e-3] * 4 + [5e-4] * 4  # halved after 1
    assert _plain(slow.steps.column("lr.D")) == [2e-3] * 8
    assert _plain(fast.steps.column("lr.D")) == [4e-3] * 8
    assert _plain(ac.steps.column("lr.actor")) == [1e-2] * 4
    assert _plain(ac.steps.column("lr.critic")) == [1e-3] * 4
    assert ac.steps.has("term.actor")
    assert ac.steps.has("term.critic")
    assert not slow.steps.has("lr.actor")
    # each lane's rates are its run's log's
    for lane in monitor._lanes:
        logged = [x["lrs"] for x in _records(results[lane.name]) if x["event"] == "step"]
        for opt in logged[0]:
            assert _plain(lane.steps.column(f"lr.{opt}")) == [x[opt] for x in logged]
    fe = FakeFrontend(monitor)
    for _ in range(2):  # the page, then the same page reloaded
        fe.clear()
        fe.hello()
        sent = _sent_columns(fe, "lane0.steps")
        assert _plain(sent["lr.G"]) == [1e-3] * 4 + [5e-4] * 4
        assert _plain(sent["lr.D"]) == [2e-3] * 8
        assert _plain(_sent_columns(fe, "lane2.steps")["lr.critic"]) == [1e-3] * 4


def test_trainer_jobs_race_beside_model_jobs(monitor, tmp_path):
    root = tmp_path / "runs"
    jobs = {
        "gan": TrainJob(Trainer(gan_model()), _trainer_params(root), trainer_step_fn=_step()),
        "mlp": TrainJob(mlp_model(), tabular_params(root, 1, loader_seed=None, log_every=1)),
    }
    results = monitor.race(jobs).wait(timeout=300)
    assert [r["status"] for r in monitor.runs] == ["finished", "finished"]
    gan, mlp = monitor._lanes
    assert gan.steps.has("lr.G")
    assert not mlp.steps.has("lr.G")
    assert results["gan"].id == jobs["gan"].trainer.model.last_run.id


def test_every_problem_of_every_trainer_job_is_refused_at_once_and_nothing_starts(
    monitor, tmp_path
):
    root = tmp_path / "runs"
    shared, model, jobs_step = Trainer(gan_model()), gan_model(), _step()
    plain = NNTrainParams(train_loader=mixture(), runs_root=str(root), progress=False)
    jobs = {
        "fine": TrainJob(Trainer(gan_model()), _trainer_params(root), trainer_step_fn=_step()),
        "overlap": TrainJob(
            Trainer(gan_model()),
            _trainer_params(root, optims=optims(d_glob="*")),
            trainer_step_fn=_step(),
        ),
        "plain params": TrainJob(Trainer(gan_model()), plain, trainer_step_fn=_step()),
        "no step": TrainJob(Trainer(gan_model()), _trainer_params(root)),
        "a": TrainJob(shared, _trainer_params(root), trainer_step_fn=_step(), salt="a"),
        "b": TrainJob(shared, _trainer_params(root), trainer_step_fn=jobs_step, salt="b"),
        "model": TrainJob(model, plain),  # a GAN trained as one model: a fine job
        "its trainer": TrainJob(
            Trainer(model), _trainer_params(root), trainer_step_fn=_step(), salt="t"
        ),
        "its step": TrainJob(
            Trainer(gan_model()),
            _trainer_params(root),
            trainer_step_fn=jobs_step,
            salt="s",
        ),
    }
    with pytest.raises(PlanError) as info:
        monitor.race(jobs)
    problems = {p.field: p for p in info.value.problems}
    assert set(problems) == {
        "overlap: NNTrainerParams.optims['D'].param_groups",
        "plain params: params",
        "no step: trainer_step_fn",
        "b: TrainJob",
        "its trainer: TrainJob",
        "its step: TrainJob",
    }
    assert (
        "both optimizer 'G' and optimizer 'D'"
        in problems["overlap: NNTrainerParams.optims['D'].param_groups"].fix
    )
    assert problems["plain params: params"].value == "NNTrainParams"
    assert problems["b: TrainJob"].value == "Trainer"  # one problem: the Trainer, not its model
    assert "'a'" in problems["b: TrainJob"].fix
    assert problems["its trainer: TrainJob"].value == "NNModel"
    assert "'model'" in problems["its trainer: TrainJob"].fix
    assert problems["its step: TrainJob"].value == "partial"
    assert "'b'" in problems["its step: TrainJob"].fix
    # the cause is the refusal Trainer.train itself raises for the first bad job
    assert isinstance(info.value.__cause__, ConfigError)
    with pytest.raises(ConfigError, match="selected by both"):
        jobs["overlap"].run()
    assert not root.exists()  # no run directory, for any job
    assert monitor._job is None
    assert monitor.runs == []


def test_two_trainer_jobs_of_one_run_id_are_refused(monitor, tmp_path):
    root = tmp_path / "runs"
    same = {
        n: TrainJob(Trainer(gan_model()), _trainer_params(root), trainer_step_fn=_step())
        for n in ("a", "b")
    }
    with pytest.raises(PlanError) as info:
        monitor.race(same)
    (problem,) = info.value.problems
    assert problem.field == "b: run id"
    assert problem.value == same["a"].check().pre.run_id
    assert not root.exists()


def test_a_trainer_job_takes_trainer_train_keywords_only():
    trainer, params = Trainer(gan_model()), _trainer_params("unused")
    with pytest.raises(ConfigError, match="trainer_step_fn=: its optimizers are named") as info:
        TrainJob(trainer, params, train_step_fn=gan_step)
    assert info.value.field == "TrainJob"
    assert info.value.value == ["train_step_fn"]
    with pytest.raises(ConfigError, match="Stop controls"):
        TrainJob(trainer, params, trainer_step_fn=gan_step, control=object())
    with pytest.raises(ConfigError, match=r"TrainJob\(Trainer\(model\), NNTrainerParams"):
        TrainJob(gan_model(), params, trainer_step_fn=gan_step)
    with pytest.raises(ConfigError, match=r"nnx_lab\.trainer\.Trainer"):
        TrainJob(object(), params)
    job = TrainJob(trainer, params, trainer_step_fn=gan_step)
    assert job.model is trainer.model
    assert repr(job) == "TrainJob(Trainer(GAN), gan_step)"
    from nnx_lab.engine.train_job import _TRAINER_KEYWORDS

    # each keyword is one Trainer.train takes itself or passes on to NNModel.train
    takes = set(inspect.signature(Trainer.train).parameters)
    takes |= set(inspect.signature(NNModel.train).parameters)
    assert set(_TRAINER_KEYWORDS) <= takes
