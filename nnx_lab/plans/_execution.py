"""What a plan runs: ``materialize`` (seed, call the factories once, build the model),
``fit`` (``NNModel.train`` with the plan's files written into the run directory), the
LR sweep on the model a fit would build, and the run id a fit would give.

Every function here is called by ``ExperimentPlan`` after its checks, and loads the
engine only when it runs (importing a plan loads no torch).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import DataError
from ..runs import effective_status, emit, read_record, reporting, run_dir
from ._binding import BindingReport
from ._fields import Resolved
from ._problems import PlanError
from ._record import BINDING_FILE, PLAN_FILE, Record
from ._sources import Source
from ._validation import source_problem

__all__ = [
    "FitResult",
    "SplitMetrics",
    "existing_run",
    "expected_run_id",
    "fit_plan",
    "materialize",
    "plan_model",
    "sweep_lr",
]


@dataclass(frozen=True)
class SplitMetrics:
    """One split's metrics from the run's final epoch (``values["loss"]``, ...)."""

    split: str
    epoch: int
    values: dict[str, float | None]
    samples: int | None = None


@dataclass(frozen=True)
class FitResult:
    """What ``plan.fit()`` returns. ``metrics["val"].values["loss"]`` is read from the
    run's final epoch (no second pass over a loader); ``attempt_id`` names this fit."""

    model: Any
    run: Any
    metrics: dict[str, SplitMetrics]
    attempt_id: str


class _Fitted(Protocol):
    """What ``fit_plan`` asks of the plan it fits (an ``ExperimentPlan``)."""

    def materialize(self) -> tuple[Any, Any, list[Any]]: ...

    def to_json(self) -> dict[str, Any]: ...

    def _record(self, now: bool, *, mode: str | None = None) -> Record: ...


def plan_model(r: Resolved) -> Any:
    """The model a fit builds: a built-in network under the plan's seed, a spec's under
    its own (``NNModel`` refuses ``init_seed`` with a spec), as ``NNModel`` would."""
    from ..engine.model import NNModel
    from ..engine.registry import ModelSpec

    if isinstance(r.model.net, ModelSpec):
        return NNModel(params=r.model)
    return NNModel(r.net, r.model, init_seed=r.train.seed)


def materialize(
    resolved: Resolved, data: tuple[Source | None, Source | None], callbacks: tuple[Source, ...]
) -> tuple[Any, Any, list[Any]]:
    """``(model, train_params, callbacks)``: seeds, calls the factories once (a
    factory's loader is checked like an instance, without reading it) and builds the
    model; early stopping comes first among the callbacks."""
    from ..engine.training_state import seed_everything

    r = resolved
    seed_everything(r.train.seed)
    train_loader, val_loader = (
        _made(s, role) for s, role in zip(data, ("data.train", "data.val"), strict=True)
    )
    made: list[Any] = []
    if r.early_stopping is not None:
        from ..engine.handlers import EarlyStopping

        made.append(EarlyStopping(**r.early_stopping))
    made += [cb.make() for cb in callbacks]
    model = plan_model(r)
    return model, r.train.replace(train_loader=train_loader, val_loader=val_loader), made


def fit_plan(
    plan: _Fitted,
    binding: BindingReport,
    callbacks: list[Any],
    control: Any,
    provenance: Any,
    report: bool | None,
) -> FitResult:
    """Train what ``plan.materialize()`` builds, with the plan's callbacks, then
    ``callbacks``, then the recorder of ``plan.json`` and ``binding.json``."""
    model, params, made = plan.materialize()
    recorder = _PlanRecorder(plan, binding, model, report)
    with reporting(report):  # fit(report=False) silences train()'s lines as well
        run = model.train(
            params,
            callbacks=[*made, *callbacks, recorder],
            control=control,
            provenance=provenance,
        )
    return FitResult(model, run, _final_metrics(run), recorder.attempt_id)


