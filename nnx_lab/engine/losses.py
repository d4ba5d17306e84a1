"""The loss a model trains on: a built-in ``Losses`` member, or the user's own.

A built-in loss is a torch function with NNx's conventions: NLL applies log_softmax
first (§2.10), regression and binary losses compare in at least float32 (under bf16
autocast a target cast to the output's dtype would be rounded before the loss sees it),
and classification honours ``ignore_index`` (-100, torch's default): those targets count
neither in the loss nor in any metric. A custom loss module or callable receives the raw
network output and the targets, ``loss(out, y)``, and returns the batch's mean (§2.10).
"""

from __future__ import annotations

import copy
import hashlib
import inspect
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from ..errors import ConfigError
from .enums import Losses
from .fingerprint import code_digest

__all__ = ["IGNORE_INDEX", "LossFn", "custom_loss_identity"]

IGNORE_INDEX = -100


def _at_least_fp32(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.promote_types(t.dtype, torch.float32)) if t.is_floating_point() else t.float()


def custom_loss_identity(loss: Any) -> dict[str, Any]:
    """What enters the run id for a custom loss: its type, its code, its settings.

    A module's settings are its ``extra_repr()`` and the bytes of its buffers and
    parameters (class weights); a plain function is named by its qualified name and
    source. Two losses that differ in either get different run ids.
    """
    kind = type(loss)
    ident: dict[str, Any] = {
        "custom": f"{kind.__module__}.{kind.__qualname__}"
        if not inspect.isfunction(loss)
        else f"{loss.__module__}.{loss.__qualname__}",
        "code": code_digest(loss),
    }
    if isinstance(loss, torch.nn.Module):
        h = hashlib.sha256(loss.extra_repr().encode())
        for name, t in [*loss.named_parameters(), *loss.named_buffers()]:
            h.update(name.encode())
            h.update(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())
        for key in ("ignore_index", "reduction", "label_smoothing", "pos_weight"):
            if hasattr(loss, key) and not isinstance(getattr(loss, key), torch.Tensor):
                h.update(f"{key}={getattr(loss, key)!r}".encode())
        ident["settings"] = h.hexdigest()
    return ident


