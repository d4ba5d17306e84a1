"""The four checks. Each takes what it needs and returns a ``PreflightCheck``; the
network passed in is a copy (``_run`` makes it), trained or perturbed freely here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import Any

import torch

from ..engine.adapters import forward
from ..engine.fast_batches import batches
from ..lr_sweep import lr_finder
from ._report import PreflightCheck

__all__ = ["check_data", "check_gradients", "check_lr", "check_overfit"]

# a class with fewer rows than this fraction of the largest class's is reported
_IMBALANCE = 0.05


def check_data(
    loader: Any, net: torch.nn.Module, classification: bool, *, max_batches: int = 200
) -> PreflightCheck:
    """NaN / inf in the features or targets (the first batch and column named), and
    for a classification loss: labels within ``[0, classes)`` (the network's output
    width), every class present, none under 5 % of the largest."""
    classes: int | None = None
    counts: torch.Tensor | None = None
    rows = 0
    for index, (X, y) in enumerate(batches(loader)):
        if index >= max_batches:
            break
        rows += int(y.shape[0])
        for what, t in (("features", X), ("targets", y)):
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                bad = ~torch.isfinite(t)
                if bool(bad.any()):
                    row, *col = (int(v) for v in bad.nonzero()[0])
                    where = f"row {row}" + (f", column {col[0]}" if col else "")
                    return PreflightCheck(
                        "data",
                        False,
                        f"the {what} of batch {index} hold NaN/inf ({where}: {float(t[bad][0])})",
                        "clean or impute the data (nnx_lab.preprocessing) before training",
                        {"batch": index, "what": what},
                    )
        if classification and isinstance(X, torch.Tensor):
            if classes is None:
                with torch.no_grad():
                    classes = int(forward(net, X[:2]).shape[-1])
                counts = torch.zeros(classes, dtype=torch.long)
            labels = y.reshape(-1).long()
            labels = labels[labels != -100]  # ignore_index
            if labels.numel():
                lo, hi = int(labels.min()), int(labels.max())
                if lo < 0 or hi >= classes:
                    bad_label = lo if lo < 0 else hi
                    return PreflightCheck(
                        "data",
                        False,
                        f"label {bad_label} in batch {index} is outside 0..{classes - 1} "
                        f"(the network has {classes} outputs)",
                        "set NNParams.output_dim to the number of classes, or remap labels",
                        {"batch": index, "label": bad_label, "classes": classes},
                    )
                counts += torch.bincount(labels.cpu(), minlength=classes)
    details: dict[str, Any] = {"rows_checked": rows}
    if counts is not None:
        per = counts.tolist()
        details["class_counts"] = per
        missing = [k for k, n in enumerate(per) if n == 0]
        if missing:
            return PreflightCheck(
                "data",
                False,
                f"class(es) {missing} have no row in the {rows} rows checked",
                "check the labels and output_dim, or stratify the split",
                details,
            )
        if min(per) < _IMBALANCE * max(per):
            k = per.index(min(per))
            return PreflightCheck(
                "data",
                False,
                f"class {k} has {min(per)} rows against {max(per)} for the largest "
                f"(under {_IMBALANCE:.0%})",
                "rebalance (a weighted sampler or loss) or monitor a balanced metric",
                details,
            )
    return PreflightCheck("data", True, details=details)


def check_gradients(
    net: torch.nn.Module, loss_fn: Any, batch: tuple[Any, Any], allow_frozen: Sequence[str] = ()
) -> PreflightCheck:
    """One backward on ``batch``: every tensor that should train gets a non-zero
    gradient. Named: trainable tensors with no gradient (detached, or unused by the
    forward), with an all-zero one, and frozen ones (``requires_grad=False``) that no
    glob of ``allow_frozen`` covers."""
    net.train()
    net.zero_grad(set_to_none=True)
    X, y = batch
    loss_fn(forward(net, X), y).backward()
    named = list(net.named_parameters())
    frozen = [n for n, p in named if not p.requires_grad]
    unexpected = [n for n in frozen if not any(fnmatchcase(n, g) for g in allow_frozen)]
    trainable = [(n, p) for n, p in named if p.requires_grad]
    none = [n for n, p in trainable if p.grad is None]
    grads = [p.grad for _, p in trainable if p.grad is not None]
    norms = torch._foreach_norm(grads) if grads else []
    have = [n for n, p in trainable if p.grad is not None]
    zero = [
        n
        for n, v in zip(have, torch.stack(norms).tolist() if norms else [], strict=True)
        if v == 0.0
    ]
    net.zero_grad(set_to_none=True)
    details = {"trainable": len(trainable), "frozen": frozen, "no_gradient": none, "zero": zero}
    problems = []
    if none:
        problems.append(f"no gradient reaches {_names(none)} (detached or unused in forward)")
    if zero:
        problems.append(f"the gradient of {_names(zero)} is exactly zero (a dead path)")
    if unexpected:
        problems.append(f"{_names(unexpected)} are frozen (requires_grad=False)")
    if problems:
        return PreflightCheck(
            "gradients",
            False,
            "; ".join(problems),
            "unfreeze the layer (model.unfreeze(...)), remove the .detach() / unused "
            "module, or pass allow_frozen=[glob] for tensors frozen on purpose",
            details,
        )
    return PreflightCheck("gradients", True, details=details)


def check_overfit(
    net: torch.nn.Module,
    loss_fn: Any,
    batch: tuple[Any, Any],
    optimizer: torch.optim.Optimizer,
    *,
    steps: int,
    factor: float,
) -> PreflightCheck:
    """``steps`` updates on one batch (dropout off): the loss must fall to at most
    ``first / factor``. A model that cannot memorize one batch has a bug (a wrong
    loss, labels, a learning rate far off) that no long fit repairs."""
    net.train()
    for m in net.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.eval()
    X, y = batch
    losses = []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(forward(net, X), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    values = torch.stack(losses).tolist()
    first, last = values[0], min(values[-3:])
    details = {"steps": steps, "factor": factor, "first_loss": first, "last_loss": last}
    if not all(math.isfinite(v) for v in values):
        bad = next(i for i, v in enumerate(values) if not math.isfinite(v))
        return PreflightCheck(
            "overfit",
            False,
            f"the loss went non-finite at update {bad + 1} on one batch",
            "lower max_lr, set grad_clip_norm or normalize the inputs",
            details,
        )
    target = first / factor if first > 0 else first - abs(first) * (factor - 1)
    if last > target:
        return PreflightCheck(
            "overfit",
            False,
            f"one batch's loss fell from {first:.4g} to {last:.4g} in {steps} updates, "
            f"not below {target:.4g} (first / {factor:g})",
            "check the loss, the labels and the learning rate; a model that cannot "
            "memorize one batch does not learn the data",
            details,
        )
    return PreflightCheck("overfit", True, details=details)


def check_lr(
    net: torch.nn.Module, loader: Any, loss_fn: Any, optim: Any, *, num_iter: int
) -> PreflightCheck:
    """An LR sweep (``nnx_lab.lr_finder``) on ``net``: a problem when it suggests no
    rate, or when the planned ``max_lr`` is more than 10 times above its suggestion."""
    result = lr_finder(
        net, loader, loss_fn=loss_fn, num_iter=num_iter, optimizer=optim, start_lr=1e-6
    )
    suggested = result.suggested_lr
    planned = float(optim.max_lr)
    details = {"suggested_lr": suggested, "max_lr": planned, "points": len(result.lrs)}
    if suggested is None:
        return PreflightCheck(
            "lr",
            False,
            "the LR sweep found no falling stretch of the loss",
            "look at the sweep (nnx_lab.lr_finder) and the data; try a longer sweep",
            details,
        )
    if planned > 10 * suggested:
        return PreflightCheck(
            "lr",
            False,
            f"max_lr={planned:g} is {planned / suggested:.0f}x the sweep's suggestion "
            f"{suggested:.3g}",
            f"try max_lr={suggested:.3g} (plan.with_lr(...))",
            details,
        )
    return PreflightCheck("lr", True, details=details)


def _names(names: list[str], most: int = 6) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