def sweep_lr(resolved: Resolved, train: Source, kwargs: dict[str, Any]) -> Any:
    """``nnx_lab.lr_finder`` on the network a fit would build (its seed, loss and
    precision policy), the plan's optimizer unless ``kwargs`` names one, and a fresh
    training loader; the caller's random streams are restored afterwards."""
    from ..engine.training_state import preserved_rng, seed_everything
    from ..lr_sweep import lr_finder

    r = resolved
    with preserved_rng():
        seed_everything(r.train.seed)
        train_loader = train.make()
        model = plan_model(r)
        kwargs.setdefault("optimizer", r.train.optim)
        kwargs.setdefault("precision", model.precision)
        loss = model.loss_fn.kind or model.loss_fn.custom
        return lr_finder(model.net, train_loader, loss, **kwargs)


def expected_run_id(resolved: Resolved, data: Iterable[Source | None]) -> str:
    """The run id a fit would give now: the factories are called (under a saved and
    restored RNG) and a throwaway model built to hash its initial weights."""
    from ..engine.training_state import preserved_rng, seed_everything

    r = resolved
    with preserved_rng():
        seed_everything(r.train.seed)
        train_loader, val_loader = (None if s is None else s.make() for s in data)
        model = plan_model(r)
    params = r.train.replace(train_loader=train_loader, val_loader=val_loader)
    return model.expected_run_id(params)


def existing_run(runs_root: Path, run_id: str) -> str | None:
    """The status of run ``run_id`` under the resolved ``runs_root`` if it exists, else
    None."""
    path = run_dir(runs_root, run_id) / "metadata.yaml"
    if not path.is_file():
        return None
    return effective_status(read_record(path))


def _final_metrics(run: Any) -> dict[str, SplitMetrics]:
    if not run.epochs:
        return {}
    last = run.epochs[-1]
    out = {}
    for split in ("train", "val"):
        data = last.get(split)
        if data:
            values = {k: v for k, v in data.items() if k != "samples"}
            out[split] = SplitMetrics(split, int(last["epoch"]), values, data.get("samples"))
    return out


@dataclass
class _PlanRecorder:
    """Writes ``plan.json`` and ``binding.json`` into the run directory when the run
    starts, and prints the binding report once."""

    plan: _Fitted
    binding: BindingReport
    model: Any
    report: bool | None = None
    attempt_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def on_run_started(self, event: Any) -> None:
        from ..runs import atomic_write_json

        provenance = getattr(self.model.last_run, "provenance", None)
        if provenance is not None:
            self.attempt_id = provenance.attempt.attempt_id
        try:
            plan_json: dict[str, Any] | None = self.plan.to_json()
            not_portable: list[dict[str, Any]] = []
        except PlanError as exc:
            plan_json, not_portable = None, exc.problems.to_json()
        folder = Path(event.run_dir)
        atomic_write_json(
            folder / PLAN_FILE,
            {
                "format": 1,
                "run_id": event.run_id,
                "attempt_id": self.attempt_id,
                "plan": plan_json,
                "not_portable": not_portable,
                "record": self.plan._record(now=False, mode="fit").to_json(),
            },
        )
        atomic_write_json(
            folder / BINDING_FILE,
            {"run_id": event.run_id, "attempt_id": self.attempt_id, **self.binding.to_json()},
        )
        emit(f"{self.binding}\n  -> run {event.run_id}", self.report)


def _made(src: Source | None, role: str) -> Any:
    """What a data source gives for this fit; a factory's result is checked like an
    instance (without reading it)."""
    if src is None:
        return None
    loader = src.make()
    if src.kind == "factory":
        problem = source_problem(loader, role)
        if problem is not None:
            raise DataError(
                role,
                f"{src.name}() returned {_describe(loader)}",
                problem.fix.replace(
                    "pass a factory (a function returning a loader) or a", "return a"
                ),
            )
    return loader


def _describe(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__}"
