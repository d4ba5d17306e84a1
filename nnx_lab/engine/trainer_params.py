"""How the multi-optimizer Trainer trains (§3.2): ``NNTrainerParams``.

The fields are ``NNTrainParams``' (epochs, data, seed, resume, metrics, monitor, where
the run is written), with ``optims`` and ``schedulers`` by name in place of the one
optimizer and schedule. The shared fields are validated by building the
``NNTrainParams`` the run trains under (``train_params()``), so both refuse alike.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence  # noqa: F401 (the derived fields' hints)
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

from ..errors import ConfigError
from .optim_params import NNOptimParams, NNSchedulerParams
from .selection import MonitorSpec  # noqa: F401 (the derived fields' hints)
from .train_params import NNTrainParams

__all__ = ["NNTrainerParams"]

# NNTrainParams' fields the Trainer does not take: its one optimizer and schedule are
# ``optims`` and ``schedulers`` by name here, and ``extra_metrics`` scores a prediction
# the Trainer's steps do not return.
_NOT_SHARED = ("optim", "scheduler", "extra_metrics")
# Fields placed after NNTrainParams' others so that the positional order stays the one
# NNTrainerParams was first published with (gradient accumulation came later).
_LAST = ("accumulation_steps",)


def _shared_fields() -> list[Field[Any]]:
    shared = [f for f in fields(NNTrainParams) if f.name not in _NOT_SHARED]
    return [f for f in shared if f.name not in _LAST] + [f for f in shared if f.name in _LAST]


_SHARED = tuple(f.name for f in _shared_fields())


def _with_shared_fields(cls: type) -> type:
    """Give ``cls`` NNTrainParams' fields (annotation, default, order) besides its own,
    so the two never drift apart: ``optims`` first, ``schedulers`` after
    ``val_loader`` (where the single ``scheduler`` sat among the data fields), then the
    rest; its own private fields stay last."""
    own = dict(inspect.get_annotations(cls))
    annotations: dict[str, Any] = {"optims": own.pop("optims")}
    schedulers = own.pop("schedulers")
    for f in _shared_fields():
        annotations[f.name] = f.type
        if f.default is not MISSING:
            setattr(cls, f.name, f.default)
        else:  # a mutable default: each instance its own
            setattr(cls, f.name, field(default_factory=f.default_factory))
        if f.name == "val_loader":
            annotations["schedulers"] = schedulers
    cls.__annotations__ = {**annotations, **own}
    return cls


@dataclass(frozen=True)
@_with_shared_fields
class NNTrainerParams:
    """``optims``: ``{name: NNOptimParams}``, each with the ``param_groups`` that select
    the parameters it owns; ``schedulers``: ``{name: NNSchedulerParams}`` for some of
    those names (a plateau schedule on the run's §2.11 signal, as ``NNTrainParams``'
    ``scheduler``). Every other field is ``NNTrainParams``' (its default, its check):
    ``n_epochs``, ``train_loader``, ``val_loader``, ``seed``, ``data_id``, ...,
    ``name``, and ``accumulation_steps`` (gradient accumulation; NNx's
    ``NNOptimParams(accumulate_grad_batches=)`` on the optimizers is taken too, when
    they all say the same)."""

    optims: Mapping[str, NNOptimParams]
    schedulers: Mapping[str, NNSchedulerParams] | None = None
    _inner: NNTrainParams = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        optims = self.optims
        if not isinstance(optims, Mapping) or not optims:
            raise ConfigError(
                "NNTrainerParams.optims",
                optims,
                'pass a non-empty dict of NNOptimParams by name, e.g. {"G": '
                'NNOptimParams(param_groups=[NNParamGroupSpec("G.*")]), "D": ...}',
            )
        for key, optim in optims.items():
            if not isinstance(key, str) or not key.isidentifier():
                raise ConfigError(
                    "NNTrainerParams.optims", key, "name each optimizer with an identifier"
                )
            if not isinstance(optim, NNOptimParams):
                raise ConfigError(
                    f"NNTrainerParams.optims[{key!r}]", optim, "pass an NNOptimParams(...)"
                )
            if not optim.param_groups:
                raise ConfigError(
                    f"NNTrainerParams.optims[{key!r}].param_groups",
                    (),
                    "select the parameters this optimizer owns with NNParamGroupSpec "
                    f'globs, e.g. param_groups=[NNParamGroupSpec("{key}.*")]',
                )
        schedulers = {} if self.schedulers is None else self.schedulers
        if not isinstance(schedulers, Mapping):
            raise ConfigError(
                "NNTrainerParams.schedulers", schedulers, "pass a dict of NNSchedulerParams by name"
            )
        for key, sched in schedulers.items():
            if key not in optims:
                raise ConfigError(
                    "NNTrainerParams.schedulers",
                    key,
                    f"each scheduler is named after an optimizer; the optimizers are "
                    f"{', '.join(map(repr, optims))}",
                )
            if not isinstance(sched, NNSchedulerParams):
                raise ConfigError(
                    f"NNTrainerParams.schedulers[{key!r}]", sched, "pass NNSchedulerParams(...)"
                )
        object.__setattr__(self, "optims", dict(optims))
        object.__setattr__(self, "schedulers", dict(schedulers))
        first = next(iter(optims.values()))
        # The engine's own optimizer is never stepped by a Trainer (its rates are the
        # log's ``lrs``); it carries NNx's accumulate_grad_batches, which the optimizers
        # must agree on, so that NNTrainParams checks it against accumulation_steps.
        placeholder = NNOptimParams(
            name=first.name, max_lr=first.max_lr, accumulate_grad_batches=_accumulation(optims)
        )
        inner = NNTrainParams(optim=placeholder, **{k: getattr(self, k) for k in _SHARED})
        object.__setattr__(self, "_inner", inner)

    def train_params(self) -> NNTrainParams:
        """The ``NNTrainParams`` the run trains under (its shared fields validated)."""
        return self._inner

    def identity(self) -> dict[str, Any]:
        """What of the optimizers and schedulers enters the run id."""
        return {
            "optims": {k: v.to_json() for k, v in self.optims.items()},
            "schedulers": {k: v.to_json() for k, v in (self.schedulers or {}).items()},
        }


def _accumulation(optims: Mapping[str, NNOptimParams]) -> int | None:
    """The optimizers' NNx ``accumulate_grad_batches``: one window for every optimizer."""
    said = {k: o.accumulate_grad_batches for k, o in optims.items()}
    values = {v for v in said.values() if v is not None}
    if len(values) > 1:
        raise ConfigError(
            "NNTrainerParams.optims",
            {k: v for k, v in said.items() if v is not None},
            "every optimizer steps once per accumulation window: give them the same "
            "accumulate_grad_batches, or set NNTrainerParams(accumulation_steps=N) once",
        )
    return values.pop() if values else None
