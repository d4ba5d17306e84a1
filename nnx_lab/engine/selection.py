"""Which epoch is BEST: the §2.11 default signal, a named ``MonitorSpec`` (§2.6), and
the one decision per epoch that BEST, ReduceLROnPlateau and EarlyStopping follow.

Without a monitor the signal is the first finite of val error, val loss, train error,
train loss (``selection_signal``), lower is better. A ``MonitorSpec`` names one value
instead (a declared metric, or a field of the record: loss, error, accuracy ...), read
from the whole validation set or from the whole training epoch, and decides once:

- ``"improved"``: the first finite value, or one better than the best so far by more
  than ``min_delta`` (lower for ``mode="min"``, higher for ``"max"``);
- ``"no_improvement"``: a finite value that is not;
- ``"unavailable"``: no value (no validation split, an undefined metric) or a NaN/inf.

BEST moves on ``"improved"`` (an epoch with no signal is kept as a baseline while no
BEST exists, §2.11); the plateau scheduler and ``EarlyStopping(monitor=spec)`` count
``"no_improvement"`` epochs and skip unavailable ones. The decision is recorded as a
``MonitorRecord`` in the epoch's log line (``idp.selection``). ``Selector`` is the
loop's side of it: the best so far and each epoch's ``EpochSelection``.

Data only: no torch at import (the metric registry is asked for a metric's direction
when a spec is made).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, MonitorUnavailableError

if TYPE_CHECKING:
    from .edp import EDP
    from .events import StepRecord

__all__ = [
    "MONITOR_STATUSES",
    "EpochSelection",
    "MonitorRecord",
    "MonitorSpec",
    "MonitorState",
    "Selector",
    "selection_signal",
]

# Record fields a monitor may name, with the direction that is better.
EDP_DIRECTIONS = {
    "loss": "lower",
    "error": "lower",
    "accuracy": "higher",
    "precision": "higher",
    "recall": "higher",
    "f1": "higher",
}
_SPLITS = ("val", "train")
_MODES = ("auto", "min", "max")
_POLICIES = ("skip", "error")
MONITOR_STATUSES = ("improved", "no_improvement", "unavailable")


def _registry_direction(metric: str) -> str:
    """The registered direction of ``metric`` (a name, or a key like ``ece(bins=10)``)."""
    from ..data.metrics import metric_info  # the registry needs torch

    return metric_info(metric.split("(", 1)[0]).direction


@dataclass(frozen=True)
class MonitorSpec:
    """``MonitorSpec("nll", min_delta=0.01)``: select on the validation NLL, lower is
    better, an improvement counts when it beats the best by more than 0.01.

    ``metric`` is a declared metric's key (``NNTrainParams(metrics=[MetricSpec(...)])``,
    or one the task records, e.g. ``"mse"``) or a record field (``"loss"``, ``"error"``,
    ``"accuracy"``, ``"precision"``, ``"recall"``, ``"f1"``). ``mode="auto"`` takes the
    metric's registered direction; ``"min"`` / ``"max"`` must agree with it. ``split``
    is ``"val"`` (the whole validation set) or ``"train"`` (the whole training epoch).

    NNx's spelling is read too: ``metric`` defaults to ``"loss"``, ``mode=None`` is
    ``"auto"``, NNx's positional order ``MonitorSpec(metric, split, mode, min_delta)``
    (a split word where ``min_delta`` stands), and ``on_missing`` / ``on_nonfinite``:
    ``"skip"`` (default: the epoch makes no decision) or ``"error"`` (the run stops
    with ``MonitorUnavailableError`` at the epoch without a value / with NaN or inf).
    """

    metric: str = "loss"
    min_delta: float = 0.0
    mode: str | None = "auto"
    split: str = "val"
    on_missing: str = "skip"
    on_nonfinite: str = "skip"

    def __post_init__(self) -> None:
        if isinstance(self.min_delta, str) and self.min_delta in _SPLITS:
            # NNx's order (metric, split, mode, min_delta): a split word in min_delta's place
            given = self.split
            object.__setattr__(self, "split", self.min_delta)
            object.__setattr__(self, "min_delta", 0.0 if given == "val" else given)
        if self.mode is None:
            object.__setattr__(self, "mode", "auto")
        for name in ("on_missing", "on_nonfinite"):
            if getattr(self, name) not in _POLICIES:
                raise ConfigError(
                    f"MonitorSpec.{name}",
                    getattr(self, name),
                    "use 'skip' (the epoch makes no decision) or 'error' (the run stops)",
                )
        if not isinstance(self.metric, str) or not self.metric:
            raise ConfigError(
                "MonitorSpec.metric", self.metric, "name a metric, e.g. MonitorSpec('nll')"
            )
        if self.mode not in _MODES:
            raise ConfigError(
                "MonitorSpec.mode", self.mode, "use 'auto', 'min' (lower is better) or 'max'"
            )
        direction = EDP_DIRECTIONS.get(self.metric)
        if direction is None:
            try:
                direction = _registry_direction(self.metric)
            except ConfigError as error:
                if self.mode == "auto":
                    raise ConfigError(
                        "MonitorSpec.metric",
                        self.metric,
                        f"{error.fix}; a metric reported under its MetricSpec name= needs "
                        "mode='min' or 'max' here (the run checks it against the metric)",
                    ) from None
                # a MetricSpec(name=...) label: the run start checks it is declared
                direction = "lower" if self.mode == "min" else "higher"
        natural = "min" if direction == "lower" else "max"
        if self.mode != "auto" and self.mode != natural:
            raise ConfigError(
                "MonitorSpec.mode",
                self.mode,
                f"{self.metric} is {direction}-is-better: pass mode={natural!r} or leave "
                "mode='auto'",
            )
        d = self.min_delta
        if (
            not isinstance(d, numbers.Real)
            or isinstance(d, bool)
            or not math.isfinite(float(d))
            or float(d) < 0
        ):
            raise ConfigError("MonitorSpec.min_delta", d, "pass a finite number >= 0, e.g. 0.01")
        object.__setattr__(self, "min_delta", float(d))
        if self.split not in _SPLITS:
            raise ConfigError(
                "MonitorSpec.split",
                self.split,
                "use 'val' (the whole validation set) or 'train' (the whole training epoch)",
            )
        object.__setattr__(self, "mode", natural)

    @property
    def is_field(self) -> bool:
        """Whether the metric is a record field (``edp.loss``) rather than ``edp.metrics[...]``."""
        return self.metric in EDP_DIRECTIONS

    @property
    def source(self) -> str:
        """Where the value is read, e.g. ``"val_edp.metrics.nll"`` or ``"val_edp.loss"``."""
        inner = self.metric if self.is_field else f"metrics.{self.metric}"
        return f"{self.split}_edp.{inner}"

    def read(self, record: dict[str, Any] | None) -> float | None:
        """The monitored value in an epoch's record (EDP JSON), or None."""
        if record is None:
            return None
        value = (
            record.get(self.metric)
            if self.is_field
            else (record.get("metrics") or {}).get(self.metric)
        )
        if value is None or isinstance(value, bool) or not isinstance(value, numbers.Real):
            return None
        return float(value)

    def better(self, value: float, best: float | None) -> bool:
        if best is None:
            return True
        if self.mode == "min":
            return value < best - self.min_delta
        return value > best + self.min_delta

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "metric": self.metric,
            "min_delta": self.min_delta,
            "mode": self.mode,
            "split": self.split,
        }
        # NNx's policies only when not the default, so existing run ids and records hold
        for name in ("on_missing", "on_nonfinite"):
            if getattr(self, name) != "skip":
                data[name] = getattr(self, name)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MonitorSpec:
        return cls(**data)


