"""The Sweep widget's Optuna search: trials asked one at a time, raced in one monitor.

A race draws its lanes up front, but an Optuna sampler names trial *i* only once trial
*i - 1* has been told its result. So each lane holds an ``AskedPlan``: the base plan
(what the race validates and names the lane by) whose ``fit`` asks the sampler for the
trial's values when the lane's turn comes, fits that trial's plan with the lane's sinks
(and the pruning sink), and tells the sampler how it ended. A trial whose run is already
on disk (finished, or pruned) is read, its history replayed to the pruner, and its lane
marked skipped with that reason: it is not retrained.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..plans import ExperimentPlan
from ..plans._sweep import SweepTrial, _checked, _trial_plan, read_done
from ..runs import resolve_runs_root

__all__ = ["AskedPlan", "TrialAsker"]


class AskedPlan(ExperimentPlan):
    """The base plan, whose ``fit`` is one asked trial's (``TrialAsker.fit``)."""

    __slots__ = ("_fit_trial",)

    @classmethod
    def of(cls, base: ExperimentPlan, fit_trial: Callable[..., Any]) -> AskedPlan:
        new = object.__new__(cls)
        for name in ExperimentPlan.__slots__:
            object.__setattr__(new, name, getattr(base, name))
        object.__setattr__(new, "_fit_trial", fit_trial)
        return new

    def fit(self, callbacks: Any = (), **kwargs: Any) -> Any:  # type: ignore[override]
        return self._fit_trial(list(callbacks), kwargs)


class TrialAsker:
    """Asks, fits and tells the trials of one widget sweep, in turn."""

    def __init__(self, widget: Any, base: ExperimentPlan, pairs: Iterator, sampler: Any):
        self.widget, self.base, self.pairs, self.sampler = widget, base, pairs, sampler

    def plans(self, start: int, count: int) -> dict[str, AskedPlan]:
        return {
            f"trial {i}": AskedPlan.of(self.base, lambda cbs, kw, i=i: self.fit(i, cbs, kw))
            for i in range(start, start + count)
        }

    def fit(self, index: int, callbacks: list[Any], kwargs: dict[str, Any]) -> Any:
        widget = self.widget
        result = widget._result
        objective, direction = result.objective, result.direction
        values, seed = next(self.pairs)  # Optuna asks now: the last trial was told
        result.study = self.sampler.study
        plan = _trial_plan(self.base, values, seed)
        trial = SweepTrial(index, dict(values), seed, plan)
        with widget._lock:
            result.trials.append(trial)
        try:
            _checked(plan, index, values)
            trial.run_id = plan.expected_run_id()
            widget._by_run[trial.run_id] = trial
            widget._publish()
            done = read_done(trial, resolve_runs_root(plan.value("train.runs_root")))
            if done is not None:
                self.sampler.replay(done.epochs, objective, direction)
                callbacks[0].skip(f"{trial.status}: read from its run on disk")
                return None
            prune = self.sampler.sink(objective, direction)
            sinks = [*callbacks, *([prune] if prune is not None else [])]
            out = plan.fit(callbacks=sinks, **kwargs)
            trial.metrics = {k: dict(m.values) for k, m in out.metrics.items()}
            trial.status = out.run.status.value
            if trial.status == "stopped" and prune is not None and prune.pruned:
                trial.status = "pruned"
            return out
        except Exception as exc:  # the race records it on the lane; the trial too
            trial.status, trial.error = "failed", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self.sampler.tell(trial, objective, direction)
            widget._publish()
