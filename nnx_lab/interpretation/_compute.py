"""``interpret``: one streamed pass over a split (``iter_predict``), counted with
``StreamingMetrics``; what is kept grows with the cells and ``top_k``, not with the
split (but the regression residuals, one float per row, for the scatter)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..calibration import model_fingerprint
from ..data.metrics import MetricSpec
from ..data.streaming import StreamingMetrics
from ..engine.data import check_inputs
from ..engine.prediction import warn_positions
from ..engine.probabilities import ProbabilitySpec
from ..errors import ConfigError, DataError
from ._inputs import BatchTap, check_count, check_tools, resolve_model
from ._result import InterpretationResult, Mistake
from ._samples import check_show, display_of, show_for

__all__ = ["interpret"]


def interpret(
    run_or_model: Any,
    loader: Any,
    *,
    split: str = "val",
    calibrator: Any = None,
    policy: Any = None,
    model_id: str | None = None,
    labels: Any = None,
    top_k: int = 20,
    samples_per_cell: int = 24,
    show: str = "auto",
    feature_names: Any = None,
    decode: Any = None,
    runs_root: Any = None,
    module: Any = None,
    loss: Any = None,
) -> InterpretationResult:
    """The mistakes a model makes on one split, in one streamed pass.

    ``run_or_model``: an ``NNRun`` or a run id (its BEST checkpoint is read; ``module=``
    and ``loss=`` pass an own module or loss again, as ``NNModel.from_checkpoint``
    takes them) or an ``NNModel`` (as it is). ``loader``: ``(x, y)`` batches, or an
    ``(X, y)`` tuple. ``calibrator`` (a ``TemperatureCalibrator``): the probabilities
    shown are calibrated. ``policy`` (an ``AbstentionPolicy``): each top loss says
    whether it would be declined. Both are checked against ``model_id`` (default: the
    model's ``model_fingerprint``). ``show``: how samples are drawn (``"auto"``: images
    for ``(N, C, H, W)`` floats, text for integer token rows, table rows otherwise).
    """
    if not isinstance(split, str) or not split.strip():
        raise ConfigError("interpret.split", split, "name the split, e.g. 'val' or 'test'")
    top_k = check_count(top_k, "top_k", 1)
    samples_per_cell = check_count(samples_per_cell, "samples_per_cell", 0)
    show, names = check_show(show, feature_names, decode)
    check_tools(calibrator, policy)
    if model_id is not None and (not isinstance(model_id, str) or not model_id):
        raise ConfigError("interpret.model_id", model_id, "pass the model's id (a str) or None")
    check_inputs(loader)
    model, source = resolve_model(run_or_model, runs_root, module, loss)
    warn_positions(loader, stacklevel=2)  # the tap hides the loader from iter_predict's own
    task = model.task()
    opts = {"feature_names": names, "decode": decode}
    if task.kind == "regression":
        if calibrator is not None or policy is not None:
            raise ConfigError(
                "interpret.calibrator" if calibrator is not None else "interpret.policy",
                "a regression model",
                "calibration and abstention apply to classifiers; drop the argument",
            )
        return _regression(model, loader, split, source, top_k, show, opts)
    if task.kind not in ("categorical", "binary"):
        raise ConfigError(
            "interpret.run_or_model",
            f"a {task.kind} model",
            "interpret reads categorical, binary and regression models",
        )
    if (calibrator is not None or policy is not None) and model_id is None:
        model_id = model_fingerprint(model)
    k = int(task.k)  # type: ignore[arg-type]
    labels = _labels(labels, k, calibrator, policy, task.kind)
    return _classification(
        model, loader, split, source, labels, calibrator, policy, model_id,
        top_k, samples_per_cell, show, opts,
    )  # fmt: skip


def _labels(labels: Any, k: int, calibrator: Any, policy: Any, kind: str) -> tuple[str, ...]:
    if labels is None:
        for tool in (calibrator, policy):
            if tool is not None and tool.labels is not None and kind == "categorical":
                labels = tool.labels
                break
    if labels is None:
        return tuple(str(i) for i in range(k))
    labels = tuple(str(v) for v in labels)
    if len(labels) != k or len(set(labels)) != k:
        raise ConfigError(
            "interpret.labels", list(labels), f"pass {k} distinct names, one per class"
        )
    return labels


def _two_class(p: torch.Tensor, n: int) -> torch.Tensor:
    """A binary model's single output as two classes (0, 1)."""
    p = p.reshape(n, -1)
    return torch.cat([1 - p, p], dim=1) if p.shape[1] == 1 else p


