"""Frozen, validated parameter dataclasses with a canonical JSON form.

Every check runs in ``__post_init__``, so a bad value is refused where it is typed,
long before a run directory exists. ``to_json()`` gives the canonical form that enters
the run id; fields that do not change the result (paths, progress, logging) are kept
out of it by ``NNTrainParams.identity()``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Any

from ..errors import ConfigError
from ..runs import is_run_id
from .enums import Activations, Devices, Losses, Nets, Optims, coerce_enum
from .precision import PrecisionPolicy, normalize_policy
from .selection import MonitorSpec
from .task_spec import TaskSpec

__all__ = [
    "CustomLossRef",
    "NNModelParams",
    "NNOptimParams",
    "NNOptimParamsBuilder",
    "NNParams",
    "NNSchedulerParams",
    "NNTrainParams",
]


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _positive_int(value: object, name: str, minimum: int = 1) -> int:
    if not _is_int(value) or int(value) < minimum:  # type: ignore[arg-type]
        raise ConfigError(name, value, f"pass an integer >= {minimum}")
    return int(value)  # type: ignore[arg-type]


def _finite(
    value: object,
    name: str,
    *,
    low: float,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
    fix: str,
) -> float:
    if not _is_real(value) or not math.isfinite(float(value)):  # type: ignore[arg-type]
        raise ConfigError(name, value, fix)
    v = float(value)  # type: ignore[arg-type]
    if v < low or (low_open and v == low) or v > high or (high_open and v == high):
        raise ConfigError(name, value, fix)
    return v


# The largest float32: optimizer arithmetic runs in float32, where a larger value is inf.
FLOAT32_MAX = 3.4028234663852886e38
_SEED_LIMIT = 2**63  # torch.manual_seed takes a signed 64-bit integer


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)


def _json_value(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_json_value(v) for v in value]
    return value


class _Params:
    """Shared behaviour: canonical JSON over the dataclass fields."""

    _not_in_json: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            f.name: _json_value(getattr(self, f.name))
            for f in fields(self)  # type: ignore[arg-type]
            if f.name not in self._not_in_json
        }

    def replace(self, **changes: Any):
        """A copy with ``changes`` applied and validated again."""
        return replace(self, **changes)  # type: ignore[type-var]


@dataclass(frozen=True)
class NNParams(_Params):
    """The network's shape: a feed-forward MLP of ``hidden_dims`` layers."""

    input_dim: int
    output_dim: int
    hidden_dims: Sequence[int] = ()
    dropout_prob: float = 0.0
    activation: Activations = Activations.RELU

    def __post_init__(self) -> None:
        _set(self, "input_dim", _positive_int(self.input_dim, "NNParams.input_dim"))
        _set(self, "output_dim", _positive_int(self.output_dim, "NNParams.output_dim"))
        dims = self.hidden_dims
        if isinstance(dims, str | bytes) or not isinstance(dims, Sequence):
            raise ConfigError(
                "NNParams.hidden_dims", dims, "pass a list of positive integers, e.g. [32, 16]"
            )
        for d in dims:
            if not _is_int(d) or int(d) < 1:
                raise ConfigError(
                    "NNParams.hidden_dims",
                    list(dims),
                    f"every hidden dim must be a positive integer (got {d!r})",
                )
        _set(self, "hidden_dims", tuple(int(d) for d in dims))
        _set(
            self,
            "dropout_prob",
            _finite(
                self.dropout_prob,
                "NNParams.dropout_prob",
                low=0.0,
                high=1.0,
                high_open=True,
                fix="pass a probability in [0, 1), e.g. 0.1",
            ),
        )
        _set(self, "activation", coerce_enum(Activations, self.activation, "NNParams.activation"))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NNParams:
        return cls(**data)


@dataclass(frozen=True)
class CustomLossRef:
    """A custom loss named in a saved record; the object itself must be passed again."""

    identity: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.identity.get("custom", "custom loss"))


