"""``StepBuffer``: per-step values kept on the device between bulk read-backs.

The hot path adds each step's loss and decoded predictions (and, for declared metrics,
their packed statistics) without a host sync; every ``log_every`` steps and at each
epoch end ``drain`` reads them back at once and turns them into ``StepRecord``s. In a
data-parallel run the records are the union's: rows, class counts and statistics are
summed across the ranks before they are finalized.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .edp import finalize
from .events import StepRecord
from .losses import LossFn
from .scoring import Scorer, call_extra, gather_rows, scored_pairs
from .tasks import Task
from .train_step import StepOutput

__all__ = ["StepBuffer"]


class StepBuffer:
    """Per-step values held on the device until the next bulk read-back."""

    def __init__(
        self,
        task: Task,
        loss: LossFn,
        reduce: Callable[[torch.Tensor], Any] | None = None,
        *,
        scorer: Scorer | None = None,
        extra: dict[str, Callable[[Any, Any], Any]] | None = None,
        collective: Any = None,
    ) -> None:
        """``reduce`` sums a tensor across ranks (a data-parallel run): the records are
        then the union's. ``scorer`` computes a declared task's record metrics per
        step; ``extra`` are the ``extra_metrics`` callables, called per step at read-back
        (on the union's rows under ``collective``)."""
        self.task = task
        self.by_target = loss.per == "target"
        self.reduce = reduce
        self.scorer = scorer
        self.extra = extra or None
        self.collective = collective
        self.rich = scorer is not None or self.extra is not None or task.declared
        self.clear()

    def clear(self) -> None:
        self.losses: list[torch.Tensor] = []
        self.preds: list[torch.Tensor] = []
        self.targets: list[torch.Tensor] = []
        self.packs: list[torch.Tensor] = []
        self.meta: list[tuple[int, int, int, float, int]] = []  # step, epoch, batch, lr, n
        self.aux: list[dict[str, torch.Tensor]] = []  # a network's auxiliary terms (aux_loss)
        self.terms: list[dict[str, torch.Tensor]] = []  # an objective's terms (objective_step)
        self.lrs: list[dict[str, float]] = []  # each named optimizer's rate (the Trainer)

    def __len__(self) -> int:
        return len(self.meta)

    def add(self, out: StepOutput, step: int, epoch: int, batch: int, lr: float) -> None:
        self.losses.append(out.loss)
        if out.preds is not None:
            self.preds.append(out.preds)
            self.targets.append(out.targets)
        if self.scorer is not None:
            assert out.outputs is not None
            self.packs.append(self.scorer.pack(out.outputs, out.targets)[0])
        self.meta.append((step, epoch, batch, lr, out.rows))
        if out.aux is not None:
            self.aux.append(out.aux)
        if out.terms is not None:
            self.terms.append(out.terms)
        if out.lrs is not None:
            self.lrs.append(out.lrs)

    def drain(self) -> tuple[list[StepRecord], np.ndarray | None, list[float]]:
        """``_drain``'s records, each with its step's auxiliary terms (``aux``) and an
        objective's terms (``terms``) and the named optimizers' rates (``lrs``)."""
        if self.lrs and len(self.lrs) == len(self.meta):
            lrs, self.lrs = self.lrs, []
            records, counts, weights = self.drain()
            # several optimizers: their rates, and no single ``lr`` to stand for them
            out = [_with(r, lr=None, lrs=v) for r, v in zip(records, lrs, strict=True)]
            return out, counts, weights
        if self.terms and len(self.terms) == len(self.meta):
            names = list(self.terms[0])
            # one stack of every step's terms, in step order then name order: one
            # read-back, the values of a stack per step
            flat = torch.stack([t[n] for t in self.terms for n in names]).tolist()
            self.terms = []
            records, counts, weights = self.drain()
            width = len(names)
            out = [
                _with(r, terms=dict(zip(names, flat[i * width : (i + 1) * width], strict=True)))
                for i, r in enumerate(records)
            ]
            return out, counts, weights
        if not self.aux or len(self.aux) != len(self.meta):
            return self._drain()
        aux = self._aux_values()
        records, counts, weights = self._drain()
        return [_with(r, aux=a) for r, a in zip(records, aux, strict=True)], counts, weights

    def _aux_values(self) -> list[dict[str, float]]:
        """Each step's terms read back at once; in a data-parallel run, the union's
        row-weighted mean (one more small all-reduce per read-back, only for such nets)."""
        names = list(self.aux[0])
        values = torch.stack([torch.stack([a[n] for n in names]) for a in self.aux])
        if self.reduce is not None:
            rows = torch.tensor([float(m[4]) for m in self.meta], device=values.device)
            packed = torch.cat([values * rows[:, None], rows[:, None]], dim=1)
            packed = self.reduce(packed)
            values = packed[:, :-1] / packed[:, -1:].clamp_min(1.0)
        return [dict(zip(names, row, strict=True)) for row in values.tolist()]

    def _drain(self) -> tuple[list[StepRecord], np.ndarray | None, list[float]]:
        """Records for the buffered steps, their summed class counts (``[3, k]``, as
        ``Task.step_counts``), and each step's weight in the epoch's mean loss.

        The predictions and targets cross to the host with the losses; ``bincount``s then
        count every step's true positives, targets and predictions per class at once, and
        the ratios are finished in NumPy.
        A step whose targets were all ``ignore_index`` has no metrics (NNx): its record
        holds ``None`` and it weighs nothing.
        """
        if not self.meta:
            return [], None, []
        if self.rich:
            return self._drain_rich()
        loss_host = torch.stack(self.losses).tolist()
        task = self.task
        counts = self._counts()
        if self.reduce is not None:
            self._union(counts)
        if counts is None:
            records = [
                StepRecord(step, epoch, batch, lr, n, loss)
                for (step, epoch, batch, lr, n), loss in zip(self.meta, loss_host, strict=True)
            ]
            weights = [float(r.samples) for r in records]
            self.clear()
            return records, None, weights
        values = finalize(counts, task.kind)
        valid = counts[:, 1].sum(-1)  # each step's targets scored
        columns = zip(
            *(values[n].tolist() for n in ("error", "accuracy", "precision", "recall", "f1")),
            strict=True,
        )
        records, weights = [], []
        for (step, epoch, batch, lr, n), loss, row, count in zip(
            self.meta, loss_host, columns, valid.tolist(), strict=True
        ):
            if count == 0:  # every target ignored
                records.append(StepRecord(step, epoch, batch, lr, n, None))  # type: ignore[arg-type]
                weights.append(0.0)
                continue
            records.append(StepRecord(step, epoch, batch, lr, n, loss, *row))
            weights.append(float(count) if self.by_target else float(n))
        self.clear()
        return records, counts.sum(0), weights

    def _drain_rich(self) -> tuple[list[StepRecord], np.ndarray | None, list[float]]:
        """``drain`` for a declared task, task metrics or extra_metrics: the per-step
        statistics are finalized on the device and read back with the losses at once."""
        task, n = self.task, len(self.meta)
        losses = torch.stack(self.losses)
        scored: list[tuple[int, dict[str, float | None]]] | None = None
        if self.scorer is not None:
            packs = torch.stack(self.packs)
            if self.reduce is not None:
                packs = self.reduce(packs)  # each step's statistics over the union
            finals = torch.stack([self.scorer.finalize(row) for row in packs])
            host = torch.cat([losses.to(finals.dtype).reshape(-1), finals.reshape(-1)]).tolist()
            loss_host, rest, width = host[:n], host[n:], finals.shape[1]
            scored = [
                self.scorer.read(rest[i * width : (i + 1) * width], "NNTrainParams.train_loader")
                for i in range(n)
            ]
        else:
            loss_host = losses.tolist()
        counts = self._counts()
        if self.reduce is not None:
            self._union(counts)
        pairs = self._pairs() if self.extra is not None else None
        columns: list[tuple[float, ...]] = [()] * n
        valid: list[int | None] = [None] * n
        if counts is not None:
            values = finalize(counts, task.kind)
            names = ("error", "accuracy", "precision", "recall", "f1")
            columns = list(zip(*(values[k].tolist() for k in names), strict=True))
            valid = [int(v) for v in counts[:, 1].sum(-1).tolist()]
        elif scored is not None:
            valid = [v for v, _ in scored]
        records, weights = [], []
        for i, ((step, epoch, batch, lr, rows), loss) in enumerate(
            zip(self.meta, loss_host, strict=True)
        ):
            count = valid[i]
            if count == 0:  # every target ignored or missing: no loss, no metric at all
                records.append(
                    StepRecord(
                        step, epoch, batch, lr, rows, None, valid=0 if task.declared else None
                    )
                )
                weights.append(0.0)
                continue
            extra = None if pairs is None else call_extra(self.extra, *pairs[i])  # type: ignore[arg-type]
            records.append(
                StepRecord(
                    step,
                    epoch,
                    batch,
                    lr,
                    rows,
                    loss,
                    *columns[i],
                    valid=count if task.declared else None,
                    metrics=None if scored is None else scored[i][1],
                    extra=extra,
                )
            )
            by_count = self.by_target and count is not None
            weights.append(float(count) if by_count else float(rows))  # type: ignore[arg-type]
        self.clear()
        return records, None if counts is None else counts.sum(0), weights

    def _counts(self) -> np.ndarray | None:
        """Every buffered step's class counts (``Task.step_counts``; None: a task with no
        confusion metrics)."""
        task = self.task
        if task.k is None:
            return None
        preds = torch.cat([_flat(p) for p in self.preds]).cpu().numpy()
        truth = torch.cat([_flat(y) for y in self.targets]).cpu().numpy()
        sizes = [p.numel() for p in self.preds]
        steps = np.repeat(np.arange(len(sizes)), sizes)
        return task.step_counts(steps, truth.astype(np.int64), preds, len(sizes))

    def _pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each step's (y_true, y_pred) on the host, over every rank's rows."""
        task = self.task
        if self.collective is None:
            return [scored_pairs(task, y, p) for y, p in zip(self.targets, self.preds, strict=True)]
        device = self.losses[0].device
        mine = torch.tensor([float(p.shape[0]) for p in self.preds], device=device)
        counts = gather_rows(mine.reshape(1, -1), self.collective).long().tolist()
        ys = gather_rows(torch.cat(self.targets), self.collective)
        ps = gather_rows(torch.cat(self.preds), self.collective)
        out, start = [], [sum(sum(c) for c in counts[:r]) for r in range(len(counts))]
        for i in range(len(self.preds)):
            y_parts, p_parts = [], []
            for r, c in enumerate(counts):
                a = start[r] + sum(c[:i])
                y_parts.append(ys[a : a + c[i]])
                p_parts.append(ps[a : a + c[i]])
            out.append(scored_pairs(task, torch.cat(y_parts), torch.cat(p_parts)))
        return out

    def _union(self, counts: np.ndarray | None) -> None:
        """Sum the steps' rows (and class counts, in place) across the ranks: the
        union's counts are the sums of every rank's."""
        rows = np.array([m[4] for m in self.meta], dtype=np.float64)
        packed = rows if counts is None else np.concatenate([rows, counts.reshape(-1)])
        device = self.losses[0].device
        total = self.reduce(torch.from_numpy(packed).to(device)).cpu().numpy()  # type: ignore[misc]
        n = len(rows)
        self.meta = [(*m[:4], int(r)) for m, r in zip(self.meta, total[:n], strict=True)]
        if counts is not None:
            counts[...] = total[n:].reshape(counts.shape).astype(counts.dtype)


def _flat(t: torch.Tensor) -> torch.Tensor:
    # a class index per row is already flat; a reshape per step (two a step, each read-
    # back) costs more than the read-back's one bincount
    return t if t.ndim == 1 else t.reshape(-1)


def _with(record: StepRecord, **changes: Any) -> StepRecord:
    """``dataclasses.replace(record, **changes)`` for the flush's hot path: the frozen
    record has no ``__post_init__`` (tests/python/engine/test_engine_events.py keeps it
    so), so its fields are copied as they are; replace goes through the generated
    ``__init__`` and its field list, ~6 µs a record."""
    new = object.__new__(StepRecord)
    fields = new.__dict__
    fields.update(record.__dict__)
    fields.update(changes)
    return new
