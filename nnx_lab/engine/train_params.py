"""How to train (``NNTrainParams``): epochs, data, optimizer, schedule, seed, resume,
declared metrics and monitor, and where the run is written; ``identity()`` is the part
that enters the run id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..runs import check_run_name, is_run_id
from .optim_params import NNOptimParams, NNSchedulerParams
from .params_base import SEED_LIMIT, Params, finite, is_int, positive_int, set_field
from .selection import MonitorSpec

__all__ = ["RESUME_CHECKPOINTS", "RESUME_EPOCHS", "RESUME_MODES", "NNTrainParams"]

RESUME_CHECKPOINTS = ("last", "best", "first", "q1", "q2", "q3")
RESUME_MODES = ("stateful", "weights_only")
RESUME_EPOCHS = ("additional", "planned")


@dataclass(frozen=True)
class NNTrainParams(Params):
    """How to train: epochs, data, optimizer, schedule, seed, and where to write the run.

    ``runs_root``, ``overwrite_existing``, ``progress``, ``log_every``,
    ``checkpoint_every_s``, ``stop_on_nonfinite``, ``save_phase_checkpoints`` and ``name``
    never change the run id;
    everything else that changes the result does (see ``identity()``).

    ``name`` (default None): a label for the run ("high lr"), recorded in its
    ``metadata.yaml`` and shown first in the runs panel, which can rename it; one line
    of at most ``nnx_lab.runs.RUN_NAME_MAX`` characters.

    ``stop_on_nonfinite`` (default True): a non-finite training loss ends the run as
    "failed", naming the first step whose loss was NaN or infinite. In fp32 the loss is
    checked before its backward pass, so that step never reaches the weights (NNx's
    rule); under fp16 / bf16 the scaler or the gradient check stops it first, and a DDP
    rank checks when the per-step values are read back. False lets such a run go on,
    as a plain PyTorch loop would.

    ``save_phase_checkpoints`` (default True, as in NNx): write the phase checkpoints
    FIRST, Q1, Q2 and Q3 besides LAST and BEST (docs/runs.md#phase-checkpoints); False
    writes LAST and BEST only. Unlike NNx's, it is not part of the run id: it changes
    which files are kept, not the result.
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
    save_phase_checkpoints: bool = True  # NNx's FIRST / Q1 / Q2 / Q3 (docs/runs.md)
    metrics: Sequence[Any] = ()  # MetricSpec: over each whole epoch and validation set (§2.6)
    monitor: MonitorSpec | None = None  # BEST, the plateau scheduler, EarlyStopping(monitor=)
    extra_metrics: Mapping[str, Any] | None = None  # name -> fn(y_true, y_pred) (§2.6)
    name: str | None = None  # the run's label (metadata.yaml), never part of its id

    _not_in_json = ("train_loader", "val_loader", "metrics", "monitor", "extra_metrics")

    def __post_init__(self) -> None:
        set_field(self, "n_epochs", positive_int(self.n_epochs, "NNTrainParams.n_epochs"))
        if not is_int(self.seed) or not 0 <= int(self.seed) < SEED_LIMIT:  # type: ignore[operator]
            raise ConfigError(
                "NNTrainParams.seed",
                self.seed,
                "pass an integer seed in [0, 2**63), e.g. 42 (params are checked as they are "
                "built: docs/nnx_differences.md)",
            )
        set_field(self, "seed", int(self.seed))
        if not isinstance(self.optim, NNOptimParams):
            raise ConfigError("NNTrainParams.optim", self.optim, "pass an NNOptimParams(...)")
        nnx_accum = self.optim.accumulate_grad_batches
        if nnx_accum is not None and nnx_accum != self.accumulation_steps:
            if self.accumulation_steps != 1:
                raise ConfigError(
                    "NNTrainParams.accumulation_steps",
                    self.accumulation_steps,
                    f"NNOptimParams.accumulate_grad_batches={nnx_accum} says otherwise; "
                    "set one of them (they are the same setting)",
                )
            set_field(self, "accumulation_steps", nnx_accum)
        if self.scheduler is not None and not isinstance(self.scheduler, NNSchedulerParams):
            raise ConfigError(
                "NNTrainParams.scheduler", self.scheduler, "pass an NNSchedulerParams(...) or None"
            )
        set_field(
            self,
            "accumulation_steps",
            positive_int(self.accumulation_steps, "NNTrainParams.accumulation_steps"),
        )
        set_field(self, "log_every", positive_int(self.log_every, "NNTrainParams.log_every"))
        set_field(self, "name", check_run_name(self.name, "NNTrainParams.name"))
        set_field(
            self,
            "checkpoint_every_s",
            finite(
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
        for name in (
            "overwrite_existing",
            "progress",
            "stop_on_nonfinite",
            "save_phase_checkpoints",
        ):
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
            ("resume_from_checkpoint", RESUME_CHECKPOINTS),
            ("resume_mode", RESUME_MODES),
            ("resume_epochs", RESUME_EPOCHS),
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
        set_field(self, "metrics", tuple(metrics))
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
            set_field(self, "extra_metrics", dict(extra) or None)

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

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NNTrainParams:
        """The params of ``to_json()`` (no loaders, metrics or monitor: pass them again)."""
        data = dict(data)
        if isinstance(data.get("optim"), dict):
            data["optim"] = NNOptimParams.from_json(data["optim"])
        if isinstance(data.get("scheduler"), dict):
            data["scheduler"] = NNSchedulerParams.from_json(data["scheduler"])
        return cls(**data)

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
