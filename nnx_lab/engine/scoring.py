"""The metric registry, driven by the training loop and ``evaluate()``.

A ``Scorer`` turns a batch's raw outputs and targets into the registry's statistics for
a fixed list of metrics, on the device and without a host sync: the ``"sum"``
statistics packed into one vector (so a step's contribution is one tensor, steps add up,
and ranks add up in one all-reduce), the ``"cat"`` ones (exact AUROC) kept as parts.
``finalize`` runs the registry's finalizers on the device; the caller reads the values
back together with whatever else it reads (one transfer per ``log_every`` steps, per
epoch, per validation pass).

The first slots of a packed vector count the valid targets and the targets the metrics
could not score (out of range, or not 0/1 for independent labels): those are refused at
read-back, as ``StreamingMetrics`` refuses them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ..data.metrics import FinalizeContext, MetricBatch, MetricSpec, statistic_for
from ..errors import ConfigError, DataError
from .tasks import Task, argmax_last

__all__ = ["Scorer", "call_extra", "check_declared", "gather_rows", "scorer_specs"]

_COUNTERS = 2  # valid targets, unscorable targets


def check_declared(
    specs: Sequence[MetricSpec], task: Task, field: str, evaluator: Any = None
) -> None:
    """Refuse declared metrics that do not apply to this task's outputs, and a reported
    metric (one an evaluator puts in EDP.metrics) where no ``evaluator`` reports it."""
    kind = task.metric_kind
    for spec in specs:
        if spec.info.reported:
            if evaluator is None:
                raise ConfigError(
                    field,
                    spec.key,
                    f"{spec.name} is reported by a custom evaluator, not computed from the "
                    "outputs: train with the eval_step_fn that reports it (e.g. "
                    "eval_step_fn=RankingTask.eval_step()), or drop it",
                )
            continue
        if kind not in spec.info.kinds:
            raise ConfigError(
                field,
                spec.key,
                f"{spec.name} applies to {', '.join(spec.info.kinds)} outputs and this model's "
                f"are {kind} ({_describe(task)}); drop it, or declare one of "
                + ", ".join(_names_for(kind)),
            )


def _names_for(kind: str) -> list[str]:
    from ..data.metrics import metric_names

    return metric_names(kind)


def _describe(task: Task) -> str:
    if task.spec is not None:
        return repr(task.spec)
    return f"the loss's default {task.kind} task"


def scorer_specs(task: Task, declared: Sequence[MetricSpec] = ()) -> list[MetricSpec]:
    """The task's record metrics, then the declared ones not among them."""
    specs = [MetricSpec(n) for n in task.record_metrics]
    keys = {s.key for s in specs}
    # a reported metric has no statistic: its evaluator gives it
    return specs + [s for s in declared if s.key not in keys and not s.info.reported]


