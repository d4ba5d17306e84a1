"""``TaskSpec``: what a model's outputs mean, declared (§2.5).

Without a task a model keeps NNx's legacy behaviour: the loss decides how outputs are
decoded and scored. A declared task makes it explicit and changes three things: the
records carry the task's own metrics (mse / mae for regression, the multilabel set for
independent labels) and the count of valid targets, instead of fabricating accuracy or
F1; a NaN target (regression, multilabel) is masked out of the loss and of every metric
alike; and ``predict_proba`` can derive its ``ProbabilitySpec`` from the task.

This module is data only (no torch): a saved run's model parameters are read back
without it.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from ..errors import TaskValidationError
from .enums import Losses

__all__ = ["TASK_KINDS", "TaskSpec"]

TASK_KINDS = ("categorical", "regression", "multilabel")

# The metrics a task's records carry at every step and epoch, besides the loss. A
# categorical task keeps EDP's own fields (accuracy, error, precision, recall, F1).
_TASK_METRICS: dict[str, tuple[str, ...]] = {
    "categorical": (),
    "regression": ("mse", "mae"),
    "multilabel": ("subset_accuracy", "hamming_loss", "f1_micro", "f1"),
}

# Built-in losses each task trains with; a custom loss (a module or a callable) may
# train any task: it receives the raw outputs and decides.
_LOSSES: dict[str, tuple[Losses, ...]] = {
    "categorical": (Losses.CROSS_ENTROPY, Losses.NEGATIVE_LOG_LIKELIHOOD),
    "regression": (Losses.MEAN_SQUARED_ERROR,),
    "multilabel": (Losses.BINARY_CROSS_ENTROPY,),
}

_FACTORY = {
    "categorical": "TaskSpec.categorical(n_classes)",
    "regression": "TaskSpec.regression(n_outputs)",
    "multilabel": "TaskSpec.multilabel(n_labels)",
}


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class TaskSpec:
    """``TaskSpec.categorical(n, ignore_index=-100)``, ``TaskSpec.regression(n)`` or
    ``TaskSpec.multilabel(n, threshold=0.5)``; pass it as ``NNModelParams(task=...)``.

    ``n_outputs`` is the network's output width (classes, regression targets or labels).
    ``ignore_index`` (categorical) leaves those targets out of the loss and every metric;
    ``threshold`` (multilabel) is the probability at or above which a label is decoded
    as present.
    """

    kind: str
    n_outputs: int | None  # None: the network's output width (NNModel fills it in)
    ignore_index: int | None = None
    threshold: float | None = None
    labels: tuple[str, ...] | None = None  # NNx's: one name per output, in order

    def __post_init__(self) -> None:
        if self.kind not in TASK_KINDS:
            raise TaskValidationError(
                "TaskSpec.kind",
                self.kind,
                "use TaskSpec.categorical(n), TaskSpec.regression(n) or TaskSpec.multilabel(n)",
            )
        least = 2 if self.kind == "categorical" else 1
        if self.labels is not None:
            labels = self.labels
            if isinstance(labels, str | bytes) or not all(
                isinstance(x, str) and x.strip() for x in labels
            ):
                raise TaskValidationError(
                    f"{_FACTORY[self.kind]}: labels",
                    labels,
                    "pass a sequence of non-empty strings, one per output",
                )
            labels = tuple(labels)
            if len(set(labels)) != len(labels):
                raise TaskValidationError(
                    f"{_FACTORY[self.kind]}: labels", labels, "name each output once"
                )
            object.__setattr__(self, "labels", labels)
            if self.n_outputs is None:
                object.__setattr__(self, "n_outputs", len(labels))
            elif self.n_outputs != len(labels):
                raise TaskValidationError(
                    f"{_FACTORY[self.kind]}: labels",
                    labels,
                    f"TaskSpec has {len(labels)} label(s) but num_outputs={self.n_outputs}",
                )
        if self.n_outputs is None:
            pass  # the network's width, filled in when the model is built
        elif not _is_int(self.n_outputs) or int(self.n_outputs) < least:
            why = (
                "pass n >= 2 classes (a single binary logit is TaskSpec.multilabel(1))"
                if self.kind == "categorical"
                else f"pass the number of outputs, an integer >= {least}"
            )
            raise TaskValidationError(f"{_FACTORY[self.kind]}: n", self.n_outputs, why)
        else:
            object.__setattr__(self, "n_outputs", int(self.n_outputs))
        if self.kind == "categorical":
            ii = self.ignore_index
            if ii is not None and not _is_int(ii):
                raise TaskValidationError(
                    "TaskSpec.categorical: ignore_index",
                    ii,
                    "pass an integer target value to leave out (torch's default is -100), or None",
                )
            if ii is not None and self.n_outputs is not None and 0 <= int(ii) < self.n_outputs:
                raise TaskValidationError(
                    "TaskSpec.categorical: ignore_index",
                    ii,
                    f"it is a class index in [0, {self.n_outputs}); pick a value outside, "
                    "e.g. -100",
                )
            object.__setattr__(self, "ignore_index", None if ii is None else int(ii))
        elif self.ignore_index is not None:
            raise TaskValidationError(
                f"{_FACTORY[self.kind]}: ignore_index",
                self.ignore_index,
                "only categorical tasks ignore a target value; mark a missing "
                f"{self.kind} target with NaN",
            )
        if self.kind == "multilabel":
            t = self.threshold
            if (
                not isinstance(t, numbers.Real)
                or isinstance(t, bool)
                or not math.isfinite(float(t))
                or not 0.0 < float(t) < 1.0
            ):
                raise TaskValidationError(
                    "TaskSpec.multilabel: threshold",
                    t,
                    "pass a probability strictly between 0 and 1, e.g. 0.5",
                )
            object.__setattr__(self, "threshold", float(t))
        elif self.threshold is not None:
            raise TaskValidationError(
                f"{_FACTORY[self.kind]}: threshold",
                self.threshold,
                "only multilabel tasks decode at a threshold",
            )

    # -- constructors ----------------------------------------------------------------------
    @classmethod
    def categorical(
        cls, n: int | None = None, ignore_index: int | None = -100, *, labels: Any = None
    ) -> TaskSpec:
        """One class out of ``n`` per row (softmax over the class axis). ``n`` may be
        left out (the network's output width, or the number of ``labels``)."""
        return cls("categorical", n, ignore_index=ignore_index, labels=labels)

    @classmethod
    def regression(cls, n: int | None = 1, *, labels: Any = None) -> TaskSpec:
        """``n`` continuous targets per row."""
        if labels is not None and n == 1:
            n = None  # the labels count them
        return cls("regression", n, labels=labels)

    @classmethod
    def multilabel(
        cls, n: int | None = None, threshold: float = 0.5, *, labels: Any = None
    ) -> TaskSpec:
        """``n`` independent binary labels per row (one sigmoid each)."""
        return cls("multilabel", n, threshold=threshold, labels=labels)

    def with_outputs(self, n: int) -> TaskSpec:
        """This task over ``n`` outputs (how a task declared without ``n`` is fixed)."""
        if self.n_outputs is not None:
            return self
        return TaskSpec(self.kind, n, self.ignore_index, self.threshold, self.labels)

    # -- what it implies -------------------------------------------------------------------
    @property
    def metric_kind(self) -> str:
        """The metric registry's kind for these outputs."""
        return {"categorical": "categorical", "regression": "regression"}.get(
            self.kind, "bernoulli"
        )

    @property
    def record_metrics(self) -> tuple[str, ...]:
        """Registry metrics every step and epoch record of this task carries."""
        return _TASK_METRICS[self.kind]

    @property
    def logit_threshold(self) -> float:
        """Multilabel: the logit at or above which a label is decoded as present."""
        t = 0.5 if self.threshold is None else self.threshold
        return math.log(t / (1.0 - t))

    def metric_specs(self) -> list[Any]:
        """``MetricSpec`` of the metrics that suit this task, for ``NNTrainParams(metrics=...)``."""
        from ..data.metrics import MetricSpec  # the registry needs torch

        names = {
            "categorical": ("nll", "accuracy", "f1", "brier"),
            "regression": ("mse", "mae"),
            "multilabel": ("subset_accuracy", "hamming_loss", "f1_micro", "f1", "nll"),
        }[self.kind]
        return [MetricSpec(n) for n in names]

    def probability_spec(self) -> Any:
        """The ``ProbabilitySpec`` of these outputs; None for regression (no
        probabilities: ``predict_proba`` returns the values as ``decoded``)."""
        if self.kind == "regression":
            return None
        from .probabilities import ProbabilitySpec  # torch: this module stays data only

        kind = "categorical" if self.kind == "categorical" else "bernoulli"
        return ProbabilitySpec(kind=kind, labels=self.labels)

    def check(self, loss: Any, output_dim: int | None = None, field: str = "NNModelParams.task"):
        """Refuse a loss or an output width this task cannot train with."""
        if isinstance(loss, Losses):
            allowed = _LOSSES[self.kind]
            if loss not in allowed:
                suited = [k for k, v in _LOSSES.items() if loss in v]
                other = f"; {loss.name} trains {_FACTORY[suited[0]]}" if suited else ""
                raise TaskValidationError(
                    field,
                    f"{self!r} with loss={loss.name}",
                    f"a {self.kind} task trains with "
                    f"{' or '.join(f'Losses.{x.name}' for x in allowed)}{other}",
                )
        if output_dim is not None and self.n_outputs is not None and output_dim != self.n_outputs:
            raise TaskValidationError(
                field,
                f"{self!r} for a network with NNParams.output_dim={output_dim}",
                f"declare the task over {output_dim} outputs "
                f"({_FACTORY[self.kind].split('(')[0]}({output_dim}, ...)) or build the "
                f"network with NNParams(output_dim={self.n_outputs})",
            )

    # -- JSON ------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "n_outputs": self.n_outputs}
        if self.kind == "categorical":
            data["ignore_index"] = self.ignore_index
        if self.kind == "multilabel":
            data["threshold"] = self.threshold
        if self.labels is not None:  # absent without labels: run ids stay as they were
            data["labels"] = list(self.labels)
        return data

    @classmethod
    def from_json(cls, data: Any) -> TaskSpec:
        if isinstance(data, TaskSpec):
            return data
        if not isinstance(data, dict) or "kind" not in data or "n_outputs" not in data:
            raise TaskValidationError(
                "NNModelParams.task", data, "a saved task is {'kind': ..., 'n_outputs': ...}"
            )
        unknown = sorted(set(data) - {"kind", "n_outputs", "ignore_index", "threshold", "labels"})
        if unknown:
            raise TaskValidationError(
                "NNModelParams.task", data, f"unknown keys {unknown}; was the record edited?"
            )
        data = dict(data)
        if isinstance(data.get("labels"), list):
            data["labels"] = tuple(data["labels"])
        return cls(**data)

    def __repr__(self) -> str:
        if self.kind == "categorical":
            return f"TaskSpec.categorical({self.n_outputs}, ignore_index={self.ignore_index})"
        if self.kind == "multilabel":
            return f"TaskSpec.multilabel({self.n_outputs}, threshold={self.threshold})"
        return f"TaskSpec.regression({self.n_outputs})"