@dataclass(frozen=True)
class MonitorRecord:
    """One epoch's decision: ``value`` read this epoch (None: unavailable), ``best`` so
    far after it, ``status`` (``"improved"``, ``"no_improvement"``, ``"unavailable"``),
    ``improved``, and ``bad_epochs`` (consecutive epochs without improvement; an
    unavailable epoch neither counts nor resets)."""

    metric: str
    split: str
    mode: str
    value: float | None
    best: float | None
    status: str
    improved: bool
    bad_epochs: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> MonitorRecord | None:
        if data is None:
            return None
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__ if k in data})


class MonitorState:
    """The running decision of one ``MonitorSpec``: its best, improvements and
    consecutive epochs without improvement. Saved with a stateful checkpoint."""

    def __init__(self, spec: MonitorSpec) -> None:
        self.spec = spec
        self.best: float | None = None
        self.improvements = 0
        self.bad_epochs = 0

    def observe(self, value: float | None) -> MonitorRecord:
        spec = self.spec
        if value is None and spec.on_missing == "error":
            raise MonitorUnavailableError(
                f"monitor {spec.source!r} has no value this epoch; "
                "MonitorSpec(on_missing='skip') lets such an epoch make no decision"
            )
        if value is not None and not math.isfinite(value) and spec.on_nonfinite == "error":
            raise MonitorUnavailableError(
                f"monitor {spec.source!r} is non-finite ({value}) this epoch; "
                "MonitorSpec(on_nonfinite='skip') lets such an epoch make no decision"
            )
        if value is None or not math.isfinite(value):
            status = "unavailable"
        elif spec.better(value, self.best):
            status = "improved"
            self.best = value
            self.improvements += 1
            self.bad_epochs = 0
        else:
            status = "no_improvement"
            self.bad_epochs += 1
        return MonitorRecord(
            metric=spec.metric,
            split=spec.split,
            mode=spec.mode,
            value=value,
            best=self.best,
            status=status,
            improved=status == "improved",
            bad_epochs=self.bad_epochs,
        )

    def state_dict(self) -> dict[str, Any]:
        return {
            "spec": self.spec.to_json(),
            "best": self.best,
            "improvements": self.improvements,
            "bad_epochs": self.bad_epochs,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best = state["best"]
        self.improvements = int(state["improvements"])
        self.bad_epochs = int(state["bad_epochs"])


def selection_signal(
    val: EDP | None, last_train: StepRecord | None
) -> tuple[float | None, str | None]:
    """§2.11: the first finite of val error, val loss, train error, train loss.

    An unavailable validation record (no samples, or neither error nor loss) ends the
    walk: that epoch has no signal and the training values do not stand in.
    """
    candidates: list[tuple[str, float | None]] = []
    if val is not None:
        if val.samples == 0 or (val.error is None and val.loss is None):
            return None, None
        candidates += [("val_edp.error", val.error), ("val_edp.loss", val.loss)]
    if last_train is not None:
        candidates += [("train_edp.error", last_train.error), ("train_edp.loss", last_train.loss)]
    for source, value in candidates:
        if value is not None and math.isfinite(value):
            return float(value), source
    return None, None


@dataclass(frozen=True)
class EpochSelection:
    """One epoch's decision: its signal (None: none) and where it was read, whether it
    beat BEST, whether it is kept as a baseline BEST, the monitor's record (None without
    a monitor) and what the plateau scheduler steps on (None: it skips this epoch)."""

    signal: float | None
    source: str | None
    improved: bool
    baseline: bool
    record: MonitorRecord | None
    plateau: float | None

    @property
    def best(self) -> str | None:
        """``"improved"``, ``"baseline"`` or None: why this epoch becomes BEST, if it does."""
        return "improved" if self.improved else "baseline" if self.baseline else None


class Selector:
    """The run's selection: the monitor's running decision, or the default signal, and
    the best so far (both saved with a stateful checkpoint)."""

    def __init__(self, monitor: MonitorSpec | None) -> None:
        self.monitor_state = None if monitor is None else MonitorState(monitor)
        self.best_value: float | None = None
        self.has_best = False

    def decide(
        self, val: EDP | None, train: dict[str, Any], last_train: StepRecord | None
    ) -> EpochSelection:
        """Decide on one epoch (its validation record, its train summary, its last step
        record) and move the best so far."""
        state = self.monitor_state
        record = None
        if state is not None:
            # The scheduler is fed the count of improvements, so it sees an improvement
            # exactly when the monitor does (optim.build_scheduler).
            spec = state.spec
            read = (None if val is None else val.to_json()) if spec.split == "val" else train
            record = state.observe(spec.read(read))
            available = record.status != "unavailable"
            signal = record.value if available else None
            source = spec.source if available else None
            plateau = -float(state.improvements) if available else None
            improved = record.improved
        else:
            signal, source = selection_signal(val, last_train)
            plateau = signal
            improved = signal is not None and (self.best_value is None or signal < self.best_value)
        baseline = signal is None and not self.has_best
        if improved:
            self.best_value = signal
        if improved or baseline:
            self.has_best = True
        return EpochSelection(signal, source, improved, baseline, record, plateau)
