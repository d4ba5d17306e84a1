"""``ObjectiveStep``: the engine's update around an ``Objective`` (``train(objective=)``).

The objective describes the loss; this step owns the rest, in the default step's
order: forward under the precision policy, backward, the non-finite policy, then the
``Updater`` (unscale, normalize, clip, step). Accumulation is exact per term: the
window trains on ``Σ weight · Σ numerator / Σ denominator``. With one ``"mean"`` term
each micro-batch's backward runs at once and the gradients are divided by the
window's denominator afterwards (the default step's way); with several terms, or a
``"sum"`` one, no single division fits, so the window's graphs are kept until its
denominators are known and one backward runs on the exact total.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..errors import NonFiniteLossError
from .objective import LossTerm, Objective, ObjectiveContext, ObjectiveResult
from .step_batches import StepBatch, step_batch
from .tasks import Task
from .train_step import StepOutput, TrainStep

__all__ = ["ObjectiveStep"]


def _total(parts: list[Any]) -> Any:
    """Σ of a term's denominators: Python numbers stay numbers (no device work)."""
    if all(not isinstance(p, torch.Tensor) for p in parts):
        return sum(parts)
    out = parts[0] if isinstance(parts[0], torch.Tensor) else torch.tensor(float(parts[0]))
    for p in parts[1:]:
        out = out + p
    return out


def _nonzero(d: Any) -> Any:
    """A window whose denominator is 0 summed nothing: 0 / 1, not 0 / 0."""
    if isinstance(d, torch.Tensor):
        # the 1 as a 0-d tensor of d's dtype broadcasts as ones_like(d) would, one op fewer
        one = _ONES.get((d.dtype, d.device))
        if one is None:
            one = _ONES[(d.dtype, d.device)] = torch.ones((), dtype=d.dtype, device=d.device)
        return torch.where(d > 0, d, one).to(torch.float32)
    return d if d else 1


# read-only constants, one per (dtype, device): never written in place
_ONES: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}


