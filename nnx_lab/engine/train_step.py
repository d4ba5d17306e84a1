"""``TrainStep``: one optimizer update, and what it hands the loop (``StepOutput``).

The same step serves the training loop, the LR finder and plan probes; a data-parallel
rank uses its subclass ``collective.DistributedTrainStep``. The update order of the
precision policy (unscale, normalize, finite check, clip, step) is the ``Updater``'s.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import NonFiniteLossError
from .adapters import forward
from .aux_loss import aux_source, detached, with_term
from .losses import LossFn
from .precision import ResolvedPrecision
from .tasks import Task
from .update import Updater

__all__ = ["StepOutput", "TrainStep"]


@dataclass
class StepOutput:
    """One update's detached results, still on the device."""

    loss: torch.Tensor
    preds: torch.Tensor | None  # decoded predictions (None: a task with no confusion)
    targets: torch.Tensor
    rows: int
    outputs: torch.Tensor | None = None  # raw outputs, detached (only when metrics need them)
    aux: dict[str, torch.Tensor] | None = None  # a network's auxiliary terms (aux_loss)
    # an objective's terms: each one's window value, and its (Σ numerator, Σ denominator)
    terms: dict[str, torch.Tensor] | None = None
    term_sums: dict[str, tuple[torch.Tensor, Any]] | None = None
    updates: int = 1  # optimizer steps taken (a train_step_fn reports its own)
    lrs: dict[str, float] | None = None  # each named optimizer's rate (the Trainer's)


class TrainStep:
    """One optimizer update from one batch, or from a window of accumulation
    micro-batches weighted so that the update equals the union batch's (§2.3)."""

    def __init__(
        self,
        net: torch.nn.Module,
        loss: LossFn,
        task: Task,
        device: torch.device,
        precision: ResolvedPrecision,
        updater: Updater,
    ) -> None:
        self.net, self.loss, self.task = net, loss, task
        self.record_task = task  # how the step records are scored (an objective may differ)
        self.epoch = 0  # the epoch in progress (set by the loop)
        # what the forward pass calls: the network, or its compiled form (compile=); the
        # weights, and so the checkpoints, stay the eager network's
        self.forward_net: Any = net
        self.device, self.precision, self.updater = device, precision, updater
        # fp32 skips the generator-based context manager on every step
        self._autocast = precision.autocast if precision.reduced else contextlib.nullcontext
        self._decode = task.k is not None
        self.keep_outputs = False  # set by a loop whose metrics read the raw outputs
        # Set by a training run that stops on a non-finite loss: the loss is checked
        # after its backward pass and before the optimizer step, so a diverged step never
        # reaches the weights. The LR finder leaves it off: divergence is what it looks for.
        self.guard_loss = False
        self._flag: torch.Tensor | None = None  # pinned host copy of the finite flag (CUDA)
        self._flag_ready: Any = None
        self._aux = aux_source(net)  # a term the network adds to the loss (aux_loss)

    def _guard_start(self, loss: torch.Tensor) -> float | None:
        """Begin the check of ``loss``; ``_guard_end`` finishes it before the update.

        On CUDA the finite flag is copied to pinned host memory behind the forward pass,
        without waiting: the backward pass is queued first, and the host waits for the
        flag only before the update, while the device runs the backward. Elsewhere the
        scalar is read at once (on the CPU a plain read, nothing to wait for).
        """
        if loss.device.type != "cuda":
            return float(loss.detach())
        if self._flag is None:
            self._flag = torch.empty((), dtype=torch.bool, pin_memory=True)
            self._flag_ready = torch.cuda.Event()
        self._flag.copy_(torch.isfinite(loss.detach()), non_blocking=True)
        self._flag_ready.record(torch.cuda.current_stream(loss.device))
        return None

    def _guard_end(self, value: float | None, loss: torch.Tensor, y: torch.Tensor) -> None:
        if value is None:
            self._flag_ready.synchronize()
            if bool(self._flag):
                return
        elif math.isfinite(value):
            return
        if self.loss.per == "target" and int(self.loss.valid_targets(y)) == 0:
            return  # every target ignored: 0 / 0, nothing learned, not a divergence
        value = float(loss.detach().float().sum())
        raise NonFiniteLossError(f"non-finite training loss ({value})", value)

    def needs(self, outputs: bool, preds: bool) -> None:
        """Return raw outputs (declared or task metrics) and decoded predictions
        (extra_metrics) with every step, besides what the task's records need."""
        self.keep_outputs = self.keep_outputs or outputs
        self._decode = self._decode or preds

    def __call__(self, X: torch.Tensor, y: torch.Tensor, step_number: int = 0) -> StepOutput:
        self.updater.zero_grad()
        with self._autocast():
            out = forward(self.forward_net, X)
            loss = self.loss(out, y)
        term = self._aux() if self._aux is not None else None
        if self.guard_loss:
            checked = self._guard_start(loss)
            self.updater.backward(with_term(loss, term))
            self._guard_end(checked, loss, y)
        else:
            self.updater.backward(with_term(loss, term))
        self.updater.step(step_number=step_number)
        preds = self.task.decode(out.detach()) if self._decode else None
        kept = out.detach().float() if self.keep_outputs else None
        return StepOutput(loss.detach(), preds, y, int(y.shape[0]), kept, detached(term))

    def accumulated(
        self, window: list[tuple[torch.Tensor, torch.Tensor]], step_number: int = 0
    ) -> StepOutput:
        """Micro-batch losses are summed and the gradients divided by the window's
        weight: valid targets for a built-in classification loss, rows otherwise."""
        net, loss_fn = self.forward_net, self.loss
        self.updater.zero_grad()
        by_target = loss_fn.per == "target"
        total: Any = sum(int(y.shape[0]) for _, y in window)
        if by_target:
            valid = sum(loss_fn.valid_targets(y) for _, y in window)
            total = valid.clamp_min(1).to(torch.float32)  # type: ignore[union-attr]
        loss_sum = torch.zeros((), device=self.device, dtype=torch.float32)
        preds, outs, aux_sum = [], [], None
        for X, y in window:
            with self.precision.autocast():
                out = forward(net, X)
                part = loss_fn.total(out, y) if by_target else loss_fn(out, y) * y.shape[0]
            term = self._aux() if self._aux is not None else None
            if term is not None:  # weighed as the micro-batch's loss: valid targets or rows
                weight = loss_fn.valid_targets(y) if by_target else y.shape[0]
                value = term.value.detach().float() * weight
                aux_sum = {term.name: value if aux_sum is None else aux_sum[term.name] + value}
            # the log's loss is the task loss alone: the term is recorded beside it
            trained = part if term is None else with_term(part, term, weight)
            if self.guard_loss:
                checked = self._guard_start(part)
                self.updater.backward(trained)
                self._guard_end(checked, part, y)
            else:
                self.updater.backward(trained)
            loss_sum = loss_sum + part.detach().float()
            if self._decode:
                preds.append(self.task.decode(out.detach()))
            if self.keep_outputs:
                outs.append(out.detach().float())
        self.updater.step(total, step_number=step_number)
        y_all = torch.cat([y for _, y in window])
        return StepOutput(
            loss_sum / total,
            torch.cat(preds) if preds else None,
            y_all,
            int(y_all.shape[0]),
            torch.cat(outs) if outs else None,
            None if aux_sum is None else {k: v / total for k, v in aux_sum.items()},
        )