class LossFn:
    """A resolved loss: ``loss(out, y)`` is the batch mean, ``total(out, y)`` its sum.

    ``per`` says what the mean is over, which is also the weight a batch gets in an
    epoch's average: ``"target"`` (class targets that are not ``ignore_index``),
    ``"element"`` (every output element: regression, binary) or ``"row"`` (a custom
    loss, which only reports its mean).
    """

    def __init__(
        self, loss: Losses | torch.nn.Module | Callable[..., Any], task: Any = None
    ) -> None:
        """``task``: a declared ``TaskSpec``. A categorical task's ``ignore_index`` is the
        built-in classification loss's; a regression or multilabel task masks NaN
        targets out of a built-in loss, which then averages over the valid targets."""
        self.masks_nan = False
        if isinstance(loss, Losses):
            self.kind: Losses | None = loss
            self.custom: Any = None
            ignore = IGNORE_INDEX
            if task is not None and task.kind == "categorical" and task.ignore_index is not None:
                ignore = task.ignore_index
            self.ignore_index: int | None = ignore if loss.is_classification else None
            self.per = "target" if loss.is_classification else "element"
            self._fn = _builtin(loss, ignore)
            if task is not None and task.kind in ("regression", "multilabel"):
                self.masks_nan = True
                self.per = "target"
                self._fn = _masked(loss)
        elif callable(loss):
            self.kind = None
            self.custom = loss
            ii = getattr(loss, "ignore_index", None)
            self.ignore_index = ii if isinstance(ii, int) and not isinstance(ii, bool) else None
            self.per = "row"
            self._fn = None
        else:
            raise ConfigError(
                "NNModelParams.loss",
                loss,
                "pass a Losses member, an nn.Module loss (e.g. nn.CrossEntropyLoss()) or a "
                "callable loss(out, y) returning the batch's mean",
            )

    @property
    def name(self) -> str:
        if self.kind is not None:
            return self.kind.value
        return getattr(self.custom, "__qualname__", type(self.custom).__qualname__)

    def identity(self) -> Any:
        """The run-id form: the enum's value, or the custom loss's fingerprint."""
        return self.kind.value if self.kind is not None else custom_loss_identity(self.custom)

    def __call__(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self._fn is not None:
            return self._fn(out, y, "mean")
        loss = self.custom(out, y)
        if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
            raise TypeError(
                f"the custom loss {self.name} returned {type(loss).__name__}"
                + (f" of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else "")
                + "; it must return the batch's mean as a scalar tensor"
            )
        return loss

    def valid_targets(self, y: torch.Tensor) -> torch.Tensor:
        """How many targets of ``y`` a ``per="target"`` loss averages over (on the device)."""
        if self.masks_nan:
            return torch.isfinite(y).sum()
        return (y != self.ignore_index).sum()

    def split_parts(
        self, out: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """For a custom torch loss module with a ``reduction``: this batch's summed loss
        and its share of the mean's denominator (None under ``reduction="sum"``), so that
        batches combine into the loss of one pass over the whole split, as NNx's
        ``evaluate()`` gives: the total for ``"sum"``; for ``"mean"``, the sum over the
        summed class weight of the targets not ignored (a weighted or ``ignore_index``
        loss), or over the elements (an element-wise loss). None for anything else."""
        module = self.custom
        reduction = getattr(module, "reduction", None)
        if self.kind is not None or not isinstance(module, torch.nn.Module):
            return None
        if reduction not in ("mean", "sum"):
            return None
        summed = copy.copy(module)  # shares the weights; only the reduction differs
        summed.reduction = "sum"
        total = summed(out, y)
        if reduction == "sum":
            return total, None
        indexed = isinstance(module, torch.nn.CrossEntropyLoss | torch.nn.NLLLoss) and not (
            y.is_floating_point()
        )
        if indexed:
            valid = y != module.ignore_index
            weight = getattr(module, "weight", None)
            if weight is None:
                return total, valid.sum().to(torch.float64)
            picked = weight[torch.where(valid, y, torch.zeros_like(y))]
            return total, (picked * valid).sum().to(torch.float64)
        if isinstance(module, torch.nn.CrossEntropyLoss):  # class probabilities: per row
            return total, torch.tensor(float(out.shape[0]), dtype=torch.float64)
        return total, torch.tensor(float(out.numel()), dtype=torch.float64)

    def total(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The batch's summed loss (a custom loss: its mean times the rows)."""
        if self._fn is not None:
            return self._fn(out, y, "sum")
        return self(out, y) * y.shape[0]


def _builtin(
    loss: Losses, ignore: int = IGNORE_INDEX
) -> Callable[[torch.Tensor, torch.Tensor, str], torch.Tensor]:
    if loss is Losses.CROSS_ENTROPY:
        return lambda out, y, red: F.cross_entropy(out, y, ignore_index=ignore, reduction=red)
    if loss is Losses.NEGATIVE_LOG_LIKELIHOOD:
        return lambda out, y, red: F.nll_loss(
            F.log_softmax(out, dim=-1), y, ignore_index=ignore, reduction=red
        )
    if loss is Losses.MEAN_SQUARED_ERROR:
        return lambda out, y, red: F.mse_loss(
            _at_least_fp32(out), _at_least_fp32(y.reshape(out.shape)), reduction=red
        )
    return lambda out, y, red: F.binary_cross_entropy_with_logits(
        _at_least_fp32(out), _at_least_fp32(y.reshape(out.shape)), reduction=red
    )


def _masked(loss: Losses) -> Callable[[torch.Tensor, torch.Tensor, str], torch.Tensor]:
    """MSE or BCE over the finite targets only (a declared task's NaN is a missing target).

    The NaN is replaced before the loss, not only masked after it: a masked-out NaN would
    still send NaN into the gradient (0 * NaN). The mean is over the valid targets; a
    batch without any has loss 0 and no gradient.
    """
    elementwise = (
        (lambda o, t: (o - t) ** 2)
        if loss is Losses.MEAN_SQUARED_ERROR
        else (lambda o, t: F.binary_cross_entropy_with_logits(o, t, reduction="none"))
    )

    def fn(out: torch.Tensor, y: torch.Tensor, red: str) -> torch.Tensor:
        o = _at_least_fp32(out)
        t = _at_least_fp32(y.reshape(out.shape))
        valid = torch.isfinite(t)
        per = elementwise(o, torch.where(valid, t, torch.zeros_like(t)))
        total = torch.where(valid, per, torch.zeros_like(per)).sum()
        if red == "sum":
            return total
        return total / valid.sum().clamp_min(1)

    return fn
