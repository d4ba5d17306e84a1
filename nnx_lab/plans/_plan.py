"""``ExperimentPlan`` (§2.20): an immutable configuration you branch instead of copy.

A plan holds raw values by path (``train.optim.max_lr``), the ``with_*`` call that set
each one, its data sources and its callbacks. Nothing is checked when a value is set:
``validate()`` checks everything at once, reading no loader and building no model, and
``fit()`` refuses a plan with problems before anything exists. ``fit()`` then seeds,
calls the factories once, builds the model and calls ``NNModel.train``: the same loop and
the same run id as the equally seeded imperative script.
"""

from __future__ import annotations

import difflib
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..engine.enums import Losses
from ..engine.params import (
    CustomLossRef,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNSchedulerParams,
    NNTrainParams,
)
from ..engine.precision import PrecisionPolicy, device_can_run
from ..engine.selection import MonitorSpec
from ..errors import ConfigError, DataError
from ..runs import FORMAT_VERSION, is_run_id, resolve_runs_root, run_dir
from ._binding import BindingReport, build_binding_report
from ._fields import (
    _RUN_KNOBS,
    EARLY_STOPPING,
    SCHEDULER,
    PlanField,
    Resolved,
    field_index,
    plan_fields,
    raw_defaults,
    resolve,
)
from ._problems import PlanError, Problem, Problems, json_safe
from ._record import PLAN_FILE, Record, code_now, environment_now
from ._refs import code_record, held_target, reference_of, resolve_reference
from ._sources import (
    CallbackSource,
    DataSource,
    callback_source,
    data_source,
    takes_no_arguments,
)

__all__ = ["ExperimentPlan", "FitResult", "SplitMetrics"]

PLAN_FORMAT = "nnx_lab.plan/1"
_UNSET: Any = object()


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


