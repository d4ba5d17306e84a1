"""``ExperimentPlan.sweep``: trials of a plan over a search space, fitted one after
another, each with its own recorded seed, and read back instead of retrained when its
run already finished under the runs root.

Run ids are content addressed (the config, the data identity and the initial weights),
so the trial plan alone says which run it would write: a sweep cut short by a kernel
restart is resumed by calling it again, and the finished trials cost a model build and
a log read each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..runs import resolve_runs_root
from ._problems import PlanError, Problem, Problems, json_safe
from ._sweep_space import SweepSpace, check_count

__all__ = ["SweepResult", "SweepTrial", "plan_trials", "read_done", "run_sweep", "sampler_search"]

SEEDS = ("per_trial", "same")


@dataclass
class SweepTrial:
    """One trial: its ``values`` by path, ``seed``, ``run_id``, ``status`` (``pending``,
    ``finished``, ``reused``: read from a finished run, ``failed``), the final
    ``metrics`` (``{"val": {"loss": ...}, ...}``) and ``error``; ``plan`` is the trial's
    plan (what "Branch from the best" loads)."""

    index: int
    values: dict[str, Any]
    seed: int
    plan: Any = field(repr=False)
    run_id: str | None = None
    status: str = "pending"
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None

    @property
    def name(self) -> str:
        return f"trial {self.index}"

    def metric(self, key: str) -> float | None:
        """``"val.loss"``: the final value of ``loss`` on ``val``, None if absent."""
        split, _, name = key.partition(".")
        v = self.metrics.get(split, {}).get(name)
        return float(v) if isinstance(v, (int, float)) else None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "values": {k: json_safe(v) for k, v in self.values.items()},
            "seed": self.seed,
            "run_id": self.run_id,
            "status": self.status,
            "metrics": self.metrics,
            "error": self.error,
        }


@dataclass
class SweepResult:
    """The trials in order, the space and the objective (``"val.loss"``, ``"min"``);
    ``study``: the Optuna study of an Optuna search (its trials' states and reported
    values), else None."""

    trials: list[SweepTrial]
    space: SweepSpace
    objective: str
    direction: str
    study: Any = field(default=None, repr=False)

    def done(self) -> list[SweepTrial]:
        return [t for t in self.trials if t.status in ("finished", "reused")]

    def best(self, objective: str | None = None, direction: str | None = None) -> SweepTrial:
        """The trial with the best final ``objective`` among those with a value."""
        key, way = objective or self.objective, direction or self.direction
        scored = [(t.metric(key), t) for t in self.done()]
        scored = [(v, t) for v, t in scored if v is not None and v == v]
        if not scored:
            raise ConfigError(
                "objective",
                key,
                "no finished trial has this metric: "
                "pass one of its splits' metrics, e.g. 'train.loss'",
            )
        pick = min if way == "min" else max
        return pick(scored, key=lambda vt: vt[0])[1]

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per trial: its values, seed, run id, status and metrics
        (``val.loss``): the parallel coordinates' data."""
        out = []
        for t in self.trials:
            row: dict[str, Any] = {
                "trial": t.index,
                "seed": t.seed,
                "run_id": t.run_id,
                "status": t.status,
            }
            row.update({k: json_safe(v) for k, v in t.values.items()})
            for split, m in t.metrics.items():
                row.update({f"{split}.{k}": v for k, v in m.items()})
            out.append(row)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "space": self.space.to_json(),
            "objective": self.objective,
            "direction": self.direction,
            "trials": [t.to_json() for t in self.trials],
        }


def sampler_search(search: Any, sampler: Any) -> Any:
    """``sampler=`` is ``search=`` spelled for an Optuna sampler; both at once is refused."""
    if sampler is None:
        return search
    if search != "grid":
        raise ConfigError(
            "sampler", sampler, f"pass the sampler once: search={search!r} was given too"
        )
    if not hasattr(sampler, "sample_independent"):
        raise ConfigError(
            "sampler", sampler, "pass an Optuna sampler (optuna.samplers.TPESampler(seed=0))"
        )
    return sampler


def _trial_plan(base: Any, values: Mapping[str, Any], seed: int | None) -> Any:
    plan = base.with_values(dict(values))
    return plan if seed is None else plan.with_seed(seed)


def _checked(plan: Any, index: int, values: Mapping[str, Any]) -> None:
    problems = plan.validate()
    if problems:
        shown = ", ".join(f"{k}={json_safe(v)!r}" for k, v in values.items())
        raise PlanError(
            Problems(
                Problem(p.field, p.value, f"{p.fix} (sweep trial {index}: {shown})")
                for p in problems
            )
        )


