"""How a model's outputs are decoded and scored: the task.

A declared ``TaskSpec`` (§2.5) decides it: categorical, regression, or multilabel
(independent labels decoded at the spec's threshold, scored by the registry's
multilabel metrics rather than a confusion matrix). Otherwise the legacy rules follow.

Classification decodes the argmax and scores a confusion matrix whose targets equal to
``ignore_index`` are left out; binary (BCE) outputs decode to 0/1 at logit >= 0 and
score every element; regression decodes the values themselves and has no confusion
metrics. The default task follows the loss, as NNx's legacy classification behaviour
does; a custom loss gets a classification task for integer targets and a regression
task for floating ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .enums import Losses
from .losses import LossFn
from .task_spec import TaskSpec

__all__ = ["Task", "argmax_last", "task_for"]


@dataclass(frozen=True)
class Task:
    kind: str  # "categorical" | "binary" | "regression" | "multilabel" (declared only)
    n_outputs: int
    ignore_index: int | None = None
    shaped: bool = True  # targets must have the loss's shape (False: a custom loss decides)
    spec: TaskSpec | None = None  # the declared task (None: the loss's legacy default)
    cutoff: float = 0.0  # multilabel: the logit at or above which a label is present

    @property
    def declared(self) -> bool:
        return self.spec is not None

    @property
    def metric_kind(self) -> str:
        """The metric registry's kind of these outputs."""
        if self.kind == "categorical":
            return "categorical"
        return "regression" if self.kind == "regression" else "bernoulli"

    @property
    def record_metrics(self) -> tuple[str, ...]:
        """Registry metrics each step and epoch record carries (a declared task's)."""
        return () if self.spec is None else self.spec.record_metrics

    @property
    def masks_nan(self) -> bool:
        """A NaN target is missing: left out of the loss and every metric (declared
        regression and multilabel tasks)."""
        return self.kind in ("regression", "multilabel") and self.declared

    @property
    def k(self) -> int | None:
        """Classes of the confusion matrix (None: no confusion metrics)."""
        if self.kind == "categorical":
            return self.n_outputs
        if self.kind == "binary":
            return 2
        return None

    def decode(self, out: torch.Tensor) -> torch.Tensor:
        """Class indices, 0/1 indicators (logit >= 0), or the values."""
        if self.kind == "categorical":
            return argmax_last(out)
        if self.kind == "binary":
            return (out >= 0).long()
        if self.kind == "multilabel":
            return (out >= self.cutoff).long()
        return out.squeeze(-1) if out.ndim > 1 and out.shape[-1] == 1 else out

    def truth(self, y: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        """Targets as confusion rows; an ignored target becomes row ``k`` (dropped later)."""
        k = self.k
        if self.kind == "binary":
            return y.reshape(pred.shape).long()
        y = y.long()
        if self.ignore_index is not None:
            y = torch.where(y == self.ignore_index, torch.full_like(y, k), y)  # type: ignore[arg-type]
        return y

    def counts(self, pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``[3, k]`` true positives, targets and predictions per class, on the device;
        ignored targets are left out (``truth`` makes them class ``k``, a slot dropped
        here). A fixed-size ``scatter_add_``: no host sync, where ``bincount`` reads the
        largest index back first."""
        k = self.k
        assert k is not None
        truth = self.truth(y, pred).reshape(-1)
        pred = pred.reshape(-1)
        ignored = torch.full_like(truth, k)
        index = torch.stack(
            [
                torch.where(truth == pred, truth, ignored),  # a hit counts for its class
                truth,
                torch.where(truth == k, ignored, pred),  # an ignored target's: none
            ]
        )
        out = torch.zeros((3, k + 1), dtype=torch.long, device=truth.device)
        return out.scatter_add_(1, index, torch.ones_like(index))[:, :k]

    def step_counts(
        self, steps: np.ndarray, truth: np.ndarray, pred: np.ndarray, n_steps: int
    ) -> np.ndarray:
        """Each step's class counts from host arrays, ignored targets dropped:
        ``[n_steps, 3, k]`` true positives, targets and predictions per class, all that
        the confusion metrics read (``edp.finalize``).

        These are the integers of a confusion matrix's diagonal, row sums and column sums,
        without its ``k * k`` cells: a read-back of 16 steps of a 256-class output counts
        12 thousand of them instead of a million (3.9 ms here, against 0.3 ms), and at
        1000 classes a 50-step read-back's matrices alone would be 400 MB.
        """
        k = self.k
        assert k is not None
        if self.ignore_index is not None and self.kind == "categorical":
            keep = truth != self.ignore_index
            if not keep.all():
                steps, truth, pred = steps[keep], truth[keep], pred[keep]
        base = steps * k
        size = n_steps * k
        targets = np.bincount(base + truth, minlength=size)
        predicted = np.bincount(base + pred, minlength=size)
        hits = np.bincount((base + truth)[truth == pred], minlength=size)
        return np.stack([hits, targets, predicted]).reshape(3, n_steps, k).transpose(1, 0, 2)


def task_for(
    loss: LossFn,
    output_dim: int,
    y_sample: torch.Tensor | None = None,
    spec: TaskSpec | None = None,
) -> Task:
    """The declared task, or the one a model scores by default (NNx's legacy behaviour)."""
    if spec is not None:
        shaped = loss.kind is not None
        if spec.kind == "categorical":
            return Task("categorical", output_dim, spec.ignore_index, shaped, spec)
        if spec.kind == "multilabel":
            return Task("multilabel", output_dim, None, shaped, spec, spec.logit_threshold)
        return Task("regression", output_dim, None, shaped, spec)
    if loss.kind is not None:
        if loss.kind.is_classification:
            return Task("categorical", output_dim, loss.ignore_index)
        if loss.kind is Losses.BINARY_CROSS_ENTROPY:
            return Task("binary", output_dim)
        return Task("regression", output_dim)
    if y_sample is not None and y_sample.is_floating_point():
        return Task("regression", output_dim, shaped=False)
    return Task("categorical", output_dim, loss.ignore_index, shaped=False)


def argmax_last(out: torch.Tensor) -> torch.Tensor:
    """``out.argmax(dim=-1)``: the index of the first maximum along the last axis (a NaN
    counts as the maximum). On the CPU ``max(dim=-1).indices`` gives the same indices,
    ties and NaNs included (tests/python/engine/test_tasks.py holds it to that), in
    about half the time: a language model's per-step decode of (batch, sequence,
    vocabulary) logits took 4 % of its step with argmax."""
    if out.device.type == "cpu" and out.ndim > 0 and out.shape[-1] > 0:
        return out.max(dim=-1).indices
    return out.argmax(dim=-1)