class Scorer:
    """Registry statistics and values of ``specs`` for ``task``'s outputs."""

    def __init__(self, task: Task, specs: Sequence[MetricSpec], device: torch.device) -> None:
        self.task = task
        self.kind = task.metric_kind
        self.specs = tuple(specs)
        self.keys = tuple(s.key for s in self.specs)
        self.device = device
        self.dtype = torch.float32 if device.type == "mps" else torch.float64
        stats = list(dict.fromkeys((s.info.statistic, s.options) for s in self.specs))
        self._sum = [k for k in stats if statistic_for(k[0]).reduce == "sum"]
        self._cat = [k for k in stats if statistic_for(k[0]).reduce == "cat"]
        self._layout: list[tuple[tuple, str, int, torch.Size]] | None = None
        self.width = 0  # slots of a packed vector, known after the first batch
        self.k = task.n_outputs

    @property
    def cat_keys(self) -> list[tuple]:
        """The concatenated statistics, in a fixed order (for saving them)."""
        return list(self._cat)

    # -- one batch ------------------------------------------------------------------------
    def batch(self, out: torch.Tensor, y: torch.Tensor) -> tuple[MetricBatch, torch.Tensor]:
        """The registry's view of a batch, and the count of unscorable targets."""
        task, dtype = self.task, self.dtype
        out = out.detach()
        y = y.detach()
        if self.kind == "categorical":
            logits = out.reshape(-1, out.shape[-1])
            yl = y.reshape(-1).long()
            ignore = task.ignore_index
            valid = yl != (ignore if ignore is not None else -(2**62))
            in_range = (yl >= 0) & (yl < logits.shape[-1])
            bad = (valid & ~in_range).sum(dtype=dtype)
            valid = valid & in_range
            targets = torch.where(valid, yl, torch.zeros_like(yl))
            return MetricBatch(
                "categorical",
                targets,
                valid,
                logits.shape[-1],
                logits=logits,
                decoded=argmax_last(logits),
                dtype=dtype,
            ), bad
        width = out.shape[-1] if out.ndim > 1 else 1
        rows = out.reshape(-1, width)
        yf = y.reshape(rows.shape).to(dtype)
        valid = torch.isfinite(yf)
        if self.kind == "regression":
            bad = torch.zeros((), dtype=dtype, device=out.device)
            return MetricBatch(
                "regression",
                torch.where(valid, yf, torch.zeros_like(yf)),
                valid,
                width,
                values=rows,
                dtype=dtype,
            ), bad
        not_binary = valid & (yf != 0) & (yf != 1)
        valid = valid & ~not_binary
        return MetricBatch(
            "bernoulli",
            torch.where(valid, yf, torch.zeros_like(yf)),
            valid,
            width,
            logits=rows,
            decoded=task.decode(rows).reshape(rows.shape),
            dtype=dtype,
        ), not_binary.sum(dtype=dtype)

    def pack(
        self, out: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, dict[tuple, dict[str, torch.Tensor]]]:
        """(the batch's packed "sum" statistics, its "cat" parts); device ops only."""
        b, bad = self.batch(out, y)
        self.k = b.n_classes
        parts = [b.valid.sum(dtype=self.dtype).reshape(1), bad.reshape(1)]
        layout = []
        offset = _COUNTERS
        for key in self._sum:
            name, options = key
            for tname, t in statistic_for(name).compute(b, dict(options)).items():
                flat = t.to(self.dtype).reshape(-1)
                layout.append((key, tname, offset, t.shape))
                offset += flat.numel()
                parts.append(flat)
        if self._layout is None:
            self._layout, self.width = layout, offset
        cats = {}
        for key in self._cat:
            name, options = key
            cats[key] = statistic_for(name).compute(b, dict(options))
        return torch.cat(parts), cats

    # -- values ---------------------------------------------------------------------------
    def _tensors(self, packed: torch.Tensor, cats: dict[tuple, dict[str, torch.Tensor]]):
        out: dict[tuple, dict[str, torch.Tensor]] = {}
        for key, tname, offset, shape in self._layout or []:
            n = math.prod(shape)
            out.setdefault(key, {})[tname] = packed[offset : offset + n].reshape(shape)
        for key, parts in cats.items():
            out[key] = parts
        return out

    def finalize(
        self,
        packed: torch.Tensor,
        cats: dict[tuple, dict[str, torch.Tensor]] | None = None,
        specs: Sequence[MetricSpec] | None = None,
    ) -> torch.Tensor:
        """``[valid, unscorable, *values]`` on the device (NaN: undefined)."""
        tensors = self._tensors(packed, cats or {})
        values = [packed[0], packed[1]]
        for spec in self.specs if specs is None else specs:
            key = (spec.info.statistic, spec.options)
            if key not in tensors:  # a cat statistic no batch reached (an empty split)
                values.append(torch.full((), math.nan, dtype=self.dtype, device=packed.device))
                continue
            ctx = FinalizeContext(self.kind, self.k, dict(spec.options))
            values.append(spec.info.finalize(tensors[key], ctx).to(self.dtype).reshape(()))
        return torch.stack(values)

    def read(self, host: Sequence[float], where: str) -> tuple[int, dict[str, float | None]]:
        """(valid targets, {key: value}) from a finalized vector read back to the host."""
        valid, bad, *values = host
        if bad:
            expect = (
                f"class indices in [0, {self.k})"
                if self.kind == "categorical"
                else "0 or 1 (NaN marks a missing label)"
            )
            raise DataError(
                where,
                f"{int(bad)} targets were not {expect}",
                "fix the targets; metrics over them would be wrong",
            )
        return int(valid), {
            key: None if v != v else float(v) for key, v in zip(self.keys, values, strict=True)
        }


