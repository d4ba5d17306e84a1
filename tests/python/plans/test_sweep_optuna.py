"""A sweep driven by an Optuna-style sampler through ask-and-tell, without Optuna
installed: a stand-in module with Optuna's names records what the sweep asks and
tells (the real library was run by hand: docs/sweeps.md, "Optuna")."""

from __future__ import annotations

import sys
import types

import pytest
from plan_factories import toy_plan

from nnx_lab.errors import ConfigError
from nnx_lab.plans import loguniform


class _Trial:
    def __init__(self, params):
        self.params = params


class _Study:
    def __init__(self, sampler, direction):
        self.sampler, self.direction, self.told = sampler, direction, []

    def ask(self, distributions):
        self.sampler.asked.append(dict(distributions))
        n = len(self.told)
        return _Trial({"train.optim.max_lr": 10.0 ** -(2 + n % 2), "net.hidden_dims": n % 2})

    def tell(self, trial, value=None, state=None):
        self.told.append((trial.params, value, state))


class _Sampler:
    def __init__(self):
        self.asked, self.studies = [], []

    def sample_independent(self, *args):  # what marks an Optuna sampler
        raise AssertionError("the stand-in study samples")


@pytest.fixture
def fake_optuna(monkeypatch):
    mod = types.ModuleType("optuna")

    def create_study(sampler, direction):
        study = _Study(sampler, direction)
        sampler.studies.append(study)
        return study

    mod.create_study = create_study
    mod.distributions = types.SimpleNamespace(
        FloatDistribution=lambda lo, hi, log=False: ("float", lo, hi, log),
        CategoricalDistribution=lambda choices: ("categorical", tuple(choices)),
    )
    mod.trial = types.SimpleNamespace(TrialState=types.SimpleNamespace(FAIL="FAIL"))
    monkeypatch.setitem(sys.modules, "optuna", mod)
    return mod


SPACE = {"train.optim.max_lr": loguniform(1e-4, 1e-1), "net.hidden_dims": [[8], [16, 8]]}


def test_sampler_is_asked_and_told_each_trial_in_turn(tmp_path, fake_optuna):
    sampler = _Sampler()
    res = toy_plan(tmp_path / "runs", 1).sweep(SPACE, n_trials=3, search=sampler)
    (study,) = sampler.studies
    assert sampler.asked[0] == {
        "train.optim.max_lr": ("float", 1e-4, 1e-1, True),
        "net.hidden_dims": ("categorical", (0, 1)),
    }
    # a choice goes to Optuna as its index and comes back as the choice
    assert [t.values["net.hidden_dims"] for t in res.trials] == [[8], [16, 8], [8]]
    assert [t.values["train.optim.max_lr"] for t in res.trials] == [1e-2, 1e-3, 1e-2]
    assert [t.status for t in res.trials] == ["finished"] * 3
    assert [v for _, v, _ in study.told] == [t.metric("val.loss") for t in res.trials]


def test_direction_max_is_told_negated_and_a_failed_trial_as_fail(tmp_path, fake_optuna):
    sampler = _Sampler()
    plan = toy_plan(tmp_path / "runs", 1)
    res = plan.sweep(SPACE, n_trials=2, search=sampler, objective="val.accuracy", direction="max")
    told = [v for _, v, _ in sampler.studies[0].told]
    assert told == [-t.metric("val.accuracy") for t in res.trials]
    sampler = _Sampler()
    res = plan.sweep(SPACE, n_trials=1, search=sampler, objective="val.nothing")
    assert sampler.studies[0].told[0][2] == "FAIL"


def test_optuna_needs_n_trials_and_is_never_imported_otherwise(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "optuna", raising=False)
    plan = toy_plan(tmp_path / "runs", 1)
    with pytest.raises(ConfigError) as info:
        plan.sweep(SPACE, search=_Sampler())
    assert info.value.field == "n_trials"
    plan.sweep({"train.optim.max_lr": [1e-3]})
    assert "optuna" not in sys.modules