class ObjectiveStep(TrainStep):
    """A ``TrainStep`` whose loss is an ``Objective``'s terms. Returns None for an
    update skipped by ``nonfinite="skip"``."""

    def __init__(self, *parts: Any, objective: Objective) -> None:
        super().__init__(*parts)
        self.objective = objective
        if not objective.scores_outputs:
            # no outputs to decode or score: the records hold the loss and the terms
            self.record_task = Task("regression", self.task.n_outputs)
            self._decode = False
        self.skipped = 0  # updates skipped by nonfinite="skip" (the whole run)
        self.world_size = 1
        self._zero: torch.Tensor | None = None  # a read-only +0.0 on the device

    def needs(self, outputs: bool, preds: bool) -> None:
        super().needs(outputs, preds)
        if not self.objective.scores_outputs:
            self.keep_outputs = self._decode = False

    def __call__(self, X: Any, y: Any, step_number: int = 0) -> StepOutput | None:
        return self.accumulated([(X, y)], step_number)

    def _union(self, sums: list[tuple[torch.Tensor, Any]]) -> list[tuple[torch.Tensor, Any]]:
        """Each term's (Σ numerator, Σ denominator) over every rank (one process: as is)."""
        return sums

    def _sync_gradients(self) -> None:
        """Sum the gradients across ranks (one process: nothing to do)."""

    def _union_records(self, sums: dict[str, tuple[Any, Any]]) -> dict[str, tuple[Any, Any]]:
        """The ``record`` values' sums over every rank (one process: as they are)."""
        return sums

    def _call(self, batch: Any, index: int, size: int, step_number: int) -> ObjectiveResult:
        ctx = ObjectiveContext(
            step_number,
            self.epoch,
            index,
            size,
            self.precision,
            self.device,
            self.loss,
            self.world_size,
        )
        with self._autocast():
            return self.objective(self.forward_net, step_batch(*batch), ctx)

    def accumulated(self, window: list[tuple[Any, Any]], step_number: int = 0):
        self.updater.zero_grad()
        results: list[ObjectiveResult] = []
        eager = False
        for i, batch in enumerate(window):
            result = self._call(batch, i, len(window), step_number)
            if i == 0:
                terms = result.terms
                eager = len(window) > 1 and len(terms) == 1 and terms[0].reduction == "mean"
            if eager:
                term = result.terms[0]  # the others' names are checked below
                self.updater.backward(_weighted(term, term.numerator))
            results.append(result)
        names = _same_terms(results, self.objective)
        first = results[0].terms
        kinds = [t.reduction for t in first]
        zero = self._zero
        if zero is None:  # Σ numerator starts from +0.0 (a -0.0 numerator sums to +0.0)
            zero = self._zero = torch.zeros((), device=self.device, dtype=torch.float32)
        local: list[tuple[torch.Tensor, Any]] = []
        for index in range(len(names)):
            if len(results) == 1:  # one micro-batch: its term as it is
                t = first[index]
                local.append((zero + t.numerator.detach().float(), _total([t.denominator])))
                continue
            terms = [r.terms[index] for r in results]
            numerator = zero
            for t in terms:
                numerator = numerator + t.numerator.detach().float()
            local.append((numerator, _total([t.denominator for t in terms])))
        totals = self._union(local)  # the ranks' sums in a data-parallel run
        sums: dict[str, tuple[torch.Tensor, Any]] = {}
        values: dict[str, torch.Tensor] = {}
        trained: Any = None
        loss: Any = None
        for index, name in enumerate(names):
            numerator, denominator = totals[index]
            denominator = _nonzero(denominator) if kinds[index] == "mean" else 1
            sums[name] = (numerator, denominator)
            # x / 1 is x bit for bit: a "sum" term, or a lone micro-batch's "mean" over
            # 1 (the supervised objective's), skips the op
            one = not isinstance(denominator, torch.Tensor) and denominator == 1
            value = values[name] = numerator if one else numerator / denominator
            weight = first[index].weight
            part = value if weight == 1 else value * weight
            loss = part if loss is None else loss + part
            if not eager:
                if len(results) == 1:
                    graph = first[index].numerator
                else:
                    graph = _sum([r.terms[index].numerator for r in results])
                divide = kinds[index] == "mean" and not one
                value = graph / denominator if divide else graph
                part = _weighted(first[index], value)
                trained = part if trained is None else trained + part
        assert loss is not None
        if not eager:
            self.updater.backward(trained)
        self._sync_gradients()
        # one read-back of the (one-element) loss: float() then a host check, cheaper
        # than torch.isfinite on the device and the same decision
        if not math.isfinite(float(loss)):
            if self.objective.nonfinite == "skip":
                self.updater.zero_grad()
                self.skipped += 1
                return None
            raise NonFiniteLossError(f"non-finite training loss ({float(loss)})", float(loss))
        self.updater.step(sums[names[0]][1] if eager else None, step_number=step_number)
        self.objective.after_update(self.net, step_number)
        return self._output(window, results, loss, values, sums)

    def _output(self, window, results, loss, values, sums) -> StepOutput:
        ys = [y for _, y in window]
        y_all = ys[0] if len(ys) == 1 else torch.cat(ys)
        rows = int(y_all.shape[0])
        record = self._union_records(_records(results, window))
        terms = {n: v.detach() for n, v in values.items()}
        term_sums = {n: (num, den) for n, (num, den) in sums.items()}
        for name, (num, den) in record.items():
            terms[name] = num / den
            term_sums[name] = (num, den)
        outs = [r.outputs for r in results]
        preds = kept = None
        owned = type(window[0][0]) is StepBatch  # no targets to score outputs against
        if self.objective.scores_outputs and not owned and all(o is not None for o in outs):
            if self._decode:
                preds = torch.cat([self.task.decode(o.detach()) for o in outs])  # type: ignore[union-attr]
            if self.keep_outputs:
                kept = torch.cat([o.detach().float() for o in outs])  # type: ignore[union-attr]
        return StepOutput(loss.detach(), preds, y_all, rows, kept, None, terms, term_sums)


def _weighted(term: LossTerm, value: torch.Tensor) -> torch.Tensor:
    return value if term.weight == 1 else value * term.weight


def _sum(tensors: list[torch.Tensor]) -> torch.Tensor:
    out = tensors[0]
    for t in tensors[1:]:
        out = out + t
    return out


def _same_terms(results: list[ObjectiveResult], objective: Objective) -> list[str]:
    """The window's micro-batches must name the same terms, in the same order (checked
    before the update)."""
    names = [t.name for t in results[0].terms]
    for i, result in enumerate(results[1:], start=1):
        got = [t.name for t in result.terms]
        if got != names:
            raise ValueError(
                f"objective {objective.name} returned terms {got} for micro-batch {i} of a "
                f"window whose first returned {names}: every micro-batch must return the "
                "same terms in the same order"
            )
    if len(set(names)) != len(names):
        raise ValueError(f"objective {objective.name} returned two terms of one name: {names}")
    return names


def _records(results: list[ObjectiveResult], window: list[tuple[Any, Any]]):
    """``record`` values: each the window's row-weighted mean."""
    if results[0].record is None:
        return {}
    sums: dict[str, tuple[torch.Tensor, int]] = {}
    for result, (_, y) in zip(results, window, strict=True):
        rows = int(y.shape[0])
        for name, value in (result.record or {}).items():
            v = torch.as_tensor(value).detach().float().reshape(()) * rows
            num, den = sums.get(name, (0.0, 0))
            sums[name] = (v + num, den + rows)  # type: ignore[assignment]
    return sums