class Accumulation:
    """A ``Scorer``'s running sums over an epoch or a split, kept on the device."""

    def __init__(self, scorer: Scorer) -> None:
        self.scorer = scorer
        self.sums: torch.Tensor | None = None
        self.cats: dict[tuple, dict[str, list[torch.Tensor]]] = {}

    def add(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        packed, cats = self.scorer.pack(out, y)
        self.sums = packed if self.sums is None else self.sums + packed
        for key, parts in cats.items():
            slot = self.cats.setdefault(key, {})
            for name, t in parts.items():
                slot.setdefault(name, []).append(t)
        return packed

    def union(
        self,
        reduce: Callable[[torch.Tensor], Any] | None,
        gather: Callable[[torch.Tensor], torch.Tensor] | None,
    ) -> None:
        """Sum the sums across ranks and concatenate the parts (a data-parallel run)."""
        if reduce is None:
            return
        scorer = self.scorer
        if self.sums is None:  # a rank that saw no batch still takes part
            probe = torch.zeros(scorer.width, dtype=scorer.dtype, device=scorer.device)
            self.sums = probe
        self.sums = reduce(self.sums.clone())
        if gather is not None:
            for parts in self.cats.values():
                for name, chunks in parts.items():
                    parts[name] = [gather(torch.cat(chunks))]

    def finalize(self) -> torch.Tensor | None:
        if self.sums is None:
            return None
        cats = {key: {n: torch.cat(c) for n, c in p.items()} for key, p in self.cats.items()}
        return self.scorer.finalize(self.sums, cats)


def gather_rows(t: torch.Tensor, collective: Any) -> torch.Tensor:
    """Every rank's rows of ``t``, concatenated in rank order, on every rank.

    Built on the collective's summing all-reduce: the sizes first, then each rank's rows
    in its own slot of a zero buffer.
    """
    rank, world = int(collective.rank), int(collective.world_size)
    sizes = torch.zeros(world, dtype=torch.float64, device=t.device)
    sizes[rank] = float(t.shape[0])
    counts = [int(v) for v in collective.sum(sizes).tolist()]
    start = sum(counts[:rank])
    wide = t.to(torch.float64)
    buf = torch.zeros((sum(counts), *t.shape[1:]), dtype=torch.float64, device=t.device)
    buf[start : start + t.shape[0]] = wide
    return collective.sum(buf).to(t.dtype)


# -- extra_metrics (§2.6) -------------------------------------------------------------------
def scored_pairs(task: Task, y: torch.Tensor, pred: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(y_true, y_pred) as NumPy arrays for ``extra_metrics``: targets equal to
    ``ignore_index`` are dropped (categorical), and rows with a NaN target (regression,
    multilabel)."""
    yt = y.detach().cpu()
    yp = pred.detach().cpu()
    if task.kind == "categorical":
        yt = yt.reshape(-1)
        yp = yp.reshape(-1)
        if task.ignore_index is not None:
            keep = yt != task.ignore_index
            yt, yp = yt[keep], yp[keep]
        return yt.numpy(), yp.numpy()
    yt = yt.reshape(yp.shape) if yt.numel() == yp.numel() else yt
    if yt.is_floating_point():
        finite = torch.isfinite(yt)
        keep = finite.reshape(finite.shape[0], -1).all(dim=1) if finite.ndim > 1 else finite
        if not bool(keep.all()):
            yt, yp = yt[keep], yp[keep]
    return yt.numpy(), yp.numpy()


def call_extra(
    fns: dict[str, Callable[[Any, Any], Any]], y_true: np.ndarray, y_pred: np.ndarray
) -> dict[str, float | None] | None:
    """Each ``fn(y_true, y_pred)`` once; None when no target was scored (§2.6: a batch
    whose targets are all ignored has no metrics)."""
    if len(y_true) == 0:
        return None
    out: dict[str, float | None] = {}
    for name, fn in fns.items():
        value = fn(y_true, y_pred)
        try:
            number = None if value is None else float(value)
        except (TypeError, ValueError):
            raise TypeError(
                f"extra_metrics[{name!r}] returned {type(value).__name__}; it must return a "
                "number (or None)"
            ) from None
        out[name] = number
    return out