@dataclass(frozen=True)
class NNModelParams(_Params):
    """What the model is: net kind, device, loss and precision policy.

    ``loss`` is a ``Losses`` member, or your own loss: an ``nn.Module`` or a callable
    ``loss(out, y)`` that receives the raw network output and returns the batch mean
    (§2.10). A custom loss enters the run id through its type, code and settings.
    """

    net: Nets = Nets.FEED_FWD
    device: Devices = Devices.CPU
    loss: Any = Losses.CROSS_ENTROPY
    precision: Any = None  # a PrecisionPolicy; None means fp32
    mixed_precision: bool = False  # NNx's legacy flag: fp16 autocast + scaler on CUDA only
    task: TaskSpec | None = None  # §2.5; None: the loss's legacy classification behaviour

    def __post_init__(self) -> None:
        _set(self, "net", coerce_enum(Nets, self.net, "NNModelParams.net"))
        _set(self, "device", coerce_enum(Devices, self.device, "NNModelParams.device"))
        if isinstance(self.loss, str) or not (
            callable(self.loss) or isinstance(self.loss, CustomLossRef)
        ):
            _set(self, "loss", coerce_enum(Losses, self.loss, "NNModelParams.loss"))
        if not isinstance(self.mixed_precision, bool):
            raise ConfigError(
                "NNModelParams.mixed_precision", self.mixed_precision, "pass True or False"
            )
        _set(self, "precision", normalize_policy(self.precision, self.mixed_precision))
        if self.task is not None:
            if isinstance(self.task, dict):  # a saved record's task
                _set(self, "task", TaskSpec.from_json(self.task))
            if not isinstance(self.task, TaskSpec):
                raise ConfigError(
                    "NNModelParams.task",
                    self.task,
                    "pass TaskSpec.categorical(n), TaskSpec.regression(n) or "
                    "TaskSpec.multilabel(n), or None",
                )
            self.task.check(self.loss)

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        if self.task is None:
            del data["task"]  # absent, not null: task-less run ids stay as they were
        data["precision"] = None if self.precision is None else self.precision.to_json()
        if isinstance(self.loss, CustomLossRef):
            data["loss"] = self.loss.identity
        elif not isinstance(self.loss, Losses):
            from .losses import custom_loss_identity  # torch: params stay importable without it

            data["loss"] = custom_loss_identity(self.loss)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NNModelParams:
        data = dict(data)
        if data.get("precision") is not None:
            data["precision"] = PrecisionPolicy.from_json(data["precision"])
        if isinstance(data.get("loss"), dict):
            data["loss"] = CustomLossRef(data["loss"])
        return cls(**data)


_BETAS_DEFAULT = (0.9, 0.999)


