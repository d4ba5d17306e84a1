"""An Optuna sampler (and pruner) driving a sweep through Optuna's ask-and-tell
interface. Loaded only when a sweep is given a sampler, so nnx-lab does not depend on
Optuna.

Choices go to Optuna as their indices (a choice such as ``[64, 32]`` is not a value
Optuna's categorical distribution stores); each trial is told its final objective, that
it failed, or that it was pruned, before the next one is asked for. With a pruner, a
sink reports the objective to the Optuna trial at every epoch end and, when the pruner
says so, stops the run through the engine's own stop path (``TrainingControl``): the
run is kept, ``stopped`` with the reason ``PRUNED_REASON``, and its trial is ``pruned``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._sweep_space import Distribution, SweepSpace

__all__ = ["PRUNED_REASON", "OptunaSearch", "PruneSink"]

# the stop reason a pruned trial's run records: what a resumed sweep reads it back by
PRUNED_REASON = "pruned by the sweep's Optuna pruner"


def _objective_value(epoch: dict[str, Any], objective: str, direction: str) -> float | None:
    """The objective at one epoch (``EpochEnded.to_json()`` form), as Optuna minimizes."""
    split, _, name = objective.partition(".")
    v = (epoch.get(split) or {}).get(name)
    if not isinstance(v, (int, float)) or v != v:
        return None
    return float(v) if direction == "min" else -float(v)


class PruneSink:
    """Reports the objective to one Optuna trial at each epoch end; stops the run when
    the pruner prunes it. One per trial (``OptunaSearch.sink``)."""

    def __init__(self, asked: Any, objective: str, direction: str) -> None:
        self.asked, self.objective, self.direction = asked, objective, direction
        self.control: Any = None
        self.pruned = False

    def on_attach(self, control: Any) -> None:
        self.control = control

    def on_epoch_ended(self, event: Any) -> None:
        if self.pruned:
            return
        value = _objective_value(event.to_json(), self.objective, self.direction)
        if value is None:
            return
        self.asked.report(value, int(event.epoch))
        if self.asked.should_prune() and self.control is not None:
            self.pruned = True
            self.control.request_stop(PRUNED_REASON)


class OptunaSearch:
    def __init__(self, sampler: Any, space: SweepSpace, n_trials: int, pruner: Any = None) -> None:
        import optuna

        self._optuna = optuna
        self.space, self.n_trials = space, n_trials
        self.study: Any = None
        self._sampler, self._pruner = sampler, pruner
        self._asked: Any = None
        self._sink: PruneSink | None = None

    def _distributions(self) -> dict[str, Any]:
        d = self._optuna.distributions
        out = {}
        for p in self.space.paths:
            e = self.space.entries[p]
            if isinstance(e, Distribution):
                out[p] = d.FloatDistribution(e.low, e.high, log=e.kind == "loguniform")
            else:
                out[p] = d.CategoricalDistribution(list(range(len(e))))
        return out

    def values(self) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {"sampler": self._sampler, "direction": "minimize"}
        if self._pruner is not None:
            kwargs["pruner"] = self._pruner
        self.study = self._optuna.create_study(**kwargs)
        dists = self._distributions()
        for _ in range(self.n_trials):
            self._asked = self.study.ask(dists)
            self._sink = None
            values = {}
            for p in self.space.paths:
                e, v = self.space.entries[p], self._asked.params[p]
                values[p] = v if isinstance(e, Distribution) else e[v]
            yield values

    def sink(self, objective: str, direction: str) -> PruneSink | None:
        """The pruning sink of the trial just asked for (None without a pruner)."""
        if self._pruner is None:
            return None
        self._sink = PruneSink(self._asked, objective, direction)
        return self._sink

    def replay(self, epochs: list[dict[str, Any]], objective: str, direction: str) -> None:
        """A trial read from its run on disk: report its epochs' objective as the live
        trial did, so the pruner's history (and so its later decisions) is the same."""
        if self._pruner is None:
            return
        for epoch in epochs:
            value = _objective_value(epoch, objective, direction)
            if value is not None:
                self._asked.report(value, int(epoch["epoch"]))

    def tell(self, trial: Any, objective: str, direction: str) -> None:
        state = self._optuna.trial.TrialState
        if trial.status == "pruned":
            self.study.tell(self._asked, state=state.PRUNED)
            return
        value = trial.metric(objective)
        if value is None or value != value:
            self.study.tell(self._asked, state=state.FAIL)
            return
        self.study.tell(self._asked, value if direction == "min" else -value)
