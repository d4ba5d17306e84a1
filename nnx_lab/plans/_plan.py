"""``ExperimentPlan`` (§2.20): an immutable configuration you branch instead of copy.

A plan holds raw values by path (``train.optim.max_lr``), the ``with_*`` call that set
each one, its data sources and its callbacks. Nothing is checked when a value is set:
``validate()`` checks everything at once, reading no loader and building no model, and
``fit()`` refuses a plan with problems before anything exists. ``fit()`` then seeds,
calls the factories once, builds the model and calls ``NNModel.train``: the same loop and
the same run id as the equally seeded imperative script.

This module is the value and its builder; each other seam has its own module:
``_updates`` (what a ``with_*`` call sets), ``_validation``, ``_binding``,
``_plan_record`` (what a plan fixed, for the drift report), ``_execution`` (materialize,
fit, the LR sweep, the run id) and ``_plan_json``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from ..engine.enums import Losses
from ..engine.params import NNModelParams, NNOptimParams, NNSchedulerParams, NNTrainParams
from ..errors import ConfigError
from ..runs import resolve_runs_root
from . import _execution
from ._binding import BindingReport, plan_binding
from ._execution import FitResult
from ._fields import (
    EARLY_STOPPING,
    SCHEDULER,
    PlanField,
    Resolved,
    plan_fields,
    raw_defaults,
    resolve,
)
from ._locate import runs_roots
from ._net_value import net_summary
from ._plan_json import plan_from_json, plan_to_json
from ._plan_record import plan_record
from ._plan_refs import has_references, resolve_references, stand_in_values
from ._plan_tools import PlanTools
from ._problems import Problems, json_safe
from ._record import Record
from ._sources import Source, callback_source, data_source
from ._updates import (
    field_at,
    frozen,
    loss_entry,
    model_net_updates,
    net_updates,
    same_value,
    section_updates,
    train_call_updates,
    train_updates,
)
from ._validation import plan_problems

__all__ = ["ExperimentPlan"]

_UNSET: Any = object()


class ExperimentPlan(PlanTools):
    """An immutable experiment configuration: ``with_*`` returns a new plan.

    ::

        base = (ExperimentPlan()
                .with_net(net_params).with_model(model_params).with_train(train_params)
                .with_data(make_train_loader, val=make_val_loader, identity="toy")
                .with_seed(7))
        short, long = base.with_epochs(2), base.with_epochs(10)
        base.validate().raise_for_errors()
        result = base.fit()
    """

    __slots__ = ("_callbacks", "_data", "_loss", "_resolved", "_sources", "_values")

    def __init__(self) -> None:
        object.__setattr__(self, "_values", MappingProxyType({}))
        object.__setattr__(self, "_sources", MappingProxyType({}))
        object.__setattr__(self, "_data", (None, None))
        object.__setattr__(self, "_callbacks", ())
        object.__setattr__(self, "_loss", None)
        object.__setattr__(self, "_resolved", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"ExperimentPlan is immutable; branch it instead: plan.with_...(...) returns a "
            f"new plan (tried to set {name!r})"
        )

    def __delattr__(self, name: str) -> None:
        raise AttributeError("ExperimentPlan is immutable")

    def _evolve(
        self,
        values: Mapping[str, Any] | None = None,
        sources: Mapping[str, str] | None = None,
        data: tuple[Source | None, Source | None] | None = None,
        callbacks: tuple[Source, ...] | None = None,
        loss: Any = _UNSET,
    ) -> ExperimentPlan:
        new = ExperimentPlan.__new__(ExperimentPlan)
        set_ = object.__setattr__
        set_(new, "_values", MappingProxyType(dict(self._values if values is None else values)))
        set_(new, "_sources", MappingProxyType(dict(self._sources if sources is None else sources)))
        set_(new, "_data", self._data if data is None else data)
        set_(new, "_callbacks", self._callbacks if callbacks is None else callbacks)
        set_(new, "_loss", self._loss if loss is _UNSET else loss)
        set_(new, "_resolved", None)
        return new

    def _with(
        self, updates: Mapping[str, Any], via: str, removed: Iterable[str] = ()
    ) -> ExperimentPlan:
        values, sources = dict(self._values), dict(self._sources)
        loss = _UNSET
        for path in removed:
            values.pop(path, None)
            sources.pop(path, None)
        for path, value in updates.items():
            field_at(path, via)
            values[path] = frozen(value)
            sources[path] = via
            if path == "model.loss":
                loss = loss_entry(value)
        return self._evolve(values, sources, loss=loss)

    # -- fields --------------------------------------------------------------------------
    @staticmethod
    def fields() -> tuple[PlanField, ...]:
        """Every field a plan has (path, type, default, choices, in the run id or not)."""
        return plan_fields()

    def value(self, path: str) -> Any:
        """The value at ``path``: the plan's (as given), or the library default."""
        field_at(path, "value")
        return self._values.get(path, raw_defaults()[path])

    def values(self) -> dict[str, Any]:
        """Every field's value as JSON (the plan's, or the default), by path."""
        return {f.path: json_safe(self._values.get(f.path, f.default)) for f in plan_fields()}

    def is_set(self, path: str) -> bool:
        """Whether the plan sets ``path`` (False: the library default applies)."""
        field_at(path, "is_set")
        return path in self._values

    # -- branching -----------------------------------------------------------------------
    def with_value(self, path: str, value: Any) -> ExperimentPlan:
        """A plan with the field at ``path`` set to ``value`` (checked by ``validate()``)."""
        return self._with({path: value}, "with_value")

    def with_values(self, values: Mapping[str, Any]) -> ExperimentPlan:
        """A plan with several fields set at once, by path."""
        return self._with(dict(values), "with_values")

    def with_net(self, net_params: Any = None, /, **changes: Any) -> ExperimentPlan:
        """The network: an ``NNParams`` and/or its fields (``hidden_dims=[64]``), a
        ``ModelSpec``, or a built-in network's params (``NNConvParams(...)``)."""
        updates, removed = net_updates(self.value("model.net"), net_params, changes)
        return self._with(updates, "with_net", removed)

    def with_model(
        self, model_params: NNModelParams | None = None, /, **changes: Any
    ) -> ExperimentPlan:
        """Net kind, device, loss and precision: an ``NNModelParams`` and/or its fields."""
        updates = section_updates("model", NNModelParams, model_params, changes, "with_model")
        updates, removed = model_net_updates(self.value("model.net"), updates)
        return self._with(updates, "with_model", removed)

    def with_optim(self, optim: NNOptimParams | None = None, /, **changes: Any) -> ExperimentPlan:
        """The optimizer: an ``NNOptimParams`` and/or its fields (``max_lr=1e-3``)."""
        updates = section_updates("train.optim", NNOptimParams, optim, changes, "with_optim")
        return self._with(updates, "with_optim")

    def with_scheduler(self, scheduler: Any = _UNSET, /, **changes: Any) -> ExperimentPlan:
        """The plateau scheduler: an ``NNSchedulerParams`` and/or its fields; ``None``
        switches it off."""
        if scheduler is None:
            if changes:
                raise ConfigError("with_scheduler", None, "pass None alone to switch it off")
            return self._with({SCHEDULER: False}, "with_scheduler")
        obj = None if scheduler is _UNSET else scheduler
        updates = section_updates(SCHEDULER, NNSchedulerParams, obj, changes, "with_scheduler")
        return self._with({SCHEDULER: True, **updates}, "with_scheduler")

    def with_train(
        self, train_params: NNTrainParams | None = None, /, **changes: Any
    ) -> ExperimentPlan:
        """Training settings: an ``NNTrainParams`` and/or its fields.

        A given ``NNTrainParams`` sets every training field (epochs, seed, optimizer,
        scheduler, run knobs); its loaders, if any, become borrowed data sources, and its
        ``data_id``, ``runs_root`` and resume settings are taken only when set. ``optim=`` and
        ``scheduler=`` take params objects.
        """
        via = "with_train"
        updates = train_updates(train_params, changes, via)
        plan = self
        if train_params is not None and train_params.train_loader is not None:
            plan = plan._with_sources(train_params.train_loader, train_params.val_loader, via)
        return plan._with(updates, via)

    def _with_sources(self, train: Any, val: Any, via: str) -> ExperimentPlan:
        return self._evolve(
            data=(data_source(train, "data.train", via), data_source(val, "data.val", via))
        )

    def with_data(
        self, train: Any, /, val: Any = None, *, identity: str | None = None
    ) -> ExperimentPlan:
        """The data: factories (called once per fit, so each fit gets fresh loaders) or
        loader instances (borrowed: shared by every fit). ``identity`` names the data set
        (``NNTrainParams.data_id``); without it the data are hashed at fit."""
        plan = self._with_sources(train, val, "with_data")
        if identity is None:
            return plan._with({}, "with_data", removed=["train.data_id"])
        return plan._with({"train.data_id": identity}, "with_data")

    def with_callbacks(self, *callbacks: Any) -> ExperimentPlan:
        """The callbacks of every fit (replacing the plan's): a class or a function taking
        no argument is a factory (a fresh callback per fit); an instance is borrowed."""
        return self._evolve(
            callbacks=tuple(
                callback_source(cb, i, "with_callbacks") for i, cb in enumerate(callbacks)
            )
        )

    def with_early_stopping(
        self, patience: Any = _UNSET, *, monitor: Any = _UNSET, min_delta: Any = _UNSET
    ) -> ExperimentPlan:
        """EarlyStopping for every fit (a fresh one each time); ``None`` switches it off.
        An ``EarlyStopping`` instance gives its settings."""
        via = "with_early_stopping"
        if patience is None:
            return self._with({EARLY_STOPPING: False}, via)
        if hasattr(patience, "patience") and hasattr(patience, "min_delta"):
            es = patience
            patience, monitor, min_delta = es.patience, es.monitor, es.min_delta
        updates: dict[str, Any] = {EARLY_STOPPING: True}
        for name, value in (("patience", patience), ("monitor", monitor), ("min_delta", min_delta)):
            if value is not _UNSET:
                updates[f"{EARLY_STOPPING}.{name}"] = value
        return self._with(updates, via)

    def with_seed(self, seed: int) -> ExperimentPlan:
        """The seed of the fit: training, the factories' random draws and the initial
        weights (the model is built with ``init_seed=seed``)."""
        return self._with({"train.seed": seed}, "with_seed")

    def with_epochs(self, n_epochs: int) -> ExperimentPlan:
        return self._with({"train.n_epochs": n_epochs}, "with_epochs")

    def with_lr(self, max_lr: float) -> ExperimentPlan:
        """The optimizer's learning rate (``NNOptimParams.max_lr``)."""
        return self._with({"train.optim.max_lr": max_lr}, "with_lr")

    def with_loss(self, loss: Any) -> ExperimentPlan:
        """A ``Losses`` member, or your own loss module or function ``loss(out, y)``."""
        return self._with({"model.loss": loss}, "with_loss")

    def with_device(self, device: Any) -> ExperimentPlan:
        return self._with({"model.device": device}, "with_device")

    def with_precision(self, precision: Any) -> ExperimentPlan:
        """A ``PrecisionPolicy``, a mode (``"bf16"``) or None (fp32)."""
        return self._with({"model.precision": precision}, "with_precision")

    def with_runs_root(self, runs_root: str | os.PathLike[str] | None) -> ExperimentPlan:
        """Where fits write their runs (not part of the run id)."""
        value = None if runs_root is None else os.fspath(runs_root)
        return self._with({"train.runs_root": value}, "with_runs_root")

    def resuming(
        self,
        run: Any,
        *,
        checkpoint: str = "last",
        mode: str = "stateful",
        epochs: str = "additional",
    ) -> ExperimentPlan:
        """A child plan whose fit resumes ``run`` (an id, an ``NNRun`` or a
        ``FitResult``) from its ``checkpoint``; the parent run stays intact (§2.3)."""
        inner = getattr(run, "run", run)
        run_id = getattr(inner, "id", inner)
        return self._with(
            {
                "train.resume_from_run_id": run_id,
                "train.resume_from_checkpoint": checkpoint,
                "train.resume_mode": mode,
                "train.resume_epochs": epochs,
            },
            "resuming",
        )

    # -- validation and reports ------------------------------------------------------------
    def _resolve(self) -> Resolved:
        if self._resolved is None:
            object.__setattr__(self, "_resolved", resolve(stand_in_values(self._values)))
        return self._resolved  # type: ignore[return-value]

    @property
    def resolved(self) -> bool:
        """False while the plan holds references read from a file (``from_json``) as
        text: their modules are imported only by ``resolve()`` (or ``fit()``, which calls
        it). A plan built in code is always resolved."""
        return not has_references(self._values, self._data, self._callbacks)

    def resolve(self) -> ExperimentPlan:
        """This plan with the references it was read with (``from_json``) imported: the
        step where their modules' code runs, and the only one (``fit()``,
        ``lr_finder()``, ``probe()``, ``materialize()`` and ``expected_run_id()`` call
        it first). Every reference is checked before the first import, as
        ``validate()`` checks it; a ``PlanError`` names each one refused. A plan that
        holds no reference is returned as it is."""
        return self._resolved_plan()

    def _resolved_plan(self, skip: tuple[str, ...] = (), runs_root: Any = _UNSET) -> ExperimentPlan:
        if not has_references(self._values, self._data, self._callbacks):
            return self
        root = self._resolve().train.runs_root if runs_root is _UNSET else runs_root
        parts = (self._values, self._loss, self._data, self._callbacks)
        values, loss, data, callbacks = resolve_references(*parts, runs_roots(root), skip=skip)
        return self._evolve(values, self._sources, data, callbacks, loss)

    def validate(self) -> Problems:
        """Every problem at once, one per field (field, value, fix). Reads no loader,
        calls no factory, builds no model and imports nothing (a plan read from JSON has
        its references checked as text); ``.raise_for_errors()`` raises them."""
        return plan_problems(self._resolve(), self._values, self._data, self._callbacks)

    def check(self, path: str, value: Any) -> Problems:
        """The problems setting ``path`` to ``value`` would bring, in this plan's context
        (a field it makes invalid included), without changing the plan: what a form shows
        next to a field while the user types."""
        field_at(path, "check")
        before = set(self.validate().fields)
        after = self.with_value(path, value).validate()
        return Problems(p for p in after if p.field == path or p.field not in before)

    def binding_report(self, **overrides: Any) -> BindingReport:
        """Where each value of a fit would come from (library default, the plan, a
        per-call keyword such as ``seed=43``) and which one wins; fits nothing."""
        paths = train_call_updates(overrides, "binding_report")
        return plan_binding(self._values, self._sources, paths, self._data, self._callbacks)

    def _record(self, now: bool, *, mode: str | None = None) -> Record:
        """What this plan fixed (``now=False``: code as taken when it entered the plan)
        or what it would run now (``now=True``: code looked up by name today). ``mode``
        "fit" keeps the code as taken and the loss as it is now (what a fit runs)."""
        mode = mode or ("now" if now else "then")
        parts = (self._values, self._loss, self._data, self._callbacks)
        return plan_record(self._resolve(), *parts, mode)

    # -- probe and fit -------------------------------------------------------------------
    def probe(self, batch: Any) -> Any:
        """Run ``batch`` through a temporary model: an eval-mode no-grad forward and, if
        the batch has a target, a train-mode loss pass (one update of that temporary
        model). Writes nothing and leaves your random streams alone; returns a
        ``ProbeReport`` (shapes, the losses, whether outputs are finite)."""
        problems = [p for p in self.validate() if not p.field.startswith(("data.", "callbacks"))]
        Problems(problems).raise_for_errors()
        from ._probe import run_probe

        return run_probe(self._resolved_plan(skip=("data.", "callbacks"))._resolve(), batch)

    def fit(
        self,
        *,
        callbacks: Iterable[Any] = (),
        control: Any = None,
        provenance: Any = None,
        report: bool | None = None,
        **overrides: Any,
    ) -> FitResult:
        """Validate, seed, call the factories once, build the model and train it with
        ``NNModel.train`` (the same loop and run id as the imperative script).

        ``overrides`` are per-call values of training fields (``seed=43``,
        ``runs_root=...``), shown as such in the binding report; ``callbacks`` are added
        to the plan's (e.g. a ``TrainingMonitor``); ``control`` is a ``TrainingControl``
        to stop the run from another thread; ``provenance`` an ``ExperimentManifest``;
        ``report=False`` prints neither the binding report nor the drift banner for this
        fit (None: as ``set_config_report`` says); ``binding.json`` is written anyway.
        """
        paths = train_call_updates(overrides, "fit")
        callbacks = list(callbacks)
        plan = self._with(paths, "fit") if paths else self
        plan.validate().raise_for_errors()  # a loaded plan's references too, as text
        base = self._resolved_plan(runs_root=plan._resolve().train.runs_root)
        if base is not self:  # its references imported now: check what they gave
            plan = base._with(paths, "fit") if paths else base
            plan.validate().raise_for_errors()
        from ._drift import print_banner

        print_banner(base, report)  # a plan whose code was redefined since it was built
        binding = plan_binding(
            base._values, base._sources, paths, base._data, base._callbacks, callbacks
        )
        return _execution.fit_plan(plan, binding, callbacks, control, provenance, report)

    def materialize(self) -> tuple[Any, Any, list[Any]]:
        """What ``fit()`` trains: seeds, calls the factories once, builds the model.

        Returns ``(model, train_params, callbacks)``: the ``NNModel``, the plan's
        ``NNTrainParams`` with the loaders filled in, and the plan's callbacks (early
        stopping first). The distributed worker builds its ranks' runs from it.
        """
        plan = self.resolve()
        return _execution.materialize(plan._resolve(), plan._data, plan._callbacks)

    def expected_run_id(self) -> str:
        """The run id ``fit()`` would give now. Calls the factories (under a saved and
        restored RNG) and builds a throwaway model to hash its initial weights."""
        self.validate().raise_for_errors()
        plan = self._resolved_plan(skip=("callbacks",))
        return _execution.expected_run_id(plan._resolve(), plan._data)

    def existing_run(self) -> str | None:
        """The status of the run ``fit()`` would write, if it already exists under the
        runs root (``"finished"``, ``"running"``, ...), else None."""
        root = resolve_runs_root(self._resolve().train.runs_root)
        return _execution.existing_run(root, self.expected_run_id())

    # -- JSON ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The plan as JSON: values by path, and factories as importable
        ``module:qualname`` references. A lambda, a function defined in ``__main__`` or
        a borrowed instance cannot be imported by another process: every such object is
        refused at once (a ``PlanError`` naming each field and the fix)."""
        return plan_to_json(self._values, self._sources, self._data, self._callbacks)

    @classmethod
    def from_json(
        cls,
        data: Mapping[str, Any] | str | bytes,
        *,
        source: str | os.PathLike[str] | None = None,
    ) -> ExperimentPlan:
        """A plan from ``to_json()``'s form (the mapping, or its JSON text), read as data.

        The document passes its strict shape first: a ``PlanSchemaError`` (a
        ``ConfigError``) names ``source`` (or "plan JSON"), the field, the value and the
        fix. Nothing it names is imported: the plan holds its references as text
        (``plan.value("model.loss")`` is ``Reference('my_losses:smooth')``),
        ``validate()`` says which ones would not resolve or may not be, and
        ``resolve()`` (or ``fit()``) imports them when you ask for the code.
        """
        values, sources, sources_data, callbacks = plan_from_json(data, source)
        loss = loss_entry(values["model.loss"]) if "model.loss" in values else None
        return cls()._evolve(values, sources, sources_data, callbacks, loss)

    # -- comparison and display ----------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExperimentPlan):
            return NotImplemented
        if set(self._values) != set(other._values):
            return False
        same_values = all(same_value(self._values[k], other._values[k]) for k in self._values)
        return (
            same_values
            and self._data == other._data
            and len(self._callbacks) == len(other._callbacks)
            and all(a == b for a, b in zip(self._callbacks, other._callbacks, strict=True))
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        v = self._values
        net = net_summary(v)
        train, val = self._data
        data = "none" if train is None else train.name.rsplit(".", 1)[-1]
        if val is not None:
            data += "/" + val.name.rsplit(".", 1)[-1]
        loss = json_safe(v.get("model.loss", Losses.CROSS_ENTROPY))
        return (
            f"ExperimentPlan(net={net}, loss={loss}, "
            f"optim={json_safe(v.get('train.optim.name', 'adam'))} "
            f"lr={v.get('train.optim.max_lr', 1e-3)}, epochs={v.get('train.n_epochs', 1)}, "
            f"seed={v.get('train.seed', 0)}, data={data}"
            + (f" ({v['train.data_id']!r})" if "train.data_id" in v else "")
            + ")"
        )
