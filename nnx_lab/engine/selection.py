"""``MonitorSpec``: one named monitor that BEST selection, ReduceLROnPlateau and
EarlyStopping follow, so they agree on one decision per epoch (§2.6).

At each epoch's end the loop reads the monitored value (a declared metric, or a field
of the record: loss, error, accuracy ...) from the whole validation set or from the
whole training epoch, and decides once:

- ``"improved"``: the first finite value, or one better than the best so far by more
  than ``min_delta`` (lower for ``mode="min"``, higher for ``"max"``);
- ``"no_improvement"``: a finite value that is not;
- ``"unavailable"``: no value (no validation split, an undefined metric) or a NaN/inf.

BEST moves on ``"improved"`` (an unavailable first epoch is kept as a baseline, as in
§2.11); the plateau scheduler and ``EarlyStopping(monitor=spec)`` count
``"no_improvement"`` epochs and skip unavailable ones. The decision is recorded as a
``MonitorRecord`` in the epoch's log line (``idp.selection``).

Data only: no torch at import (the metric registry is asked for a metric's direction
when a spec is made).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ConfigError

__all__ = ["MONITOR_STATUSES", "MonitorRecord", "MonitorSpec", "MonitorState"]

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
    """

    metric: str
    min_delta: float = 0.0
    mode: str = "auto"
    split: str = "val"

    def __post_init__(self) -> None:
        if not isinstance(self.metric, str) or not self.metric:
            raise ConfigError(
                "MonitorSpec.metric", self.metric, "name a metric, e.g. MonitorSpec('nll')"
            )
        direction = EDP_DIRECTIONS.get(self.metric)
        if direction is None:
            direction = _registry_direction(self.metric)  # an unknown name is refused there
        if self.mode not in _MODES:
            raise ConfigError(
                "MonitorSpec.mode", self.mode, "use 'auto', 'min' (lower is better) or 'max'"
            )
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
        return {
            "metric": self.metric,
            "min_delta": self.min_delta,
            "mode": self.mode,
            "split": self.split,
        }

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
