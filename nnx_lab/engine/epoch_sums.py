"""``EpochSums``: one training epoch's running sums, and its partial form.

The loop folds every read-back of the step buffer into them (the loss weighted as the
epoch's mean needs it, the samples, the summed class counts) and every step's raw
outputs into the declared metrics' accumulation; at the epoch's end they give the train
summary of ``EpochEnded``. A mid-epoch checkpoint saves them (``to_partial``) and a
mid-epoch resume continues them (``restore``), so the interrupted epoch's summary, and
the decision taken on it, are the uninterrupted run's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .edp import finalize
from .events import StepRecord
from .scoring import Accumulation, Scorer
from .tasks import Task
from .train_step import StepOutput

__all__ = ["EpochSums"]


class EpochSums:
    """The sums of the epoch in progress; a fresh one starts each epoch."""

    def __init__(self, task: Task, scorer: Scorer | None) -> None:
        self.task = task
        self.acc = None if scorer is None else Accumulation(scorer)
        # true positives, targets and predictions per class (Task.step_counts, summed)
        self.counts: np.ndarray | None = None
        self.loss_sum = 0.0
        self.weight = 0.0
        self.samples = 0
        self.last_record: StepRecord | None = None
        self.batches = 0  # loader batches trained in this epoch
        self.aux: dict[str, float] = {}  # a network's auxiliary terms, weighted as the loss
        self.aux_weight = 0.0
        # an objective's terms: Σ numerator and Σ denominator over the epoch (on the device)
        self.terms: dict[str, list[Any]] = {}
        self.skipped = 0  # updates an objective's nonfinite="skip" left out

    def add_outputs(self, out: StepOutput) -> None:
        """One step's raw outputs into the declared metrics' accumulation."""
        # an objective without outputs (its metrics are its evaluator's) scores nothing here
        if self.acc is not None and out.outputs is not None:
            self.acc.add(out.outputs, out.targets)  # type: ignore[arg-type]
        if out.term_sums is not None:
            for name, (num, den) in out.term_sums.items():
                held = self.terms.get(name)
                self.terms[name] = [num, den] if held is None else [held[0] + num, held[1] + den]

    def add_records(
        self, records: list[StepRecord], counts: np.ndarray | None, weights: list[float]
    ) -> StepRecord | None:
        """Fold one read-back in; returns its first record with a non-finite loss."""
        first_bad: StepRecord | None = None
        for rec, weight in zip(records, weights, strict=True):
            if weight:
                self.loss_sum += rec.loss * weight
                self.weight += weight
                if rec.aux:
                    for name, value in rec.aux.items():
                        self.aux[name] = self.aux.get(name, 0.0) + value * weight  # type: ignore[operator]
                    self.aux_weight += weight
                if first_bad is None and not math.isfinite(rec.loss):
                    first_bad = rec
            self.samples += rec.samples
        if counts is not None:
            self.counts = counts if self.counts is None else self.counts + counts
        self.last_record = records[-1]
        return first_bad

    def union(
        self,
        reduce: Callable[[torch.Tensor], Any] | None,
        gather: Callable[[torch.Tensor], torch.Tensor] | None,
    ) -> None:
        """The declared metrics' statistics summed (and rows gathered) across ranks."""
        if self.acc is not None:
            self.acc.union(reduce, gather)

    def summary(
        self,
        reduce: Callable[[torch.Tensor], Any] | None,
        gather: Callable[[torch.Tensor], torch.Tensor] | None,
    ) -> dict[str, float | None]:
        """The epoch's train summary: mean loss, samples, confusion metrics, declared
        metrics (over every rank's rows) and, for a declared task, the targets scored."""
        summary: dict[str, float | None] = {
            "loss": self.loss_sum / self.weight if self.weight else None,
            "samples": self.samples,
        }
        if self.aux and self.aux_weight:
            summary["aux"] = {k: v / self.aux_weight for k, v in self.aux.items()}  # type: ignore[assignment]
        if self.terms:
            summary["terms"] = {  # type: ignore[assignment]
                name: float(num) / float(den) if float(den) else 0.0
                for name, (num, den) in self.terms.items()
            }
        if self.skipped:
            summary["skipped_updates"] = self.skipped
        task = self.task
        counts = self.counts
        if counts is not None:
            summary.update({k: float(v) for k, v in finalize(counts, task.kind).items()})
        valid = int(counts[1].sum()) if counts is not None else None
        acc = self.acc
        if acc is not None:
            acc.union(reduce, gather)
            finals = acc.finalize()
            if finals is not None:
                counted, summary["metrics"] = acc.scorer.read(  # type: ignore[assignment]
                    finals.tolist(), "NNTrainParams.train_loader"
                )
                valid = counted if valid is None else valid
        if task.declared:
            summary["valid"] = valid
        return summary

    # -- a mid-epoch checkpoint and its resume -------------------------------------------
    def to_partial(self) -> dict[str, Any] | None:
        """The sums as a checkpoint saves them (None: no batch trained yet)."""
        if self.batches == 0:
            return None
        acc = self.acc
        cats: dict[str, torch.Tensor] = {}
        if acc is not None:
            for i, key in enumerate(acc.scorer.cat_keys):
                for name, chunks in acc.cats.get(key, {}).items():
                    cats[f"{i}.{name}"] = torch.cat(chunks).detach().cpu()
        counts = self.counts
        return {
            "loss_sum": self.loss_sum,
            "weight": self.weight,
            "samples": self.samples,
            "counts": None if counts is None else torch.from_numpy(counts.copy()),
            "sums": None if acc is None or acc.sums is None else acc.sums.detach().cpu().clone(),
            "cats": cats,
            "aux": dict(self.aux),
            "aux_weight": self.aux_weight,
            "terms": {n: [float(num), float(den)] for n, (num, den) in self.terms.items()},
            "skipped": self.skipped,
        }

    def restore(self, saved: dict[str, Any], device: torch.device, *, statistics: bool) -> None:
        """Continue the sums a checkpoint saved. ``statistics=False`` leaves the declared
        metrics' statistics at zero: in a data-parallel run the saved ones are the
        union's, so only rank 0 carries them on and the epoch's union counts them once."""
        self.loss_sum = float(saved["loss_sum"])
        self.weight = float(saved["weight"])
        self.samples = int(saved["samples"])
        self.counts = _saved_counts(saved)
        self.aux = {k: float(v) for k, v in (saved.get("aux") or {}).items()}
        self.aux_weight = float(saved.get("aux_weight") or 0.0)
        self.terms = {n: [float(a), float(b)] for n, (a, b) in (saved.get("terms") or {}).items()}
        self.skipped = int(saved.get("skipped") or 0)
        acc = self.acc
        if acc is None or saved.get("sums") is None or not statistics:
            return
        acc.sums = saved["sums"].to(device)
        keys = acc.scorer.cat_keys
        for label, t in (saved.get("cats") or {}).items():
            index, _, name = label.partition(".")
            acc.cats.setdefault(keys[int(index)], {})[name] = [t.to(device)]


def _saved_counts(saved: dict[str, Any]) -> np.ndarray | None:
    """The class counts a partial epoch saved; a checkpoint written before they were
    kept as counts holds the ``k x k`` matrix (``confusion``) they are the diagonal, row
    sums and column sums of."""
    counts = saved.get("counts")
    if counts is not None:
        return counts.numpy().copy()
    conf = saved.get("confusion")
    if conf is None:
        return None
    matrix = conf.numpy()
    return np.stack([np.diagonal(matrix).copy(), matrix.sum(-1), matrix.sum(-2)])
