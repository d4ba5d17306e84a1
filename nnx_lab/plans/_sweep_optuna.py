"""An Optuna sampler driving a sweep through Optuna's ask-and-tell interface. Loaded
only when a sweep is given a sampler, so nnx-lab does not depend on Optuna.

Choices go to Optuna as their indices (a choice such as ``[64, 32]`` is not a value
Optuna's categorical distribution stores); each trial is told its final objective, or
that it failed, before the next one is asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._sweep_space import Distribution, SweepSpace

__all__ = ["OptunaSearch"]


class OptunaSearch:
    def __init__(self, sampler: Any, space: SweepSpace, n_trials: int) -> None:
        import optuna

        self._optuna = optuna
        self.space, self.n_trials = space, n_trials
        self.study: Any = None
        self._sampler = sampler
        self._asked: Any = None

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
        self.study = self._optuna.create_study(sampler=self._sampler, direction="minimize")
        dists = self._distributions()
        for _ in range(self.n_trials):
            self._asked = self.study.ask(dists)
            values = {}
            for p in self.space.paths:
                e, v = self.space.entries[p], self._asked.params[p]
                values[p] = v if isinstance(e, Distribution) else e[v]
            yield values

    def tell(self, trial: Any, objective: str, direction: str) -> None:
        value = trial.metric(objective)
        state = self._optuna.trial.TrialState
        if value is None or value != value:
            self.study.tell(self._asked, state=state.FAIL)
            return
        self.study.tell(self._asked, value if direction == "min" else -value)
