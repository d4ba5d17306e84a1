"""DatasetSummary: what an ``NNTabularDataset`` holds, as a small table.

One row per split (train / val / test) with its row count and share of the rows, then
what the target looks like in that split: the class balance (counts and shares per
class, the smallest share, the classes a split lacks) for class labels, the target's
min / mean / max for a regression, the positive rate per label for a multilabel task.
Under it the features (and the standardizer's training statistics, if any), the split's
seed or manifest digest, and the admission checks the dataset ran.

The kernel computes every number here with NumPy from the dataset's own split tensors
(what training reads); the view only draws ``data``. The whole summary is one synced
trait, so a reloaded page draws it again.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import traitlets as t

from ..data import NNTabularDataset
from ..engine.task_spec import TaskSpec
from ..errors import ConfigError
from ._base import NNxWidget

__all__ = ["DatasetSummary", "summarize_dataset"]

_SLOTS = ("train", "val", "test")


def _num(value: float) -> float | None:
    """A JSON number, or None where there is none (NaN is not JSON)."""
    value = float(value)
    return value if math.isfinite(value) else None


def _split_targets(dataset: NNTabularDataset, slot: str, classes: bool) -> np.ndarray:
    """The targets of one split as training reads them (an empty split: no rows)."""
    loader = getattr(dataset, f"{slot}_loader")
    if loader is None:
        return np.zeros(0, dtype=np.int64 if classes else np.float64)
    y = loader.dataset.tensors[1].detach().cpu()
    # float16 / bfloat16 have no NumPy twin everywhere: widen in torch first
    return y.long().numpy() if classes else y.double().numpy()


def _check_args(dataset: Any, task: Any) -> str:
    """The kind of summary ("classification", "regression", "multilabel"), or a refusal."""
    if not isinstance(dataset, NNTabularDataset):
        raise ConfigError(
            "DatasetSummary.dataset",
            type(dataset).__name__,
            "pass an NNTabularDataset: DatasetSummary(NNTabularDataset(df, feature_cols, "
            "target_col, ...))",
        )
    if task is not None and not isinstance(task, TaskSpec):
        raise ConfigError(
            "DatasetSummary.task",
            type(task).__name__,
            "pass a TaskSpec (TaskSpec.multilabel(n) for 0/1 labels) or None",
        )
    classes = dataset.classes is not None
    kind = "classification" if classes else "regression"
    if task is None:
        return kind
    if task.kind == "categorical" and not classes:
        raise ConfigError(
            "DatasetSummary.task",
            task,
            "this dataset has a floating target (regression): build it with "
            "target_dtype=None for class labels, or pass TaskSpec.regression(1)",
        )
    if task.kind in ("regression", "multilabel") and classes:
        raise ConfigError(
            "DatasetSummary.task",
            task,
            f"this dataset's targets are class labels; a {task.kind} task needs a floating "
            "target: build it with target_dtype=torch.float32",
        )
    if task.kind != "multilabel":
        return kind
    ys = [_split_targets(dataset, slot, False) for slot in _SLOTS]
    width = 1 if ys[0].ndim == 1 else ys[0].shape[1]
    if task.n_outputs != width:
        raise ConfigError(
            "DatasetSummary.task",
            task,
            f"the dataset's target has {width} label column(s): pass TaskSpec.multilabel({width})",
        )
    values = np.concatenate([y.reshape(-1) for y in ys])
    bad = values[~np.isin(values, (0.0, 1.0))]
    if bad.size:
        raise ConfigError(
            "DatasetSummary.task",
            task,
            f"multilabel targets are 0 or 1, but {dataset.target_col!r} holds "
            f"{sorted(set(bad.tolist()))[:5]}: pass TaskSpec.regression(1), or 0/1 labels",
        )
    return "multilabel"


def _classification(y: np.ndarray, labels: list[str]) -> dict[str, Any]:
    k = len(labels)
    counts = np.bincount(y, minlength=k)[:k] if y.size else np.zeros(k, dtype=np.int64)
    n = int(y.size)
    shares = counts / n if n else np.zeros(k)
    out: dict[str, Any] = {
        "counts": [int(c) for c in counts],
        "shares": [_num(s) if n else None for s in shares],
        "missing": [labels[i] for i in range(k) if n and counts[i] == 0],
        "smallest": None,
    }
    if n:
        i = int(np.argmin(counts))
        out["smallest"] = {"class": labels[i], "share": float(shares[i])}
    return out


def _regression(y: np.ndarray) -> dict[str, Any]:
    if not y.size:
        return {"min": None, "mean": None, "max": None}
    return {"min": _num(y.min()), "mean": _num(y.mean()), "max": _num(y.max())}


def _multilabel(y: np.ndarray) -> dict[str, Any]:
    y2 = y.reshape(len(y), -1)
    positives = y2.sum(axis=0) if len(y2) else np.zeros(y2.shape[1])
    return {
        "positives": [int(p) for p in positives],
        "positive_rate": [_num(p / len(y2)) if len(y2) else None for p in positives],
    }


def summarize_dataset(dataset: Any, task: TaskSpec | None = None) -> dict[str, Any]:
    """The numbers ``DatasetSummary`` shows, as JSON-ready data (refusals first)."""
    kind = _check_args(dataset, task)
    classes = kind == "classification"
    total = sum(len(rows) for rows in dataset.rows.values())
    labels = [str(c) for c in dataset.classes] if classes else []
    targets = {slot: _split_targets(dataset, slot, classes) for slot in _SLOTS}
    width = 1 if targets["train"].ndim == 1 else targets["train"].shape[1]
    label_names = (
        [dataset.target_col] if width == 1 else [f"{dataset.target_col}[{i}]" for i in range(width)]
    )
    splits = []
    for slot, batch in zip(_SLOTS, dataset.batch_sizes, strict=True):
        y = targets[slot]
        n = len(dataset.rows[slot])
        row: dict[str, Any] = {
            "name": slot,
            "rows": n,
            "share": n / total if total else 0.0,
            "batch_size": int(batch) if n else None,
        }
        if kind == "classification":
            row.update(_classification(y, labels))
        elif kind == "regression":
            row.update(_regression(y))
        else:
            row.update(_multilabel(y))
        splits.append(row)
    std = dataset.standardizer
    split = dataset.split
    return {
        "name": dataset.name,
        "kind": kind,
        "target_col": str(dataset.target_col),
        "target_dtype": None if dataset.target_dtype is None else str(dataset.target_dtype),
        "feature_dtype": str(dataset.feature_dtype),
        "feature_cols": [str(c) for c in dataset.feature_cols],
        "input_dim": int(dataset.input_dim),
        "output_dim": int(dataset.output_dim),
        "classes": labels,
        "labels": label_names if kind == "multilabel" else [],
        "total": total,
        "seed": dataset.seed,
        "split": None if split is None else split.digest(),
        "excluded": 0 if split is None else len(split.excluded),
        "splits": splits,
        "standardizer": None
        if std is None
        else {
            "mean": [_num(v) for v in np.asarray(std.mean, dtype=np.float64)],
            "std": [_num(v) for v in np.asarray(std.std, dtype=np.float64)],
            "fitted_rows": len(dataset.rows["train"]),
        },
        "checks": [str(c) for c in dataset.checks],
    }


class DatasetSummary(NNxWidget):
    """An ``NNTabularDataset``'s splits, target balance or range, features and checks.

    ``DatasetSummary(dataset)`` shows one row per split with its row count and share;
    the class balance per split (a class a split lacks is flagged) for class labels, the
    target's min / mean / max for a regression; the features, the standardizer's
    training statistics, the seed or split digest, and the admission checks that ran.
    ``task=TaskSpec.multilabel(n)`` reads a 0/1 target as labels (positive rate per
    label). ``data`` holds the numbers; assigning ``dataset`` (or ``task``) recomputes.
    Anything but an ``NNTabularDataset`` is refused with a ``ConfigError`` before the
    widget exists.
    """

    _bundle_name = "dataset_summary"
    # What the page may set: nothing (the page only reads); the kernel owns every trait.
    _page_traits = NNxWidget._page_traits

    data = t.Dict(help="The summary (summarize_dataset(dataset, task)).").tag(sync=True)
    version = t.Int(0, help="Counts the summaries computed.").tag(sync=True)

    def __init__(self, dataset: Any, *, task: TaskSpec | None = None) -> None:
        data = summarize_dataset(dataset, task)  # refused before any widget exists
        super().__init__()
        self._dataset, self._task = dataset, task
        self.data = data
        self.version = 1

    @property
    def dataset(self) -> NNTabularDataset:
        return self._dataset

    @dataset.setter
    def dataset(self, value: NNTabularDataset) -> None:
        self._set(value, self._task)

    @property
    def task(self) -> TaskSpec | None:
        return self._task

    @task.setter
    def task(self, value: TaskSpec | None) -> None:
        self._set(self._dataset, value)

    def _set(self, dataset: Any, task: Any) -> None:
        data = summarize_dataset(dataset, task)  # a refusal keeps the last summary
        self._dataset, self._task = dataset, task
        with self.hold_sync():
            self.data = data
            self.version += 1
            self.error = ""

    def summary(self) -> str:
        d = self.data
        sizes = ", ".join(f"{s['name']}={s['rows']} ({s['share']:.0%})" for s in d["splits"])
        head = f"{d['name']}: {d['kind']}, {d['input_dim']} features; {sizes}"
        if d["kind"] == "classification":
            lacking = [
                f"{s['name']} lacks class {', '.join(s['missing'])}"
                for s in d["splits"]
                if s["missing"]
            ]
            small = min(
                (s for s in d["splits"] if s["smallest"]), key=lambda s: s["smallest"]["share"]
            )
            tail = (
                f"{len(d['classes'])} classes, smallest share "
                f"{small['smallest']['share']:.2f} ({small['smallest']['class']!s} in "
                f"{small['name']})"
            )
            if lacking:
                tail += "; " + "; ".join(lacking)
        elif d["kind"] == "regression":
            tr = d["splits"][0]
            tail = f"train target {tr['min']:.4g} .. {tr['max']:.4g} (mean {tr['mean']:.4g})"
        else:
            rates = d["splits"][0]["positive_rate"]
            tail = "train positive rate " + ", ".join(f"{r:.2f}" for r in rates)
        return f"{head}; {tail}; {len(d['checks'])} checks"
