"""A plan's fields, read from the params dataclasses, and their validation field by field.

Every configurable value of a plan has a path: ``net.hidden_dims``, ``model.loss``,
``train.optim.max_lr``, ``train.scheduler.patience``, ``train.n_epochs``,
``early_stopping.patience``. ``plan_fields()`` describes each one (type, default,
choices, whether it enters the run id) from the dataclasses themselves, so a field added
to ``NNOptimParams`` appears in every form built from this list with no other change.

``resolve()`` builds the params objects from a plan's raw values one field at a time, so
that one refused value does not hide the next: each field is tried on top of the values
accepted so far and, when refused, becomes a ``Problem`` while the rest goes on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from enum import Enum
from typing import Any

from ..engine import enums as enums_module
from ..engine import params as params_module
from ..engine.params import (
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNSchedulerParams,
    NNTrainParams,
)
from ..engine.precision import MODES
from ..errors import ConfigError
from ..runs import RUN_KNOBS
from ._bounds import BOUNDS, Bound
from ._net_value import net_parts
from ._problems import Problem, json_safe

__all__ = [
    "TOGGLES",
    "PlanField",
    "Resolved",
    "field_index",
    "plan_fields",
    "raw_defaults",
    "resolve",
]

# Sections that can be switched off as a whole; the switch is a field of its own.
SCHEDULER, EARLY_STOPPING = "train.scheduler", "early_stopping"
TOGGLES = (SCHEDULER, EARLY_STOPPING)

_TRAIN_EXCLUDED = ("train_loader", "val_loader", "optim", "scheduler")
_RUN_KNOBS = RUN_KNOBS  # the train values that never enter a run id


@dataclass(frozen=True)
class PlanField:
    """One configurable value of a plan, for a form or a report.

    ``type`` is one of ``int``, ``float``, ``bool``, ``str``, ``int_list``, ``choice``
    or ``any``; ``choices`` lists the accepted wire values of a ``choice`` (or of a
    ``str`` with a closed set); ``custom_allowed`` says that a Python object (your own
    loss) is accepted besides the choices. ``toggle`` names the switch field that turns
    this field's section on (``train.scheduler``, ``early_stopping``). ``bound`` is a
    numeric field's range (any run's, and the PlanBuilder form's own limit: ``_bounds``).
    """

    path: str
    section: str
    name: str
    owner: str
    type: str
    default: Any
    required: bool = False
    nullable: bool = False
    choices: tuple[Any, ...] | None = None
    custom_allowed: bool = False
    in_run_id: bool = True
    toggle: str | None = None
    bound: Bound | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "section": self.section,
            "name": self.name,
            "owner": self.owner,
            "type": self.type,
            "default": self.default,
            "required": self.required,
            "nullable": self.nullable,
            "choices": None if self.choices is None else list(self.choices),
            "custom_allowed": self.custom_allowed,
            "in_run_id": self.in_run_id,
            "toggle": self.toggle,
            "bound": None if self.bound is None else self.bound.to_json(),
        }


def _early_stopping_class() -> Any:
    from ..engine.handlers.early_stopping import EarlyStopping  # torch: only when needed

    return EarlyStopping


def _monitors() -> tuple[str, ...]:
    from ..engine.handlers import early_stopping

    return early_stopping.MONITORS


# Values whose annotation says nothing useful (``Any``) or whose strings form a closed set.
def _overrides() -> dict[str, dict[str, Any]]:
    return {
        "model.loss": {
            "type": "choice",
            "choices": tuple(m.value for m in enums_module.Losses),
            "custom_allowed": True,
        },
        "model.precision": {"type": "choice", "choices": (None, *MODES), "nullable": True},
        "train.optim.momentum": {"type": "any", "nullable": True},
        "train.resume_from_checkpoint": {"choices": params_module.RESUME_CHECKPOINTS},
        "train.resume_mode": {"choices": params_module.RESUME_MODES},
        "train.resume_epochs": {"choices": params_module.RESUME_EPOCHS},
        "early_stopping.monitor": {"choices": (None, *_monitors())},
    }


def _kind(annotation: str) -> tuple[str, bool, tuple[Any, ...] | None]:
    """(type, nullable, choices) from an annotation as written."""
    text = annotation.replace(" ", "")
    nullable = text.endswith("|None")
    text = text.removesuffix("|None")
    if text in ("int", "float", "bool", "str"):
        return text, nullable, None
    if text == "Sequence[int]":
        return "int_list", nullable, None
    enum = getattr(enums_module, text, None)
    if isinstance(enum, type) and issubclass(enum, Enum):
        return "choice", nullable, tuple(m.value for m in enum)
    return "any", nullable, None


def _section_of(path: str) -> str:
    head, _, rest = path.partition(".")
    if head == "train":
        if rest.startswith("optim."):
            return "optim"
        if rest.startswith("scheduler"):
            return "scheduler"
        if rest.startswith("resume_"):
            return "resume"
        if rest == "data_id":
            return "data"
        if rest in _RUN_KNOBS:
            return "run"
    return head


def _in_run_id(path: str) -> bool:
    if path.startswith(EARLY_STOPPING):
        return False  # callbacks are not part of the run id
    if path.startswith("train."):
        return path.removeprefix("train.") not in _RUN_KNOBS
    return True


def _default(f: Any) -> tuple[Any, bool]:
    if f.default is not MISSING:
        return f.default, False
    if f.default_factory is not MISSING:
        return f.default_factory(), False
    return None, True


def _described(path: str, owner: str, annotation: str, default: Any, required: bool) -> PlanField:
    kind, nullable, choices = _kind(annotation)
    extra = _overrides().get(path, {})
    toggle = next((t for t in TOGGLES if path.startswith(t + ".")), None)
    return PlanField(
        path=path,
        section=_section_of(path),
        name=path.rsplit(".", 1)[-1],
        owner=owner,
        type=extra.get("type", kind),
        default=json_safe(default),
        required=required,
        nullable=extra.get("nullable", nullable or (default is None and not required)),
        choices=extra.get("choices", choices),
        custom_allowed=extra.get("custom_allowed", False),
        in_run_id=_in_run_id(path),
        toggle=toggle,
        bound=BOUNDS.get(path),
    )


def _dataclass_fields(prefix: str, cls: type, exclude: tuple[str, ...] = ()) -> list[PlanField]:
    out = []
    for f in fields(cls):
        if f.name in exclude or f.name.startswith("_"):
            continue
        default, required = _default(f)
        out.append(
            _described(
                f"{prefix}.{f.name}", f"{cls.__name__}.{f.name}", str(f.type), default, required
            )
        )
    return out


def _signature_fields(prefix: str, cls: type) -> list[PlanField]:
    import inspect

    out = []
    for name, p in inspect.signature(cls).parameters.items():
        if p.kind is p.KEYWORD_ONLY:
            continue  # EarlyStopping's mode= and name= (NNx's) are not plan fields
        required = p.default is inspect.Parameter.empty
        out.append(
            _described(
                f"{prefix}.{name}",
                f"{cls.__name__}.{name}",
                str(p.annotation),
                None if required else p.default,
                required,
            )
        )
    return out


def _toggle(path: str, owner: str) -> PlanField:
    return PlanField(
        path=path,
        section=_section_of(path),
        name=path.rsplit(".", 1)[-1],
        owner=owner,
        type="bool",
        default=False,
        in_run_id=_in_run_id(path),
    )


@functools.cache
def plan_fields() -> tuple[PlanField, ...]:
    """Every field of a plan, in form order: net, model, optimizer, scheduler, training,
    early stopping. Read from the params dataclasses (and EarlyStopping's signature)."""
    early = _early_stopping_class()
    return (
        *_dataclass_fields("net", NNParams),
        *_dataclass_fields("model", NNModelParams),
        *_dataclass_fields("train.optim", NNOptimParams),
        _toggle(SCHEDULER, "NNTrainParams.scheduler"),
        *_dataclass_fields(SCHEDULER, NNSchedulerParams),
        *_dataclass_fields("train", NNTrainParams, _TRAIN_EXCLUDED),
        _toggle(EARLY_STOPPING, "EarlyStopping"),
        *_signature_fields(EARLY_STOPPING, early),
    )


@functools.cache
def field_index() -> dict[str, PlanField]:
    return {f.path: f for f in plan_fields()}


@functools.cache
def raw_defaults() -> dict[str, Any]:
    """Each field's library default as the dataclass has it (an enum member, a tuple)."""
    out: dict[str, Any] = dict.fromkeys(TOGGLES, False)
    for prefix, cls in (
        ("net", NNParams),
        ("model", NNModelParams),
        ("train.optim", NNOptimParams),
        (SCHEDULER, NNSchedulerParams),
        ("train", NNTrainParams),
    ):
        for f in fields(cls):
            out.setdefault(f"{prefix}.{f.name}", _default(f)[0])
    import inspect

    empty = inspect.Parameter.empty
    for name, p in inspect.signature(_early_stopping_class()).parameters.items():
        if p.kind is p.KEYWORD_ONLY:
            continue
        out[f"{EARLY_STOPPING}.{name}"] = None if p.default is empty else p.default
    return {path: out.get(path) for path in field_index()}


# -- resolution ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Resolved:
    """The params objects a plan's values give, and the problems met on the way.

    Every object is valid: a refused value left its field at the last accepted value
    (or a placeholder for a required one), and is listed in ``problems``.
    """

    net: Any  # NNParams for the MLP, a built-in network's params, None for a ModelSpec
    model: NNModelParams
    optim: NNOptimParams
    scheduler: NNSchedulerParams | None
    train: NNTrainParams  # without loaders
    early_stopping: dict[str, Any] | None  # EarlyStopping's keyword arguments
    problems: tuple[Problem, ...]


def _fix(exc: Exception, owner: str) -> str:
    if isinstance(exc, ConfigError):
        if exc.field == owner:
            return exc.fix
        return f"{exc.field}: {exc.fix}"
    text = str(exc)
    _, sep, fix = text.partition(" is invalid: ")
    return fix if sep else f"{type(exc).__name__}: {text}"


_PLACEHOLDERS = {"net.input_dim": 1, "net.output_dim": 1}


def _build(
    make: Callable[..., Any],
    section: list[PlanField],
    values: Mapping[str, Any],
    problems: list[Problem],
    **fixed: Any,
) -> Any:
    """``make(**kwargs)`` with each set value tried on top of those accepted so far."""
    accepted: dict[str, Any] = {}
    placeholders: dict[str, Any] = {}
    for f in section:
        if f.path not in values:
            if f.required:
                problems.append(Problem(f.path, None, _missing_fix(f.path)))
                placeholders[f.name] = _PLACEHOLDERS.get(f.path, 1)
            continue
        candidate = {**accepted, f.name: values[f.path]}
        beyond = None if f.bound is None else f.bound.plan_refusal(values[f.path])
        try:
            if beyond is not None:  # past the end the plan adds to the params' range
                raise ConfigError(f.owner, values[f.path], beyond)
            make(**{**placeholders, **_missing_required(section, candidate)}, **fixed, **candidate)
        except Exception as exc:
            problems.append(Problem(f.path, values[f.path], _fix(exc, f.owner)))
            if f.required:
                placeholders[f.name] = _PLACEHOLDERS.get(f.path, 1)
            continue
        accepted = candidate
    return make(**{**placeholders, **_missing_required(section, accepted)}, **fixed, **accepted)


def _missing_required(section: list[PlanField], given: Mapping[str, Any]) -> dict[str, Any]:
    return {
        f.name: _PLACEHOLDERS.get(f.path, 1) for f in section if f.required and f.name not in given
    }


def _missing_fix(path: str) -> str:
    name = path.rsplit(".", 1)[-1]
    example = {"input_dim": 8, "output_dim": 3}.get(name, "...")
    return (
        f"set it: plan.with_net(NNParams(input_dim=..., output_dim=...)) or "
        f"plan.with_net({name}={example})"
    )


def _section(prefix: str) -> list[PlanField]:
    return [
        f
        for f in plan_fields()
        if f.path.startswith(prefix + ".")
        and f.path.count(".") == prefix.count(".") + 1
        and f.path not in TOGGLES
    ]


def resolve(values: Mapping[str, Any]) -> Resolved:
    """Params objects from a plan's values (paths to raw values); see ``Resolved``."""
    problems: list[Problem] = []
    if "model.net" in values:  # a spec, or a built-in network's params, held as data
        kind, own = net_parts(values["model.net"])
        values = {**values, "model.net": kind}
    else:
        own = None
    model = _build(NNModelParams, _section("model"), values, problems)
    net = (
        _build(NNParams, _section("net"), values, problems)
        if model.net is enums_module.Nets.FEED_FWD
        else own  # None for a spec (its factory has the sizes) or a member given no params
    )
    optim = _build(NNOptimParams, _section("train.optim"), values, problems)
    scheduler = None
    if values.get(SCHEDULER, False):
        scheduler = _build(NNSchedulerParams, _section(SCHEDULER), values, problems)
    train = _build(
        NNTrainParams, _section("train"), values, problems, optim=optim, scheduler=scheduler
    )
    early = None
    if values.get(EARLY_STOPPING, False):
        cls = _early_stopping_class()
        section = _section(EARLY_STOPPING)
        built = _build(cls, section, values, problems)
        early = {f.name: getattr(built, f.name) for f in section}
    return Resolved(net, model, optim, scheduler, train, early, tuple(problems))