@dataclass(frozen=True)
class NNOptimParams(_Params):
    """Optimizer settings. ``momentum`` is Adam's (beta1, beta2) pair, or SGD/RMSprop's float."""

    name: Optims = Optims.ADAM
    max_lr: float = 1e-3
    momentum: Any = None  # None: (0.9, 0.999) for Adam/AdamW, 0.9 for SGD, 0.0 for RMSprop
    weight_decay: float = 0.0
    grad_clip_norm: float | None = None

    def __post_init__(self) -> None:
        name = coerce_enum(Optims, self.name, "NNOptimParams.name")
        _set(self, "name", name)
        _set(
            self,
            "max_lr",
            _finite(
                self.max_lr,
                "NNOptimParams.max_lr",
                low=0.0,
                high=FLOAT32_MAX,
                low_open=True,
                fix="pass a learning rate > 0 that float32 can hold (<= 3.4e38), e.g. 1e-3",
            ),
        )
        _set(
            self,
            "weight_decay",
            _finite(
                self.weight_decay,
                "NNOptimParams.weight_decay",
                low=0.0,
                high=FLOAT32_MAX,
                fix="pass a weight decay >= 0 that float32 can hold, e.g. 1e-4",
            ),
        )
        if self.grad_clip_norm is not None:
            _set(
                self,
                "grad_clip_norm",
                _finite(
                    self.grad_clip_norm,
                    "NNOptimParams.grad_clip_norm",
                    low=0.0,
                    low_open=True,
                    fix="pass a norm > 0, or None to not clip",
                ),
            )
        _set(self, "momentum", self._momentum(name, self.momentum))

    @staticmethod
    def _momentum(name: Optims, value: Any) -> Any:
        if name in (Optims.ADAM, Optims.ADAMW):
            if value is None:
                return _BETAS_DEFAULT
            ok = (
                isinstance(value, Sequence)
                and not isinstance(value, str)
                and len(value) == 2
                and all(_is_real(b) and 0.0 <= float(b) < 1.0 for b in value)
            )
            if not ok:
                raise ConfigError(
                    "NNOptimParams.momentum",
                    value,
                    f"{name.name} takes a (beta1, beta2) pair in [0, 1), e.g. (0.9, 0.999)",
                )
            return (float(value[0]), float(value[1]))
        if value is None:
            return 0.9 if name is Optims.SGD else 0.0
        return _finite(
            value,
            "NNOptimParams.momentum",
            low=0.0,
            high=1.0,
            high_open=True,
            fix=f"{name.name} takes one momentum in [0, 1), e.g. 0.9",
        )

    @staticmethod
    def builder() -> NNOptimParamsBuilder:
        return NNOptimParamsBuilder()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NNOptimParams:
        return cls(**data)