def _classification(
    model: Any,
    loader: Any,
    split: str,
    source: dict[str, Any],
    labels: tuple[str, ...],
    calibrator: Any,
    policy: Any,
    model_id: str | None,
    top_k: int,
    per_cell: int,
    show: str,
    opts: dict[str, Any],
) -> InterpretationResult:
    task = model.task()
    k, binary = len(labels), task.kind == "binary"
    spec = ProbabilitySpec("bernoulli") if binary else ProbabilitySpec("categorical", labels=labels)
    ignore = task.ignore_index if not binary else None
    # accuracy only: every other figure here is read from the matrix or the losses
    metrics = StreamingMetrics([MetricSpec("accuracy")], "categorical", ignore_index=ignore)
    metrics.n_classes = k
    cell_ids: dict[tuple[int, int], list[np.ndarray]] = {}
    cell_samples: dict[tuple[int, int], list[Mistake]] = {}
    top: list[Mistake] = []
    tap, rows = BatchTap(loader), 0
    rich = calibrator is not None or policy is not None  # they read a PredictionResult
    with model.iter_predict(tap, rich=rich, spec=spec if rich else None) as stream:
        for batch in stream:
            n, ids = len(batch), batch.sample_ids
            x, y = tap.take(n)
            if x is not None and show == "auto":
                show = show_for(x, show)
            logits = batch.logits.float().cpu().reshape(n, -1)
            if binary:  # [0, z]: its softmax is (1 - sigmoid z, sigmoid z), its CE the BCE
                logits = torch.cat([torch.zeros(n, 1), logits], dim=1)
            y = y.reshape(n).long()
            valid = torch.ones(n, dtype=torch.bool) if ignore is None else y != ignore
            bad = valid & ((y < 0) | (y >= k))
            if bool(bad.any()):  # refused before a loss is gathered at a bad index
                raise DataError(
                    "targets",
                    f"{int(bad.sum())} targets outside [0, {k}), e.g. {int(y[bad][0])}",
                    f"pass class indices in [0, {k})",
                )
            metrics.update(y, logits=logits)
            logp = logits.log_softmax(dim=1)  # once: the losses and the probabilities
            shown = logp.exp()
            calibrated = None
            if calibrator is not None:
                calibrated = calibrator.transform(batch, model_id=model_id)
                shown = _two_class(calibrated.calibrated_probabilities.float().cpu(), n)
            declined = None
            if policy is not None:
                verdict = policy.apply(
                    calibrated if calibrated is not None else batch,
                    model_id=model_id,
                    sample_ids=ids,
                )
                declined = ~np.asarray(verdict.accepted, dtype=bool)
            pred = logits.argmax(dim=1)
            safe_y = torch.where(valid, y, torch.zeros_like(y))
            losses = -logp.gather(1, safe_y.unsqueeze(1)).squeeze(1)  # cross-entropy
            rows += int(valid.sum())

            def mistake(i: int, x=x, y=y, pred=pred, shown=shown, losses=losses, ids=ids,
                        declined=declined, safe_y=safe_y, show=show) -> Mistake:  # fmt: skip
                return Mistake(
                    sample_id=int(ids[i]),
                    target=int(y[i]),
                    prediction=int(pred[i]),
                    loss=float(losses[i]),
                    probability=float(shown[i, pred[i]]),
                    true_probability=float(shown[i, safe_y[i]]),
                    declined=None if declined is None else bool(declined[i]),
                    display=None if x is None else display_of(x[i], show, **opts),
                )

            vy, vp, vi = y[valid].numpy(), pred[valid].numpy(), np.flatnonzero(valid.numpy())
            for t, p in {(int(a), int(b)) for a, b in zip(vy, vp, strict=True)}:
                at = vi[(vy == t) & (vp == p)]
                cell_ids.setdefault((t, p), []).append(ids[at])
                kept = cell_samples.setdefault((t, p), [])
                kept.extend(mistake(int(i)) for i in at[: max(0, per_cell - len(kept))])
            ranked = vi[np.argsort(-losses.numpy()[vi], kind="stable")][:top_k]
            top = _best(top + [mistake(int(i)) for i in ranked], top_k)
    counts = metrics.statistic("confusion")
    confusion = (
        np.zeros((k, k), dtype=np.int64)
        if counts is None
        else counts["confusion"][:-1].reshape(k, k).round().long().cpu().numpy()
    )
    return InterpretationResult(
        task="classification",
        split=split,
        source=source,
        rows=rows,
        metrics=metrics.finalize().values,
        show=show if show != "auto" else "none",
        labels=labels,
        confusion=confusion,
        cell_ids={c: np.concatenate(v) for c, v in cell_ids.items()},
        cell_samples=cell_samples,
        top_losses=top,
        calibrated=calibrator is not None,
        temperature=None if calibrator is None else float(calibrator.temperature),
        policy=None
        if policy is None
        else {"kind": policy.kind, "threshold": float(policy.threshold)},
    )


