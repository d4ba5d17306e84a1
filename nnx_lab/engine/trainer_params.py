"""How the multi-optimizer Trainer trains (§3.2): ``NNTrainerParams``.

The fields are ``NNTrainParams``' (epochs, data, seed, resume, metrics, monitor, where
the run is written), with ``optims`` and ``schedulers`` by name in place of the one
optimizer and schedule. The shared fields are validated by building the
``NNTrainParams`` the run trains under (``train_params()``), so both refuse alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from .optim_params import NNOptimParams, NNSchedulerParams
from .selection import MonitorSpec
from .train_params import NNTrainParams

__all__ = ["NNTrainerParams"]

_SHARED = (
    "n_epochs",
    "train_loader",
    "val_loader",
    "seed",
    "data_id",
    "overwrite_existing",
    "runs_root",
    "progress",
    "log_every",
    "checkpoint_every_s",
    "resume_from_run_id",
    "resume_from_checkpoint",
    "resume_mode",
    "resume_epochs",
    "stop_on_nonfinite",
    "save_phase_checkpoints",
    "metrics",
    "monitor",
    "name",
)


@dataclass(frozen=True)
class NNTrainerParams:
    """``optims``: ``{name: NNOptimParams}``, each with the ``param_groups`` that select
    the parameters it owns; ``schedulers``: ``{name: NNSchedulerParams}`` for some of
    those names (a plateau schedule on the run's §2.11 signal, as ``NNTrainParams``'
    ``scheduler``). Every other field is ``NNTrainParams``'."""

    optims: Mapping[str, NNOptimParams]
    n_epochs: int = 1
    train_loader: Any = None
    val_loader: Any = None
    schedulers: Mapping[str, NNSchedulerParams] | None = None
    seed: int = 0
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
    save_phase_checkpoints: bool = True
    metrics: Sequence[Any] = ()
    monitor: MonitorSpec | None = None
    name: str | None = None
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
        # The engine's own optimizer is never stepped by a Trainer; it carries the first
        # optimizer's base rate so the log's single ``lr`` column reads as that one's.
        placeholder = NNOptimParams(name=first.name, max_lr=first.max_lr)
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
