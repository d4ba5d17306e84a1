"""The optimizer's and the plateau scheduler's parameters (``NNOptimParams``, its
builder, ``NNSchedulerParams``).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .enums import Optims, coerce_enum
from .param_groups import NNParamGroupSpec, coerce_group_specs
from .params_base import FLOAT32_MAX, Params, finite, is_real, positive_int, set_field

__all__ = ["NNOptimParams", "NNOptimParamsBuilder", "NNSchedulerParams"]


_BETAS_DEFAULT = (0.9, 0.999)


@dataclass(frozen=True)
class NNOptimParams(Params):
    """Optimizer settings. ``momentum`` is Adam's (beta1, beta2) pair, or SGD/RMSprop's float.

    ``param_groups``: fine-tuning rules (``NNParamGroupSpec``), first match wins; the
    parameters no rule matches train with ``max_lr`` and ``weight_decay``.

    ``fused``: torch's fused kernel for Adam, AdamW and SGD (the whole update of a
    tensor in one kernel): less time per step, but its rounding is its own, so the
    weights differ from the default's in their last bits and the setting enters the
    run id (docs/performance.md#fused-optimizer-kernels-on-request)."""

    name: Optims = Optims.ADAM
    max_lr: float = 1e-3
    momentum: Any = None  # None: (0.9, 0.999) for Adam/AdamW, 0.9 for SGD, 0.0 for RMSprop
    weight_decay: float = 0.0
    grad_clip_norm: float | None = None
    param_groups: tuple[NNParamGroupSpec, ...] = ()
    fused: bool = False

    def __post_init__(self) -> None:
        name = coerce_enum(Optims, self.name, "NNOptimParams.name")
        set_field(self, "name", name)
        if not isinstance(self.fused, bool):
            raise ConfigError(
                "NNOptimParams.fused",
                self.fused,
                "True (torch's fused optimizer kernel) or False (the default)",
            )
        if self.fused and name is Optims.RMSPROP:
            raise ConfigError(
                "NNOptimParams.fused",
                True,
                "torch has no fused RMSprop: leave fused=False, or use Adam, AdamW or SGD",
            )
        set_field(self, "param_groups", coerce_group_specs(self.param_groups))
        set_field(
            self,
            "max_lr",
            finite(
                self.max_lr,
                "NNOptimParams.max_lr",
                low=0.0,
                high=FLOAT32_MAX,
                low_open=True,
                fix="pass a learning rate > 0 that float32 can hold (<= 3.4e38), e.g. 1e-3",
            ),
        )
        set_field(
            self,
            "weight_decay",
            finite(
                self.weight_decay,
                "NNOptimParams.weight_decay",
                low=0.0,
                high=FLOAT32_MAX,
                fix="pass a weight decay >= 0 that float32 can hold, e.g. 1e-4",
            ),
        )
        if self.grad_clip_norm is not None:
            set_field(
                self,
                "grad_clip_norm",
                finite(
                    self.grad_clip_norm,
                    "NNOptimParams.grad_clip_norm",
                    low=0.0,
                    low_open=True,
                    fix="pass a norm > 0, or None to not clip",
                ),
            )
        set_field(self, "momentum", self._momentum(name, self.momentum))

    @staticmethod
    def _momentum(name: Optims, value: Any) -> Any:
        if name in (Optims.ADAM, Optims.ADAMW):
            if value is None:
                return _BETAS_DEFAULT
            ok = (
                isinstance(value, Sequence)
                and not isinstance(value, str)
                and len(value) == 2
                and all(is_real(b) and 0.0 <= float(b) < 1.0 for b in value)
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
        return finite(
            value,
            "NNOptimParams.momentum",
            low=0.0,
            high=1.0,
            high_open=True,
            fix=f"{name.name} takes one momentum in [0, 1), e.g. 0.9",
        )

    @property
    def accumulate_grad_batches(self) -> int | None:
        """NNx's place for gradient accumulation (``NNOptimParams(accumulate_grad_batches=
        4)``); ``NNTrainParams`` takes it as its ``accumulation_steps``."""
        return self.__dict__.get("_accumulate_grad_batches")

    @staticmethod
    def builder() -> NNOptimParamsBuilder:
        return NNOptimParamsBuilder()

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        if not self.param_groups:  # absent by default: existing run ids stay as they were
            data.pop("param_groups")
        if not self.fused:  # the same: only a fused optimizer is another run
            data.pop("fused")
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NNOptimParams:
        return cls(**data)


_dataclass_init = NNOptimParams.__init__


def _init_with_nnx_accumulation(
    self: NNOptimParams, *args: Any, accumulate_grad_batches: int | None = None, **kwargs: Any
) -> None:
    # NNx's keyword, kept off the dataclass's fields: the optimizer's JSON (so run ids),
    # its equality and a plan's fields stay nnx-lab's, where accumulation is a training
    # setting (NNTrainParams.accumulation_steps) that the run records once.
    if accumulate_grad_batches is not None:
        accumulate_grad_batches = positive_int(
            accumulate_grad_batches, "NNOptimParams.accumulate_grad_batches"
        )
    object.__setattr__(self, "_accumulate_grad_batches", accumulate_grad_batches)
    _dataclass_init(self, *args, **kwargs)


def _signature() -> inspect.Signature:
    sig = inspect.signature(_dataclass_init)
    extra = inspect.Parameter(
        "accumulate_grad_batches", inspect.Parameter.KEYWORD_ONLY, default=None
    )
    return sig.replace(parameters=[*sig.parameters.values(), extra])


_init_with_nnx_accumulation.__signature__ = _signature()  # type: ignore[attr-defined]
NNOptimParams.__init__ = _init_with_nnx_accumulation  # type: ignore[method-assign]


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

    def fused(self, value: bool = True) -> NNOptimParamsBuilder:
        """torch's fused Adam / AdamW / SGD kernel (another run id; see NNOptimParams)."""
        self._values["fused"] = value
        return self

    def param_groups(self, *specs: NNParamGroupSpec) -> NNOptimParamsBuilder:
        self._values["param_groups"] = specs
        return self

    def build(self) -> NNOptimParams:
        return NNOptimParams(**self._values)


@dataclass(frozen=True)
class NNSchedulerParams(Params):
    """ReduceLROnPlateau on the §2.11 signal (lower is better, relative threshold)."""

    min_lr: float = 0.0
    factor: float = 0.1
    patience: int = 10
    cooldown: int = 0
    threshold: float = 1e-4

    def __post_init__(self) -> None:
        set_field(
            self,
            "min_lr",
            finite(
                self.min_lr,
                "NNSchedulerParams.min_lr",
                low=0.0,
                fix="pass a learning-rate floor >= 0",
            ),
        )
        set_field(
            self,
            "factor",
            finite(
                self.factor,
                "NNSchedulerParams.factor",
                low=0.0,
                high=1.0,
                low_open=True,
                high_open=True,
                fix="pass a factor in (0, 1), e.g. 0.5",
            ),
        )
        set_field(self, "patience", positive_int(self.patience, "NNSchedulerParams.patience", 0))
        set_field(self, "cooldown", positive_int(self.cooldown, "NNSchedulerParams.cooldown", 0))
        set_field(
            self,
            "threshold",
            finite(
                self.threshold,
                "NNSchedulerParams.threshold",
                low=0.0,
                fix="pass a relative threshold >= 0, e.g. 1e-4",
            ),
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NNSchedulerParams:
        return cls(**data)