class NNOptimParamsBuilder:
    """``NNOptimParams.builder().adamw(max_lr=1e-3).grad_clip_norm(1.0).build()``."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def _optim(self, name: Optims, max_lr: float, **kwargs: Any) -> NNOptimParamsBuilder:
        self._values.update(name=name, max_lr=max_lr, **kwargs)
        return self

    def adam(self, max_lr: float = 1e-3, **kwargs: Any) -> NNOptimParamsBuilder:
        return self._optim(Optims.ADAM, max_lr, **kwargs)

    def adamw(self, max_lr: float = 1e-3, **kwargs: Any) -> NNOptimParamsBuilder:
        return self._optim(Optims.ADAMW, max_lr, **kwargs)

    def sgd(self, max_lr: float = 1e-2, **kwargs: Any) -> NNOptimParamsBuilder:
        return self._optim(Optims.SGD, max_lr, **kwargs)

    def rmsprop(self, max_lr: float = 1e-3, **kwargs: Any) -> NNOptimParamsBuilder:
        return self._optim(Optims.RMSPROP, max_lr, **kwargs)

    def weight_decay(self, value: float) -> NNOptimParamsBuilder:
        self._values["weight_decay"] = value
        return self

    def grad_clip_norm(self, value: float | None) -> NNOptimParamsBuilder:
        self._values["grad_clip_norm"] = value
        return self

    def build(self) -> NNOptimParams:
        return NNOptimParams(**self._values)


@dataclass(frozen=True)
class NNSchedulerParams(_Params):
    """ReduceLROnPlateau on the §2.11 signal (lower is better, relative threshold)."""

    min_lr: float = 0.0
    factor: float = 0.1
    patience: int = 10
    cooldown: int = 0
    threshold: float = 1e-4

    def __post_init__(self) -> None:
        _set(
            self,
            "min_lr",
            _finite(
                self.min_lr,
                "NNSchedulerParams.min_lr",
                low=0.0,
                fix="pass a learning-rate floor >= 0",
            ),
        )
        _set(
            self,
            "factor",
            _finite(
                self.factor,
                "NNSchedulerParams.factor",
                low=0.0,
                high=1.0,
                low_open=True,
                high_open=True,
                fix="pass a factor in (0, 1), e.g. 0.5",
            ),
        )
        _set(self, "patience", _positive_int(self.patience, "NNSchedulerParams.patience", 0))
        _set(self, "cooldown", _positive_int(self.cooldown, "NNSchedulerParams.cooldown", 0))
        _set(
            self,
            "threshold",
            _finite(
                self.threshold,
                "NNSchedulerParams.threshold",
                low=0.0,
                fix="pass a relative threshold >= 0, e.g. 1e-4",
            ),
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NNSchedulerParams:
        return cls(**data)


_RESUME_CHECKPOINTS = ("last", "best")
_RESUME_MODES = ("stateful", "weights_only")
_RESUME_EPOCHS = ("additional", "planned")


@dataclass(frozen=True)
class NNTrainParams(_Params):
    """How to train: epochs, data, optimizer, schedule, seed, and where to write the run.

    ``runs_root``, ``overwrite_existing``, ``progress``, ``log_every``,
    ``checkpoint_every_s`` and ``stop_on_nonfinite`` never change the run id; everything
    else that changes the result does (see ``identity()``).

    ``stop_on_nonfinite`` (default True): a non-finite training loss ends the run as
    "failed", naming the first step whose loss was NaN or infinite (checked when the
    per-step values are read back, every ``log_every`` steps: no host sync per step).
    False lets such a run go on, as a plain PyTorch loop would.
    """

    n_epochs: int = 1
    train_loader: Any = None
    val_loader: Any = None
    seed: int = 0
    optim: NNOptimParams = field(default_factory=NNOptimParams)
    scheduler: NNSchedulerParams | None = None
    accumulation_steps: int = 1
    data_id: str | None = None
    overwrite_existing: bool = False
    runs_root: str | None = None
    progress: bool = True
    log_every: int = 50
    checkpoint_every_s: float = 30.0
    resume_from_run_id: str | None = None
    resume_from_checkpoint: str = "last"
    resume_mode: str = "stateful"
    resume_epochs: str = "additional"
    stop_on_nonfinite: bool = True
    metrics: Sequence[Any] = ()  # MetricSpec: over each whole epoch and validation set (§2.6)
    monitor: MonitorSpec | None = None  # BEST, the plateau scheduler, EarlyStopping(monitor=)
    extra_metrics: Mapping[str, Any] | None = None  # name -> fn(y_true, y_pred) (§2.6)

    _not_in_json = ("train_loader", "val_loader", "metrics", "monitor", "extra_metrics")

    def __post_init__(self) -> None:
        _set(self, "n_epochs", _positive_int(self.n_epochs, "NNTrainParams.n_epochs"))
        if not _is_int(self.seed) or not 0 <= int(self.seed) < _SEED_LIMIT:  # type: ignore[operator]
            raise ConfigError(
                "NNTrainParams.seed",
                self.seed,
                "pass an integer seed in [0, 2**63), e.g. 42",
            )
        _set(self, "seed", int(self.seed))
        if not isinstance(self.optim, NNOptimParams):
            raise ConfigError("NNTrainParams.optim", self.optim, "pass an NNOptimParams(...)")
        if self.scheduler is not None and not isinstance(self.scheduler, NNSchedulerParams):
            raise ConfigError(
                "NNTrainParams.scheduler", self.scheduler, "pass an NNSchedulerParams(...) or None"
            )
        _set(
            self,
            "accumulation_steps",
            _positive_int(self.accumulation_steps, "NNTrainParams.accumulation_steps"),
        )
        _set(self, "log_every", _positive_int(self.log_every, "NNTrainParams.log_every"))
        _set(
            self,
            "checkpoint_every_s",
            _finite(
                self.checkpoint_every_s,
                "NNTrainParams.checkpoint_every_s",
                low=0.0,
                fix="pass seconds >= 0 between LAST writes (0: every epoch)",
            ),
        )
        if self.data_id is not None and (not isinstance(self.data_id, str) or not self.data_id):
            raise ConfigError(
                "NNTrainParams.data_id",
                self.data_id,
                "pass a non-empty string naming the data set and its version",
            )
        for name in ("overwrite_existing", "progress", "stop_on_nonfinite"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(
                    f"NNTrainParams.{name}", getattr(self, name), "pass True or False"
                )
        if self.resume_from_run_id is not None and not is_run_id(self.resume_from_run_id):
            raise ConfigError(
                "NNTrainParams.resume_from_run_id",
                self.resume_from_run_id,
                "pass the id of an earlier run (run.id: 32 lowercase hex characters), or None",
            )
        self._check_metrics()
        for name, allowed in (
            ("resume_from_checkpoint", _RESUME_CHECKPOINTS),
            ("resume_mode", _RESUME_MODES),
            ("resume_epochs", _RESUME_EPOCHS),
        ):
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(
                    f"NNTrainParams.{name}",
                    value,
                    f"use one of {', '.join(repr(a) for a in allowed)}",
                )

    def _check_metrics(self) -> None:
        metrics = self.metrics
        if isinstance(metrics, str) or not isinstance(metrics, Sequence):
            raise ConfigError(
                "NNTrainParams.metrics",
                metrics,
                "pass a list of MetricSpec, e.g. [MetricSpec('nll'), MetricSpec('accuracy')]",
            )
        if metrics:
            from ..data.metrics import MetricSpec  # the registry needs torch

            specs = []
            for m in metrics:
                if isinstance(m, str):
                    m = MetricSpec(m)
                if not isinstance(m, MetricSpec):
                    raise ConfigError(
                        "NNTrainParams.metrics",
                        m,
                        "each entry is a MetricSpec, e.g. MetricSpec('f1_weighted')",
                    )
                specs.append(m)
            keys = [m.key for m in specs]
            dupes = sorted({k for k in keys if keys.count(k) > 1})
            if dupes:
                raise ConfigError("NNTrainParams.metrics", dupes, "declare each metric once")
            metrics = specs
        _set(self, "metrics", tuple(metrics))
        if self.monitor is not None and not isinstance(self.monitor, MonitorSpec):
            raise ConfigError(
                "NNTrainParams.monitor",
                self.monitor,
                "pass a MonitorSpec, e.g. MonitorSpec('nll', min_delta=0.01), or None",
            )
        extra = self.extra_metrics
        if extra is not None:
            if not isinstance(extra, Mapping):
                raise ConfigError(
                    "NNTrainParams.extra_metrics",
                    extra,
                    "pass a dict {name: fn(y_true, y_pred) -> float}",
                )
            for name, fn in extra.items():
                if not isinstance(name, str) or not name:
                    raise ConfigError(
                        "NNTrainParams.extra_metrics", name, "name each metric with a string"
                    )
                if not callable(fn):
                    raise ConfigError(
                        f"NNTrainParams.extra_metrics[{name!r}]",
                        fn,
                        "pass a callable fn(y_true, y_pred) returning a number",
                    )
            _set(self, "extra_metrics", dict(extra) or None)

    def identity(self) -> dict[str, Any]:
        """The training values that change the result (data identity is added by the run).

        Declared metrics, the monitor and extra metrics enter only when set, so the run
        ids of runs without them stay as they were."""
        ident = self._base_identity()
        if self.metrics:
            ident["metrics"] = [m.state() for m in self.metrics]
        if self.monitor is not None:
            ident["monitor"] = self.monitor.to_json()
        if self.extra_metrics:
            from .fingerprint import callable_identity

            ident["extra_metrics"] = {
                name: callable_identity(fn) for name, fn in sorted(self.extra_metrics.items())
            }
        return ident

    def _base_identity(self) -> dict[str, Any]:
        return {
            "n_epochs": self.n_epochs,
            "seed": self.seed,
            "optim": self.optim.to_json(),
            "scheduler": None if self.scheduler is None else self.scheduler.to_json(),
            "accumulation_steps": self.accumulation_steps,
            "resume": None
            if self.resume_from_run_id is None
            else {
                "from_run_id": self.resume_from_run_id,
                "checkpoint": self.resume_from_checkpoint,
                "mode": self.resume_mode,
                "epochs": self.resume_epochs,
            },
        }