def _frozen(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    return value


def _is_custom_loss(value: Any) -> bool:
    return not isinstance(value, str | Losses | CustomLossRef) and callable(value)


def _loss_entry(loss: Any) -> dict[str, Any] | None:
    """The identity and code record of a custom loss, taken as it enters a plan."""
    if not _is_custom_loss(loss):
        return None
    from ..engine.losses import custom_loss_identity  # torch: only for a custom loss

    return {"identity": custom_loss_identity(loss), "code": code_record(loss, "model.loss")}


def _field(path: str, via: str) -> PlanField:
    index = field_index()
    if path not in index:
        close = difflib.get_close_matches(path, index, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ConfigError(
            via,
            path,
            f"no plan field has this path{hint}; check the spelling: "
            "ExperimentPlan.fields() lists every path",
        )
    return index[path]


def _unknown_keyword(via: str, name: str, allowed: Iterable[str]) -> ConfigError:
    allowed = sorted(allowed)
    close = difflib.get_close_matches(name, allowed, n=2)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return ConfigError(
        f"{via}({name}=...)",
        name,
        f"no such setting{hint}; check the spelling: one of " + ", ".join(allowed),
    )


class ExperimentPlan:
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
        data: tuple[DataSource | None, DataSource | None] | None = None,
        callbacks: tuple[CallbackSource, ...] | None = None,
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
            _field(path, via)
            values[path] = _frozen(value)
            sources[path] = via
            if path == "model.loss":
                loss = _loss_entry(value)
        return self._evolve(values, sources, loss=loss)

    # -- fields --------------------------------------------------------------------------
    @staticmethod
    def fields() -> tuple[PlanField, ...]:
        """Every field a plan has (path, type, default, choices, in the run id or not)."""
        return plan_fields()

    def value(self, path: str) -> Any:
        """The value at ``path``: the plan's (as given), or the library default."""
        _field(path, "value")
        return self._values.get(path, raw_defaults()[path])

    def values(self) -> dict[str, Any]:
        """Every field's value as JSON (the plan's, or the default), by path."""
        return {f.path: json_safe(self._values.get(f.path, f.default)) for f in plan_fields()}

    def is_set(self, path: str) -> bool:
        """Whether the plan sets ``path`` (False: the library default applies)."""
        _field(path, "is_set")
        return path in self._values

    # -- branching -----------------------------------------------------------------------
    def with_value(self, path: str, value: Any) -> ExperimentPlan:
        """A plan with the field at ``path`` set to ``value`` (checked by ``validate()``)."""
        return self._with({path: value}, "with_value")

    def with_values(self, values: Mapping[str, Any]) -> ExperimentPlan:
        """A plan with several fields set at once, by path."""
        return self._with(dict(values), "with_values")

    def _section(
        self, prefix: str, cls: type, obj: Any, changes: Mapping[str, Any], via: str
    ) -> dict[str, Any]:
        names = [f.name for f in plan_fields() if f.path.rsplit(".", 1)[0] == prefix]
        updates: dict[str, Any] = {}
        if obj is not None:
            if not isinstance(obj, cls):
                raise ConfigError(via, obj, f"pass a {cls.__name__}(...), or keyword arguments")
            updates = {f"{prefix}.{n}": getattr(obj, n) for n in names}
        for name, value in changes.items():
            if name not in names:
                raise _unknown_keyword(via, name, names)
            updates[f"{prefix}.{name}"] = value
        return updates

    def with_net(self, net_params: NNParams | None = None, /, **changes: Any) -> ExperimentPlan:
        """The network: an ``NNParams``, and/or some of its fields (``hidden_dims=[64]``)."""
        return self._with(
            self._section("net", NNParams, net_params, changes, "with_net"), "with_net"
        )

    def with_model(
        self, model_params: NNModelParams | None = None, /, **changes: Any
    ) -> ExperimentPlan:
        """Net kind, device, loss and precision: an ``NNModelParams`` and/or its fields."""
        updates = self._section("model", NNModelParams, model_params, changes, "with_model")
        return self._with(updates, "with_model")

    def with_optim(self, optim: NNOptimParams | None = None, /, **changes: Any) -> ExperimentPlan:
        """The optimizer: an ``NNOptimParams`` and/or its fields (``max_lr=1e-3``)."""
        updates = self._section("train.optim", NNOptimParams, optim, changes, "with_optim")
        return self._with(updates, "with_optim")

    def with_scheduler(self, scheduler: Any = _UNSET, /, **changes: Any) -> ExperimentPlan:
        """The plateau scheduler: an ``NNSchedulerParams`` and/or its fields; ``None``
        switches it off."""
        if scheduler is None:
            if changes:
                raise ConfigError("with_scheduler", None, "pass None alone to switch it off")
            return self._with({SCHEDULER: False}, "with_scheduler")
        obj = None if scheduler is _UNSET else scheduler
        updates = self._section(SCHEDULER, NNSchedulerParams, obj, changes, "with_scheduler")
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
        plan = self
        updates: dict[str, Any] = {}
        names = [f.name for f in plan_fields() if f.path.rsplit(".", 1)[0] == "train"]
        if train_params is not None:
            if not isinstance(train_params, NNTrainParams):
                raise ConfigError(
                    via, train_params, "pass an NNTrainParams(...), or keyword arguments"
                )
            for name in names:
                if name in ("data_id", "runs_root") and getattr(train_params, name) is None:
                    continue  # not set there: what the plan has stays
                if name.startswith("resume_") and train_params.resume_from_run_id is None:
                    continue
                updates[f"train.{name}"] = getattr(train_params, name)
            changes = {"optim": train_params.optim, "scheduler": train_params.scheduler, **changes}
            if train_params.train_loader is not None:
                plan = plan._with_sources(train_params.train_loader, train_params.val_loader, via)
        for name, value in changes.items():
            if name == "optim":
                updates.update(self._section("train.optim", NNOptimParams, value, {}, via))
            elif name == "scheduler":
                updates[SCHEDULER] = value is not None
                if value is not None:
                    updates.update(self._section(SCHEDULER, NNSchedulerParams, value, {}, via))
            elif name in ("train_loader", "val_loader"):
                raise ConfigError(
                    f"{via}({name}=...)", value, "give data with plan.with_data(train, val=...)"
                )
            elif name in names:
                updates[f"train.{name}"] = value
            else:
                raise _unknown_keyword(via, name, [*names, "optim", "scheduler"])
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

    # -- validation ----------------------------------------------------------------------
    def _resolve(self) -> Resolved:
        if self._resolved is None:
            object.__setattr__(self, "_resolved", resolve(self._values))
        return self._resolved  # type: ignore[return-value]

    def validate(self) -> Problems:
        """Every problem at once, one per field (field, value, fix). Reads no loader,
        calls no factory and builds no model; ``.raise_for_errors()`` raises them."""
        r = self._resolve()
        problems = list(r.problems)
        flagged = {p.field for p in problems}
        for toggle in (SCHEDULER, EARLY_STOPPING):
            value = self._values.get(toggle, False)
            if not isinstance(value, bool):
                problems.append(Problem(toggle, value, "pass True or False"))
        loss = self._values.get("model.loss")
        if isinstance(loss, CustomLossRef):
            problems.append(
                Problem(
                    "model.loss",
                    loss.name,
                    "this loss came from a saved record, which holds no code; pass the loss "
                    "again: plan.with_loss(YourLoss())",
                )
            )
        if not flagged & {"model.device", "model.precision", "model.mixed_precision"}:
            problems += _device_problems(r.model)
        problems += self._data_problems()
        problems += self._callback_problems()
        if "train.resume_from_run_id" not in flagged and "train.runs_root" not in flagged:
            problems += _resume_problems(r.train)
        order = {f.path: i for i, f in enumerate(plan_fields())}
        problems.sort(key=lambda p: order.get(p.field, len(order)))
        return Problems(problems)

    def check(self, path: str, value: Any) -> Problems:
        """The problems setting ``path`` to ``value`` would bring, in this plan's context
        (a field it makes invalid included), without changing the plan: what a form shows
        next to a field while the user types."""
        _field(path, "check")
        before = set(self.validate().fields)
        after = self.with_value(path, value).validate()
        return Problems(p for p in after if p.field == path or p.field not in before)

    def _data_problems(self) -> list[Problem]:
        train, val = self._data
        problems = []
        if train is None:
            problems.append(
                Problem(
                    "data.train",
                    None,
                    "give the training data: plan.with_data(make_train_loader, "
                    "val=make_val_loader), factories returning DataLoaders or lists of "
                    "(X, y) batches",
                )
            )
        for role, src in (("data.train", train), ("data.val", val)):
            if src is None:
                continue
            if src.kind == "factory":
                if takes_no_arguments(src.obj) is False:
                    problems.append(
                        Problem(
                            role,
                            src.name,
                            f"a data factory is called with no argument, and {src.name} "
                            "needs some; wrap it: def make(): return "
                            f"{src.obj.__qualname__}(...)",
                        )
                    )
                continue
            problem = _source_problem(src.obj, role)
            if problem is not None:
                problems.append(problem)
        return problems

    def _callback_problems(self) -> list[Problem]:
        from ..engine.sinks import check_callback

        problems = []
        for i, cb in enumerate(self._callbacks):
            if cb.kind == "factory":
                if takes_no_arguments(cb.obj) is False:
                    problems.append(
                        Problem(
                            f"callbacks[{i}]",
                            cb.name,
                            "a callback factory is called with no argument; pass an "
                            "instance, or a function that builds one",
                        )
                    )
                continue
            try:
                check_callback(cb.obj)
            except TypeError as exc:
                problems.append(Problem(f"callbacks[{i}]", cb.obj, str(exc).split(": ", 1)[-1]))
        return problems

    # -- reports -------------------------------------------------------------------------
    def _overrides(self, overrides: Mapping[str, Any], via: str) -> dict[str, Any]:
        names = [f.name for f in plan_fields() if f.path.rsplit(".", 1)[0] == "train"]
        out = {}
        for name, value in overrides.items():
            if name not in names:
                raise _unknown_keyword(via, name, names)
            out[f"train.{name}"] = value
        return out

    def _objects(self, extra_callbacks: Iterable[Any] = ()) -> list[tuple[str, str, str]]:
        train, val = self._data
        objects = []
        for role, src in (("data.train", train), ("data.val", val)):
            if src is not None:
                objects.append((role, src.describe(), src.via))
        if self._values.get(EARLY_STOPPING):
            objects.append(
                ("callbacks", "EarlyStopping (a fresh one per fit)", self._sources[EARLY_STOPPING])
            )
        for cb in self._callbacks:
            objects.append(("callbacks", cb.describe(), cb.via))
        for cb in extra_callbacks:
            objects.append(("callbacks", f"{type(cb).__qualname__} instance", "fit(callbacks=...)"))
        return objects

    def binding_report(self, **overrides: Any) -> BindingReport:
        """Where each value of a fit would come from (library default, the plan, a
        per-call keyword such as ``seed=43``) and which one wins; fits nothing."""
        paths = self._overrides(overrides, "binding_report")
        return build_binding_report(dict(self._values), dict(self._sources), paths, self._objects())

    def _record(self, now: bool, *, mode: str | None = None) -> Record:
        """What this plan fixed (``now=False``: code as taken when it entered the plan)
        or what it would run now (``now=True``: code looked up by name today). ``mode``
        "fit" keeps the code as taken and the loss as it is now (what a fit runs)."""
        mode = mode or ("now" if now else "then")
        r = self._resolve()
        model = r.model.to_json() if self._loss is None else _model_json(r.model, self._loss, mode)
        train = {**r.train.identity(), **{k: getattr(r.train, k) for k in _RUN_KNOBS}}
        values: dict[str, Any] = {
            "format": FORMAT_VERSION,
            "net": r.net.to_json(),
            "model": model,
            "train": train,
            "early_stopping": r.early_stopping,
            "environment": environment_now(),
        }
        unknown = ["data.train", "data.val", "initial_weights"]
        if r.train.data_id is not None:
            values["data"] = {"data_id": r.train.data_id}
        else:
            unknown.append("data")
        for p in r.problems:  # a refused value is recorded as it was given
            _put(values, p.field, json_safe(p.value))
        held: list[tuple[dict[str, Any], Any]] = []
        if self._loss is not None:
            held.append((self._loss["code"], self._values.get("model.loss")))
        for src in self._data:
            if src is not None and src.kind == "factory":
                held.append((src.code, src.obj))
        for cb in self._callbacks:
            held.append((cb.code, cb.obj))
        if mode == "now":
            code = tuple(code_now(c, held=held_target(obj), allow_import=False) for c, obj in held)
        else:
            code = tuple(dict(c) for c, _ in held)
        limits = []
        for src in self._data:
            if src is not None and src.kind == "instance":
                limits.append(
                    f"{src.code['role']} is a borrowed {type(src.obj).__qualname__}: its "
                    "contents are not read for this report (reading a loader can move its "
                    "random generator); the run id still covers them at fit."
                )
        if self._callbacks:
            limits.append(
                "Callbacks are compared by their class's code; their settings are not "
                "probed (building one from its factory could have side effects)."
            )
        label = {"then": "plan, when built", "now": "plan, now", "fit": "plan"}[mode]
        return Record("plan", label, values, code, tuple(unknown), tuple(limits))

    # -- probe and fit -------------------------------------------------------------------
    def probe(self, batch: Any) -> Any:
        """Run ``batch`` through a temporary model: an eval-mode no-grad forward and, if
        the batch has a target, a train-mode loss pass (one update of that temporary
        model). Writes nothing and leaves your random streams alone; returns a
        ``ProbeReport`` (shapes, the losses, whether outputs are finite)."""
        problems = [p for p in self.validate() if not p.field.startswith(("data.", "callbacks"))]
        Problems(problems).raise_for_errors()
        from ._probe import run_probe

        return run_probe(self._resolve(), batch)

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
        paths = self._overrides(overrides, "fit")
        callbacks = list(callbacks)
        plan = self._with(paths, "fit") if paths else self
        plan.validate().raise_for_errors()
        from ._drift import print_banner

        print_banner(self, report)  # a plan whose code was redefined since it was built
        binding = build_binding_report(
            dict(self._values), dict(self._sources), paths, self._objects(callbacks)
        )
        return _fit(plan, binding, callbacks, control, provenance, report)

    def lr_finder(self, **kwargs: Any) -> Any:
        """An LR sweep (``nnx_lab.lr_finder``, docs/lr_finder.md) on the model ``fit()``
        would build (the same seed, loss and precision policy) with the plan's optimizer
        kind and settings, on a fresh training loader from the plan's data. Nothing is
        written, and your random streams are as they were afterwards; pass the pick on
        with ``plan.with_lr(result.suggested_lr)``."""
        problems = [p for p in self.validate() if not p.field.startswith("callbacks")]
        Problems(problems).raise_for_errors()
        from ..engine.model import NNModel
        from ..engine.training_state import preserved_rng, seed_everything

        r = self._resolve()
        with preserved_rng():
            seed_everything(r.train.seed)
            train_loader = self._data[0].make()
            model = NNModel(r.net, r.model, init_seed=r.train.seed)
            kwargs.setdefault("optimizer", r.train.optim)
            return model.lr_finder(train_loader, **kwargs)

    def materialize(self) -> tuple[Any, Any, list[Any]]:
        """What ``fit()`` trains: seeds, calls the factories once, builds the model.

        Returns ``(model, train_params, callbacks)``: the ``NNModel``, the plan's
        ``NNTrainParams`` with the loaders filled in, and the plan's callbacks (early
        stopping first). The distributed worker builds its ranks' runs from it.
        """
        from ..engine.model import NNModel
        from ..engine.training_state import seed_everything

        r = self._resolve()
        seed_everything(r.train.seed)
        train_loader, val_loader = (
            _made(s, role) for s, role in zip(self._data, ("data.train", "data.val"), strict=True)
        )
        made: list[Any] = []
        if r.early_stopping is not None:
            from ..engine.handlers import EarlyStopping

            made.append(EarlyStopping(**r.early_stopping))
        made += [cb.make() for cb in self._callbacks]
        model = NNModel(r.net, r.model, init_seed=r.train.seed)
        return model, r.train.replace(train_loader=train_loader, val_loader=val_loader), made

    def expected_run_id(self) -> str:
        """The run id ``fit()`` would give now. Calls the factories (under a saved and
        restored RNG) and builds a throwaway model to hash its initial weights."""
        self.validate().raise_for_errors()
        from ..engine.model import NNModel
        from ..engine.training_state import preserved_rng, seed_everything

        r = self._resolve()
        with preserved_rng():
            seed_everything(r.train.seed)
            train_loader, val_loader = (None if s is None else s.make() for s in self._data)
            model = NNModel(r.net, r.model, init_seed=r.train.seed)
        params = r.train.replace(train_loader=train_loader, val_loader=val_loader)
        return model.expected_run_id(params)

    def existing_run(self) -> str | None:
        """The status of the run ``fit()`` would write, if it already exists under the
        runs root (``"finished"``, ``"running"``, ...), else None."""
        from ..runs import effective_status, read_record

        path = run_dir(resolve_runs_root(self._resolve().train.runs_root), self.expected_run_id())
        if not (path / "metadata.yaml").is_file():
            return None
        return effective_status(read_record(path / "metadata.yaml"))

    # -- JSON ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The plan as JSON: values by path, and factories as importable
        ``module:qualname`` references. A lambda, a function defined in ``__main__`` or
        a borrowed instance cannot be imported by another process: every such object is
        refused at once (a ``PlanError`` naming each field and the fix)."""
        problems: list[Problem] = []
        values: dict[str, Any] = {}
        for path, value in self._values.items():
            try:
                values[path] = _value_json(path, value)
            except ConfigError as exc:
                problems.append(Problem(path, value, exc.fix))
        data: dict[str, Any] = {}
        for role, src in zip(("data.train", "data.val"), self._data, strict=True):
            data[role.split(".")[1]] = _source_json(src, role, problems)
        callbacks = [
            _source_json(cb, f"callbacks[{i}]", problems) for i, cb in enumerate(self._callbacks)
        ]
        if problems:
            raise PlanError(problems)
        return {
            "format": PLAN_FORMAT,
            "values": values,
            "sources": dict(self._sources),
            "data": data,
            "callbacks": callbacks,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExperimentPlan:
        """A plan from ``to_json()``'s form; references are imported."""
        if not isinstance(data, Mapping) or data.get("format") != PLAN_FORMAT:
            raise ConfigError(
                "format",
                data.get("format") if isinstance(data, Mapping) else data,
                f"not a plan's JSON (expected format {PLAN_FORMAT!r}); pass what "
                "ExperimentPlan.to_json() returned",
            )
        values: dict[str, Any] = {}
        for path, value in (data.get("values") or {}).items():
            _field(path, "from_json")
            values[path] = _value_from_json(path, value)
        sources = {p: str(data.get("sources", {}).get(p, "with_value")) for p in values}
        plan = cls()._evolve(values={k: _frozen(v) for k, v in values.items()}, sources=sources)
        if "model.loss" in values:
            object.__setattr__(plan, "_loss", _loss_entry(values["model.loss"]))
        blocks = data.get("data") or {}
        built = []
        for role in ("train", "val"):
            entry = blocks.get(role)
            obj = None if entry is None else resolve_reference(entry.get("factory"), f"data.{role}")
            built.append(data_source(obj, f"data.{role}", (entry or {}).get("via", "with_data")))
        callbacks = tuple(
            callback_source(
                resolve_reference(entry.get("factory"), f"callbacks[{i}]"),
                i,
                entry.get("via", "with_callbacks"),
            )
            for i, entry in enumerate(data.get("callbacks") or [])
        )
        return plan._evolve(data=(built[0], built[1]), callbacks=callbacks)

    # -- comparison and display ----------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExperimentPlan):
            return NotImplemented
        if set(self._values) != set(other._values):
            return False
        same_values = all(_same(self._values[k], other._values[k]) for k in self._values)
        return (
            same_values
            and self._data == other._data
            and len(self._callbacks) == len(other._callbacks)
            and all(a == b for a, b in zip(self._callbacks, other._callbacks, strict=True))
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        v = self._values
        net = (
            f"{v.get('net.input_dim', '?')}->{list(v.get('net.hidden_dims', ()))}->"
            f"{v.get('net.output_dim', '?')}"
        )
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


# -- helpers -------------------------------------------------------------------------------
def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        if a == b:
            return True
    except Exception:
        return False
    return not callable(a) and json_safe(a) == json_safe(b)


def _put(values: dict[str, Any], path: str, value: Any) -> None:
    node = values
    parts = path.split(".")
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    node[parts[-1]] = value


def _model_json(model: NNModelParams, loss: dict[str, Any], mode: str) -> dict[str, Any]:
    """The model's JSON with the custom loss's identity as taken (``then``) or as the
    object is now."""
    base = {k: v for k, v in vars(model).items() if k != "loss"}
    out = NNModelParams(**base).to_json()  # the loss is then the default: replaced below
    if mode == "then":
        out["loss"] = loss["identity"]
    else:
        from ..engine.losses import custom_loss_identity

        out["loss"] = custom_loss_identity(model.loss)
    return out


def _device_problems(model: NNModelParams) -> list[Problem]:
    device = model.device.value
    if device != "cpu":
        import torch  # only to ask whether the device exists

        present = (
            torch.cuda.is_available()
            if device == "cuda"
            else bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
        )
        if not present:
            return [
                Problem(
                    "model.device",
                    device,
                    f"no {device.upper()} device is present here; use Devices.get() or Devices.CPU",
                )
            ]
    policy = model.precision
    if policy is not None:
        ok, why = device_can_run(device, policy.mode)
        if not ok and policy.fallback != "fp32":
            return [
                Problem(
                    "model.precision",
                    policy.mode,
                    f"{why}; use PrecisionPolicy({policy.mode!r}, fallback='fp32') to train "
                    "in fp32 instead, or another mode (nnx_lab.precision_support())",
                )
            ]
    return []


def _source_problem(obj: Any, role: str) -> Problem | None:
    from collections.abc import Iterable as _Iterable
    from collections.abc import Iterator as _Iterator

    if isinstance(obj, str | bytes) or not isinstance(obj, _Iterable):
        return Problem(
            role,
            obj,
            "pass a factory (a function returning a loader) or a DataLoader / list of "
            "(X, y) batches",
        )
    if isinstance(obj, _Iterator):
        return Problem(
            role,
            obj,
            "a one-shot iterator runs dry after one epoch; pass a DataLoader, a list of "
            "batches, or a factory that returns one",
        )
    return None


def _resume_problems(train: NNTrainParams) -> list[Problem]:
    run_id = train.resume_from_run_id
    if run_id is None or not is_run_id(run_id):
        return []
    root = resolve_runs_root(train.runs_root)
    if (run_dir(root, run_id) / "run.yaml").is_file():
        return []
    return [
        Problem(
            "train.resume_from_run_id",
            run_id,
            f"no such run under {root.resolve()}; check the id, or set the runs root "
            "where it was written: plan.with_runs_root(...)",
        )
    ]


def _value_json(path: str, value: Any) -> Any:
    if path == "model.loss":
        if isinstance(value, CustomLossRef):
            raise ConfigError(path, value.name, "a loss from a saved record holds no code")
        if _is_custom_loss(value):
            return {"ref": reference_of(value, path)}
    if isinstance(value, PrecisionPolicy):
        return value.to_json()
    # declared metrics, the monitor and extra_metrics are objects and functions: written
    # as their state and as references, never as their repr (which would not read back)
    if path == "train.metrics":
        if not all(hasattr(m, "state") and hasattr(m, "key") for m in value):
            raise ConfigError(path, value, "pass MetricSpec objects, e.g. [MetricSpec('nll')]")
        return [m.state() for m in value]
    if path == "train.monitor" and isinstance(value, MonitorSpec):
        return value.to_json()
    if path == "train.extra_metrics" and value:
        return {
            "refs": {
                name: reference_of(fn, f"{path}[{name!r}]") for name, fn in dict(value).items()
            }
        }
    if isinstance(value, MappingProxyType):
        value = dict(value)
    safe = json_safe(value)
    if _plain(safe) and (safe == value or isinstance(value, tuple | dict | str)):
        return safe
    raise ConfigError(
        path,
        value,
        f"a {type(value).__name__} cannot be written as JSON; use a plain value "
        "(number, string, list) or an enum member",
    )


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _value_from_json(path: str, value: Any) -> Any:
    if path == "model.loss" and isinstance(value, dict) and "ref" in value:
        return resolve_reference(value["ref"], path)
    if path == "train.metrics" and isinstance(value, list):
        from ..data.metrics import MetricSpec  # imports torch: only for a plan that has them

        return tuple(MetricSpec.from_state(s) if isinstance(s, dict) else s for s in value)
    if path == "train.monitor" and isinstance(value, dict):
        return MonitorSpec.from_json(value)
    if path == "train.extra_metrics" and isinstance(value, dict) and "refs" in value:
        return {
            name: resolve_reference(ref, f"{path}[{name!r}]") for name, ref in value["refs"].items()
        }
    if path == "model.precision" and isinstance(value, dict):
        try:
            return PrecisionPolicy.from_json(value)
        except (ConfigError, KeyError):
            return value  # validate() names what is wrong with it
    return value


def _source_json(src: Any, role: str, problems: list[Problem]) -> dict[str, Any] | None:
    if src is None:
        return None
    if src.kind != "factory":
        problems.append(
            Problem(
                role,
                src.obj,
                f"a borrowed {type(src.obj).__qualname__} cannot travel to another "
                "process; pass a factory: an importable function that returns it",
            )
        )
        return None
    try:
        return {"factory": reference_of(src.obj, role), "via": src.via}
    except ConfigError as exc:
        problems.append(Problem(role, src.obj, exc.fix))
        return None


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

    plan: ExperimentPlan
    binding: BindingReport
    model: Any
    report: bool | None = None
    attempt_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def on_run_started(self, event: Any) -> None:
        from pathlib import Path

        from ..runs._atomic import atomic_write_json
        from ._output import emit
        from ._record import BINDING_FILE

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


def _made(src: DataSource | None, role: str) -> Any:
    """What a data source gives for this fit; a factory's result is checked like an
    instance (without reading it)."""
    if src is None:
        return None
    loader = src.make()
    if src.kind == "factory":
        problem = _source_problem(loader, role)
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


def _fit(
    plan: ExperimentPlan,
    binding: BindingReport,
    callbacks: list[Any],
    control: Any,
    provenance: Any,
    report: bool | None,
) -> FitResult:

    model, params, made = plan.materialize()
    recorder = _PlanRecorder(plan, binding, model, report)
    run = model.train(
        params,
        callbacks=[*made, *callbacks, recorder],
        control=control,
        provenance=provenance,
    )
    return FitResult(model, run, _final_metrics(run), recorder.attempt_id)
