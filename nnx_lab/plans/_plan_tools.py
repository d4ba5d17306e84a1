"""The tools a plan hands itself to: an LR sweep, a sweep of trials and a pre-flight.
A mixin of ``ExperimentPlan`` (it calls the plan's own ``validate``, ``_resolved_plan``
and ``materialize``); each tool's work is in its own module."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import _execution
from ._problems import Problems

__all__ = ["PlanTools"]


class PlanTools:
    def lr_finder(self, **kwargs: Any) -> Any:
        """An LR sweep (``nnx_lab.lr_finder``, docs/lr_finder.md) on the model ``fit()``
        would build (the same seed, loss and precision policy) with the plan's optimizer
        kind and settings, on a fresh training loader from the plan's data. Nothing is
        written, and your random streams are as they were afterwards; pass the pick on
        with ``plan.with_lr(result.suggested_lr)``."""
        problems = [p for p in self.validate() if not p.field.startswith("callbacks")]
        Problems(problems).raise_for_errors()
        plan = self._resolved_plan(skip=("callbacks",))
        train = plan._data[0]
        assert train is not None  # validate() refuses a plan without training data
        return _execution.sweep_lr(plan._resolve(), train, kwargs)

    def sweep(
        self,
        space: Mapping[str, Any],
        n_trials: int | None = None,
        search: Any = "grid",
        seed: int = 0,
        *,
        sampler: Any = None,
        pruner: Any = None,
        **options: Any,
    ) -> Any:
        """Fit trials of this plan over ``space`` one after another (docs/sweeps.md):
        ``{path: [choices]}`` or ``{path: loguniform(lo, hi)}``; ``search`` is
        ``"grid"``, ``"random"`` or an Optuna sampler (``sampler=`` says the same);
        ``pruner``, an Optuna pruner, stops trials it prunes (their runs kept). Every
        trial is checked before the first fit; a trial whose run already finished (or
        was pruned) is read, not retrained. Returns a ``SweepResult``; ``options``:
        ``seeds``, ``objective``, ``direction``, ``callbacks``, ``on_trial``."""
        from ._sweep import run_sweep, sampler_search

        search = sampler_search(search, sampler)
        return run_sweep(
            self, space, n_trials=n_trials, search=search, seed=seed, pruner=pruner, **options
        )

    def preflight(self, **kwargs: Any) -> Any:
        """``nnx_lab.preflight`` on the model ``fit()`` would build (docs/health.md):
        data, gradients, overfitting one batch, an LR sweep; nothing is written."""
        from ..preflight import preflight

        model, params, _ = self.materialize()
        return preflight(model, params, **kwargs)
