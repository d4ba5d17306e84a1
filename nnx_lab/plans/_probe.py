"""``plan.probe(batch)``: one batch through a temporary model, before any fit.

The model is built as ``fit()`` would build it (same seed, same initial weights). An
eval-mode, no-grad forward gives the output's shape and whether it is finite; with a
target, ``evaluate()`` scores that forward and one ``TrainStep`` (the training loop's own
step: train mode, loss, backward, the optimizer's update) gives the training loss. The
model is then dropped: no run directory, no file, and the caller's random streams are
restored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..engine.data import check_batch
from ..engine.evaluate import evaluate, inference
from ..engine.optim import build_optimizer, optimizer_groups
from ..engine.params import NNParams
from ..engine.train_step import TrainStep
from ..engine.training_state import preserved_rng, seed_everything
from ..engine.update import Updater
from ..errors import DataError
from ._execution import plan_model
from ._fields import Resolved

__all__ = ["ProbeReport", "run_probe"]


@dataclass(frozen=True)
class ProbeReport:
    """What one batch did in a temporary model.

    ``eval_loss`` / ``eval_metrics`` score the eval-mode forward (None without a target);
    ``train_loss`` is the train-mode loss of one update (dropout on); ``finite`` says
    whether every output was finite.
    """

    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    output_dtype: str
    target_shape: tuple[int, ...] | None
    eval_loss: float | None
    eval_metrics: dict[str, Any] | None
    train_loss: float | None
    finite: bool
    parameters: int
    device: str
    precision: str

    def __str__(self) -> str:
        lines = [
            f"probe: {self.input_shape} -> {self.output_shape} {self.output_dtype} on "
            f"{self.device} ({self.precision}), {self.parameters} parameters",
            "  outputs finite" if self.finite else "  ! outputs hold NaN/inf",
        ]
        if self.eval_loss is not None:
            lines.append(f"  eval loss {self.eval_loss:.6g} (eval mode, no grad)")
        if self.train_loss is not None:
            lines.append(f"  train loss {self.train_loss:.6g} (train mode, one update)")
        if self.target_shape is None:
            lines.append("  no target: forward only")
        return "\n".join(lines)


def _split(batch: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    if isinstance(batch, torch.Tensor):
        return batch, None
    if isinstance(batch, tuple | list) and len(batch) == 1 and isinstance(batch[0], torch.Tensor):
        return batch[0], None
    if isinstance(batch, tuple | list) and len(batch) == 2:
        X, y = batch
        if isinstance(X, torch.Tensor) and isinstance(y, torch.Tensor):
            return X, y
    raise DataError(
        "batch",
        f"a {type(batch).__name__} is not a batch",
        "pass a features tensor, or an (X, y) pair: next(iter(make_train_loader()))",
    )


def _check_features(X: torch.Tensor, input_dim: int) -> None:
    if X.ndim != 2 or X.shape[-1] != input_dim:
        raise DataError(
            "batch",
            f"features of shape {tuple(X.shape)}, the network takes (rows, {input_dim})",
            f"pass 2-D features with {input_dim} columns (NNParams.input_dim)",
        )
    if X.dtype != torch.float32:
        raise DataError(
            "batch", f"features of dtype {X.dtype}", "pass float32 features, e.g. X.float()"
        )


def run_probe(r: Resolved, batch: Any) -> ProbeReport:
    X, y = _split(batch)
    with preserved_rng():
        seed_everything(r.train.seed)
        model = plan_model(r)
        if r.net is None:  # a spec's network: its output width is read from a first forward
            model.predict(X[:2])
        task = model.task(y if model.loss_fn.kind is None else None)
        if not isinstance(r.net, NNParams):
            pass  # another network: its first forward below says what it refuses
        elif y is None:
            _check_features(X, r.net.input_dim)
        else:
            check_batch((X, y), "batch", r.net, task, "the probe batch")
        device, precision = model.device, model.precision
        with inference(model.net, precision, "evaluate"):
            raw = model.net(X.to(device))
            out = raw.float()
        finite = bool(torch.isfinite(out).all())
        eval_loss = eval_metrics = train_loss = None
        if y is not None:
            scored = evaluate(
                model.net, [(X, y)], model.loss_fn, task, device=device, precision=precision
            )
            eval_metrics = scored.to_json()
            eval_loss = scored.loss
            optimizer = build_optimizer(optimizer_groups(model.net, r.optim), r.optim)
            scaler = torch.amp.GradScaler(device.type) if precision.uses_scaler else None
            updater = Updater(optimizer, scaler, precision, r.optim.grad_clip_norm)
            step = TrainStep(model.net, model.loss_fn, task, device, precision, updater)
            model.net.train()
            train_loss = float(step(X.to(device), y.to(device), 1).loss)
        return ProbeReport(
            input_shape=tuple(X.shape),
            output_shape=tuple(out.shape),
            output_dtype=str(raw.dtype).removeprefix("torch."),
            target_shape=None if y is None else tuple(y.shape),
            eval_loss=None if eval_loss is None or math.isnan(eval_loss) else eval_loss,
            eval_metrics=eval_metrics,
            train_loss=train_loss,
            finite=finite,
            parameters=sum(p.numel() for p in model.net.parameters()),
            device=str(device),
            precision=precision.effective,
        )