def _best(rows: list[Mistake], k: int) -> list[Mistake]:
    """The ``k`` largest losses, ties by sample id (the same for any batch size)."""
    return sorted(rows, key=lambda m: (-m.loss, m.sample_id))[:k]


def _regression(
    model: Any,
    loader: Any,
    split: str,
    source: dict[str, Any],
    top_k: int,
    show: str,
    opts: dict[str, Any],
) -> InterpretationResult:
    metrics = StreamingMetrics([MetricSpec("mse"), MetricSpec("mae")], "regression")
    ids_, targets_, preds_ = [], [], []
    top: list[Mistake] = []
    tap = BatchTap(loader)
    with model.iter_predict(tap) as stream:
        for batch in stream:
            n, ids = len(batch), batch.sample_ids
            x, y = tap.take(n)
            if x is not None and show == "auto":
                show = show_for(x, show)
            values = batch.classes.float().cpu()
            if values.numel() != n:
                raise DataError(
                    "run_or_model",
                    f"{values.numel() // max(n, 1)} outputs per row",
                    "interpret draws residuals of one regression output per row",
                )
            values, y = values.reshape(n), y.float().reshape(n)
            metrics.update(y, values=values)
            keep = ~torch.isnan(y)  # a NaN target is missing, as in the metrics
            ids_.append(ids[keep.numpy()])
            targets_.append(y[keep].numpy())
            preds_.append(values[keep].numpy())
            err = (values - y).abs()
            vi = np.flatnonzero(keep.numpy())
            ranked = vi[np.argsort(-err.numpy()[vi], kind="stable")][:top_k]
            top = _best(
                top
                + [
                    Mistake(
                        sample_id=int(ids[i]),
                        target=float(y[i]),
                        prediction=float(values[i]),
                        loss=float(err[i]),
                        display=None if x is None else display_of(x[i], show, **opts),
                    )
                    for i in ranked
                ],
                top_k,
            )
    targets = np.concatenate(targets_) if targets_ else np.zeros(0, np.float32)
    preds = np.concatenate(preds_) if preds_ else np.zeros(0, np.float32)
    return InterpretationResult(
        task="regression",
        split=split,
        source=source,
        rows=len(targets),
        metrics=metrics.finalize().values,
        show=show if show != "auto" else "none",
        sample_ids=np.concatenate(ids_) if ids_ else np.zeros(0, np.int64),
        targets=targets,
        predictions=preds,
        residuals=preds - targets,
        largest_errors=top,
    )