def plan_trials(
    base: Any,
    space: Any,
    n_trials: Any,
    search: Any,
    seed: int,
    seeds: str,
    pruner: Any = None,
) -> tuple[SweepSpace, Iterator[tuple[dict[str, Any], int]], Any]:
    """The checked space, an iterator of ``(values, trial seed)``, and the sampler that
    is told each result (None for grid and random). A grid or random search is drawn
    and every trial plan validated here, before anything runs."""
    optuna_search = hasattr(search, "sample_independent")
    if pruner is not None and not (optuna_search and hasattr(pruner, "prune")):
        raise ConfigError(
            "pruner",
            pruner,
            "pass an Optuna pruner (optuna.pruners.MedianPruner()) with an Optuna sampler "
            "as search (optuna.samplers.TPESampler(seed=0)); grid and random searches "
            "do not prune",
        )
    checked = SweepSpace.of(space)
    n = check_count(n_trials)
    if seeds not in SEEDS:
        raise ConfigError("seeds", seeds, f"pass one of {', '.join(SEEDS)}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError("seed", seed, "pass an integer: the search's own seed")
    base.validate().raise_for_errors()
    base_seed = base.value("train.seed")
    swept_seed = "train.seed" in checked.paths

    def seed_of(i: int, values: Mapping[str, Any]) -> int:
        if swept_seed:
            return int(values["train.seed"])
        return base_seed + i if seeds == "per_trial" else base_seed

    if search == "grid":
        drawn = checked.grid(n)
    elif search == "random":
        drawn = checked.random(n, seed)
    elif optuna_search:  # an Optuna sampler: imported only then
        from ._sweep_optuna import OptunaSearch

        if n is None:
            raise ConfigError("n_trials", None, "an Optuna search needs n_trials, e.g. 12")
        opt = OptunaSearch(search, checked, n, pruner)
        return checked, ((v, seed_of(i, v)) for i, v in enumerate(opt.values())), opt
    else:
        raise ConfigError(
            "search",
            search,
            "pass 'grid', 'random' or an Optuna sampler (optuna.samplers.TPESampler(seed=0))",
        )
    pairs = [(v, seed_of(i, v)) for i, v in enumerate(drawn)]
    for i, (values, s) in enumerate(pairs):
        _checked(_trial_plan(base, values, s), i, values)
    return checked, iter(pairs), None


def read_done(trial: SweepTrial, root: Any) -> Any:
    """Fill ``trial`` from its run on disk if that run finished (``reused``) or was
    stopped by a pruner (``pruned``); the log is read, the model is not trained. The
    run (``NNRun``), or None when the trial is still to train."""
    from ..engine.run_handle import NNRun
    from ._execution import _final_metrics, existing_run
    from ._sweep_optuna import PRUNED_REASON  # no optuna import: a constant

    status = existing_run(root, trial.run_id)
    if status not in ("finished", "stopped"):
        return None
    run = NNRun.load(trial.run_id, root)
    if status == "stopped" and run.metadata.get("stop_reason") != PRUNED_REASON:
        return None  # stopped by hand: fit() refuses it, as any existing run
    trial.metrics = {s: dict(m.values) for s, m in _final_metrics(run).items()}
    trial.status = "reused" if status == "finished" else "pruned"
    return run


def _read_finished(trial: SweepTrial, root: Any) -> bool:
    return read_done(trial, root) is not None


def run_sweep(
    base: Any,
    space: Any,
    *,
    n_trials: Any = None,
    search: Any = "grid",
    seed: int = 0,
    seeds: str = "per_trial",
    objective: str = "val.loss",
    direction: str = "min",
    pruner: Any = None,
    fit: Callable[[SweepTrial, list[Any]], Any] | None = None,
    on_trial: Callable[[SweepTrial, SweepResult], None] | None = None,
    callbacks: Iterable[Any] = (),
) -> SweepResult:
    """Fit every trial one after another (``fit(trial, sinks)`` returns its
    ``FitResult``; default ``trial.plan.fit(report=False, callbacks=sinks)``, ``sinks``
    being ``callbacks`` and the trial's pruning sink); ``on_trial`` is called as each
    ends. ``pruner``: an Optuna pruner, with an Optuna sampler as ``search``."""
    if direction not in ("min", "max"):
        raise ConfigError("direction", direction, "pass 'min' or 'max'")
    if not isinstance(objective, str) or "." not in objective:
        raise ConfigError("objective", objective, "pass 'split.metric', e.g. 'val.loss'")
    checked, pairs, sampler = plan_trials(base, space, n_trials, search, seed, seeds, pruner)
    result = SweepResult([], checked, objective, direction)
    callbacks = list(callbacks)
    for i, (values, s) in enumerate(pairs):
        if sampler is not None:
            result.study = sampler.study  # made when the first trial is asked for
        plan = _trial_plan(base, values, s)
        if sampler is not None:
            _checked(plan, i, values)
        trial = SweepTrial(i, dict(values), s, plan)
        result.trials.append(trial)
        try:
            trial.run_id = plan.expected_run_id()
            root = resolve_runs_root(plan.value("train.runs_root"))
            done = read_done(trial, root)
            if done is not None:
                if sampler is not None:
                    sampler.replay(done.epochs, objective, direction)
            else:
                prune = sampler.sink(objective, direction) if sampler is not None else None
                sinks = [*callbacks, *([prune] if prune is not None else [])]
                out = (
                    fit(trial, sinks)
                    if fit is not None
                    else plan.fit(report=False, callbacks=sinks)
                )
                trial.run_id = out.run.id
                trial.metrics = {k: dict(m.values) for k, m in out.metrics.items()}
                trial.status = out.run.status.value
                if trial.status == "stopped" and prune is not None and prune.pruned:
                    trial.status = "pruned"
        except Exception as exc:  # a failed trial is recorded; the sweep goes on
            trial.status, trial.error = "failed", f"{type(exc).__name__}: {exc}"
        if sampler is not None:
            sampler.tell(trial, objective, direction)
        if on_trial is not None:
            on_trial(trial, result)
    return result
