"""``train_step_fn=``: a step the user owns, forward to update (§3).

``train_step_fn(ctx) -> EDP`` is called once per loader batch with a frozen
``TrainStepContext``. It runs the forward pass, the backward pass and the optimizer
step itself (``ctx.precision.autocast()`` and ``ctx.scaler`` are its to apply) and calls
``ctx.report_update()`` after each optimizer step it takes: the run's step count, and
so the log, the checkpoints' clock and the monitor, advance by what it reports.
``default_train_step(ctx)`` is the engine's own update, for a step that wraps it.

A step marked ``@full_precision_only`` (the mark is an attribute, so a wrapper written
with ``functools.wraps`` keeps it) refuses a reduced precision policy before any run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .adapters import forward
from .edp import EDP
from .grad_ops import clip_grad_norm, zero_grad
from .step_batches import step_batch
from .tasks import Task
from .train_step import StepOutput, TrainStep

__all__ = [
    "CustomStep",
    "TrainStepContext",
    "default_train_step",
    "full_precision_only",
    "is_full_precision_only",
]

_MARK = "__nnx_full_precision_only__"
_new = object.__new__


def full_precision_only(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a ``train_step_fn`` that must run in fp32: a reduced policy is refused
    before any run directory exists."""
    setattr(fn, _MARK, True)
    return fn


def is_full_precision_only(fn: Any) -> bool:
    return bool(getattr(fn, _MARK, False))


@dataclass(frozen=True)
class TrainStepContext:
    """What a ``train_step_fn`` is given for one loader batch."""

    model: torch.nn.Module  # the network (its compiled form is refused: see train_checks)
    batch: Any
    optimizer: torch.optim.Optimizer
    scaler: Any  # the GradScaler of an fp16 policy, else None
    grad_clip_norm: float | None
    extra_metrics: dict[str, Callable[..., Any]] | None
    accumulate_grad_batches: int
    batch_idx: int
    epoch_idx: int
    is_last_batch: bool | None  # None: the loader has no length
    accumulation_state: dict[str, Any]  # the step's own scratch space, kept for the run
    precision: Any  # the run's ResolvedPrecision
    report_update: Callable[[], None]
    loss_fn: Any = None  # the model's loss (LossFn): what default_train_step trains on
    device: torch.device | None = None


def default_train_step(ctx: TrainStepContext) -> EDP:
    """The engine's update on ``ctx.batch``: the model's loss on the network's outputs,
    under the precision policy, with the scaler and clipping; one reported update."""
    X, y = ctx.batch
    device = ctx.device if ctx.device is not None else next(ctx.model.parameters()).device
    X, y = X.to(device), y.to(device)
    zero_grad(ctx.optimizer)
    with ctx.precision.autocast():
        loss = ctx.loss_fn(forward(ctx.model, X), y)
    scaler = ctx.scaler
    (scaler.scale(loss) if scaler is not None else loss).backward()
    if scaler is not None:
        scaler.unscale_(ctx.optimizer)
    if ctx.grad_clip_norm:
        params = [p for g in ctx.optimizer.param_groups for p in g["params"]]
        clip_grad_norm(params, ctx.grad_clip_norm)
    if scaler is not None:
        scaler.step(ctx.optimizer)
        scaler.update()
    else:
        ctx.optimizer.step()
    ctx.report_update()
    return EDP(loss=float(loss.detach()), samples=int(y.shape[0]))


class CustomStep(TrainStep):
    """A ``TrainStep`` that hands each batch to ``train_step_fn``; its record holds
    the EDP's loss and samples (the step's own metrics are its to compute)."""

    def __init__(self, *parts: Any, fn: Callable[[TrainStepContext], EDP], params: Any) -> None:
        super().__init__(*parts)
        self.fn = fn
        self.params = params
        self.record_task = Task("regression", self.task.n_outputs)
        self._decode = False
        self.state: dict[str, Any] = {}
        self.batch_index = 0  # set by the loop before each call
        self._fixed_fields: dict[str, Any] | None = None
        try:
            self._batches: int | None = len(params.train_loader)
        except TypeError:
            self._batches = None

    def needs(self, outputs: bool, preds: bool) -> None:
        self.keep_outputs = self._decode = False

    def _fixed(self) -> dict[str, Any]:
        """The context's fields that stay for the run, read once (the loop calls the
        step thousands of times; a frozen dataclass's ``__init__`` costs ~3 µs)."""
        fixed = self._fixed_fields
        if fixed is None:
            fixed = self._fixed_fields = {
                "model": self.net,
                "optimizer": self.updater.optimizer,
                "scaler": self.updater.scaler,
                "grad_clip_norm": self.updater.clip_norm,
                "extra_metrics": self.params.extra_metrics or None,
                "accumulate_grad_batches": self.params.accumulation_steps,
                "accumulation_state": self.state,
                "precision": self.precision,
                "loss_fn": self.loss,
                "device": self.device,
            }
        return fixed

    def _one(self, X: Any, y: Any, index: int) -> tuple[EDP, int]:
        updates = [0]

        def report_update() -> None:
            updates[0] += 1

        # the same frozen TrainStepContext as TrainStepContext(**fields) (it has no
        # __post_init__), filled without the generated __init__'s per-field setattr
        ctx = _new(TrainStepContext)
        fields = ctx.__dict__
        fields.update(self._fixed())
        fields["batch"] = step_batch(X, y)
        fields["batch_idx"] = index
        fields["epoch_idx"] = self.epoch
        fields["is_last_batch"] = None if self._batches is None else index == self._batches - 1
        fields["report_update"] = report_update
        edp = self.fn(ctx)
        if not isinstance(edp, EDP):
            name = getattr(self.fn, "__qualname__", type(self.fn).__name__)
            raise TypeError(
                f"train_step_fn {name} returned {type(edp).__name__}; it must return an "
                "EDP (nnx_lab.EDP(loss=..., samples=...))"
            )
        return edp, updates[0]

    def __call__(self, X: Any, y: Any, step_number: int = 0) -> StepOutput:
        return self.accumulated([(X, y)], step_number)

    def accumulated(self, window: list[tuple[Any, Any]], step_number: int = 0) -> StepOutput:
        """Each batch of the loop's window, in order (the step accumulates itself)."""
        first = self.batch_index - len(window) + 1
        losses, rows, updates = [], 0, 0
        for offset, (X, y) in enumerate(window):
            edp, n = self._one(X, y, first + offset)
            samples = edp.samples or int(y.shape[0])
            losses.append((float(edp.loss), samples))
            rows += samples
            updates += n
        loss = sum(v * n for v, n in losses) / max(rows, 1)
        y_all = window[0][1] if len(window) == 1 else torch.cat([y for _, y in window])
        value = torch.tensor(loss, dtype=torch.float32)
        terms = getattr(self.fn, "current_terms", None)  # a Trainer objective's, by name
        values, sums = (None, None) if terms is None else terms() or (None, None)
        return StepOutput(
            value,
            None,
            y_all,
            rows,
            terms=values,
            term_sums=sums,
            updates=updates,
            lrs=self.current_lrs(),
        )

    def current_lrs(self) -> dict[str, float] | None:
        """Each named optimizer's rate, for a step that owns several (the Trainer)."""
        lrs = getattr(self.fn, "current_lrs", None)
        return None if lrs is None else lrs()

    def plateau_step(self, value: float) -> None:
        """The epoch's plateau signal, for a step that owns schedulers (the Trainer)."""
        step = getattr(self.fn, "plateau_step", None)
        if step is not None:
            step(value)
