"""``StreamingMetrics``: declared metrics over a stream of batches, shards or processes.

``update`` adds a batch's statistics on the device (no host sync: targets out of range
and non-finite inputs are counted there and reported by ``finalize``); ``merge``
combines two accumulations declared alike, in any order; ``finalize`` reads everything
back once. The training loop can drive one per epoch the same way (docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError, DataError
from .metrics import (
    KINDS,
    FinalizeContext,
    MetricBatch,
    MetricSpec,
    statistic_for,
)

__all__ = ["MetricsResult", "StreamingMetrics"]

_ALIASES = {"binary": "bernoulli", "multilabel": "bernoulli"}
_IGNORE_INDEX = -100  # torch's and the engine's default


@dataclass(frozen=True)
class MetricsResult:
    """``values``: metric key -> value (None where undefined: no valid target, a class
    never seen ...); ``rows``: target elements seen; ``valid``: those scored."""

    values: dict[str, float | None]
    rows: int
    valid: int
    kind: str

    def __getitem__(self, key: str) -> float | None:
        return self.values[key]


def _acc_dtype(device: torch.device) -> torch.dtype:
    return torch.float32 if device.type == "mps" else torch.float64  # MPS has no float64


def _as_tensor(value: Any, field: str, device: torch.device | None) -> torch.Tensor:
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    elif isinstance(value, list | tuple):
        value = torch.as_tensor(value)
    if not isinstance(value, torch.Tensor):
        raise DataError(
            field, f"a {type(value).__name__} is not a tensor", "pass a tensor or a NumPy array"
        )
    value = value.detach()
    return value if device is None else value.to(device, non_blocking=True)


class StreamingMetrics:
    """``StreamingMetrics([MetricSpec("nll"), MetricSpec("brier")], "categorical")``.

    ``kind`` is ``"categorical"``, ``"bernoulli"`` (``"binary"`` / ``"multilabel"``
    mean the same) or ``"regression"``, or a ``ProbabilitySpec`` (its kind and class
    axis). ``ignore_index`` (categorical) leaves those targets out of every metric; NaN
    targets are left out for bernoulli and regression. ``device`` is where the
    statistics live (default: the first batch's device).
    """

    def __init__(
        self,
        metrics: Sequence[MetricSpec | str],
        kind: Any,
        *,
        class_axis: int | None = None,
        ignore_index: int | None = _IGNORE_INDEX,
        device: torch.device | str | None = None,
    ) -> None:
        n_classes = None
        if hasattr(kind, "kind") and hasattr(kind, "class_axis"):  # a ProbabilitySpec
            spec = kind
            kind = spec.kind
            class_axis = spec.class_axis if class_axis is None else class_axis
            n_classes = None if spec.labels is None else len(spec.labels)
        kind = _ALIASES.get(kind, kind)
        if kind not in KINDS:
            raise ConfigError(
                "StreamingMetrics.kind",
                kind,
                "use 'categorical', 'bernoulli' or 'regression' (or a ProbabilitySpec)",
            )
        if isinstance(metrics, str | MetricSpec) or not isinstance(metrics, Sequence):
            raise ConfigError(
                "StreamingMetrics.metrics",
                metrics,
                "pass a list of MetricSpec, e.g. [MetricSpec('nll'), MetricSpec('brier')]",
            )
        specs = [m if isinstance(m, MetricSpec) else MetricSpec(m) for m in metrics]
        if not specs:
            raise ConfigError("StreamingMetrics.metrics", [], "declare at least one metric")
        keys = [s.key for s in specs]
        dupes = sorted({k for k in keys if keys.count(k) > 1})
        if dupes:
            raise ConfigError("StreamingMetrics.metrics", dupes, "declare each metric once")
        for s in specs:
            if kind not in s.info.kinds:
                raise ConfigError(
                    f"MetricSpec({s.name!r})",
                    kind,
                    f"{s.name} applies to {', '.join(s.info.kinds)} outputs; drop it or "
                    "declare the kind it measures",
                )
        if ignore_index is not None and (
            isinstance(ignore_index, bool) or not isinstance(ignore_index, int)
        ):
            raise ConfigError(
                "StreamingMetrics.ignore_index", ignore_index, "pass an integer or None"
            )
        if class_axis is None:
            class_axis = -1
        self.kind = kind
        self.specs: tuple[MetricSpec, ...] = tuple(specs)
        self.class_axis = int(class_axis)
        self.ignore_index = ignore_index if kind == "categorical" else None
        self.n_classes: int | None = n_classes
        self.device = None if device is None else torch.device(device)
        # one accumulator per (statistic, options): metrics that share one read it once
        self._stat_keys = {s.key: (s.info.statistic, s.options) for s in specs}
        self._sums: dict[tuple[str, tuple], dict[str, torch.Tensor]] = {}
        self._parts: dict[tuple[str, tuple], dict[str, list[torch.Tensor]]] = {}
        self.rows = 0
        self._valid: torch.Tensor | None = None
        self._bad_targets: torch.Tensor | None = None
        self._bad_inputs: torch.Tensor | None = None

    # -- declarations -------------------------------------------------------------------------
    def declaration(self) -> dict[str, Any]:
        """What two accumulations must share to merge."""
        return {
            "kind": self.kind,
            "metrics": [s.state() for s in self.specs],
            "class_axis": self.class_axis,
            "ignore_index": self.ignore_index,
        }

    def _needs(self) -> set[str]:
        needs: set[str] = set()
        for name, _ in self._stat_keys.values():
            needs |= statistic_for(name).needs
        return needs

    # -- update -------------------------------------------------------------------------------
    def update(
        self,
        targets: Any,
        *,
        logits: Any = None,
        probabilities: Any = None,
        decoded: Any = None,
        values: Any = None,
        prediction: Any = None,
    ) -> None:
        """Add one batch. Pass what you have: ``logits`` (preferred: exact NLL and
        AUROC for saturated outputs), ``probabilities``, ``decoded`` labels, regression
        ``values``, or a ``prediction`` (a ``PredictionResult`` or
        ``CalibratedPrediction``). ``targets`` align with the rows."""
        if prediction is not None:
            logits, decoded, values = self._from_prediction(prediction, logits, decoded, values)
        device = self.device
        if device is None:
            first = next(
                (
                    x
                    for x in (logits, probabilities, decoded, values, targets)
                    if isinstance(x, torch.Tensor)
                ),
                None,
            )
            device = first.device if first is not None else torch.device("cpu")
        y = _as_tensor(targets, "targets", device)
        given = {
            name: _as_tensor(v, name, device)
            for name, v in (
                ("logits", logits),
                ("probabilities", probabilities),
                ("decoded", decoded),
                ("values", values),
            )
            if v is not None
        }
        batch = self._batch(y, given)
        self.device = device
        self._add_counters(batch, given)
        for key in dict.fromkeys(self._stat_keys.values()):
            name, options = key
            stat = statistic_for(name)
            contribution = stat.compute(batch, dict(options))
            if stat.reduce == "sum":
                sums = self._sums.get(key)
                if sums is None:
                    self._sums[key] = {k: v.clone() for k, v in contribution.items()}
                else:
                    for k, v in contribution.items():
                        sums[k] += v
            else:
                parts = self._parts.setdefault(key, {k: [] for k in contribution})
                for k, v in contribution.items():
                    parts[k].append(v)

    def _from_prediction(self, prediction: Any, logits: Any, decoded: Any, values: Any):
        if logits is not None or decoded is not None or values is not None:
            raise ConfigError(
                "StreamingMetrics.update",
                "prediction= with logits=/decoded=/values=",
                "pass either a prediction or its tensors, not both",
            )
        spec = getattr(prediction, "spec", None)
        if spec is None:
            if self.kind != "regression":
                raise ConfigError(
                    "StreamingMetrics.update(prediction=...)",
                    "a regression prediction",
                    f"these metrics measure {self.kind} outputs",
                )
            return None, None, prediction.decoded
        if spec.kind != self.kind:
            raise ConfigError(
                "StreamingMetrics.update(prediction=...)",
                f"a {spec.kind!r} prediction",
                f"these metrics were declared for {self.kind!r} outputs",
            )
        calibrated = getattr(prediction, "calibrated_logits", None)
        chosen = calibrated if calibrated is not None else prediction.logits
        return chosen, prediction.decoded, None

    def _rows_of(self, t: torch.Tensor, name: str) -> torch.Tensor:
        """Move the class axis last and flatten to ``(M, K)``."""
        ndim = t.ndim
        axis = self.class_axis + ndim if self.class_axis < 0 else self.class_axis
        if ndim < 2 or not 0 < axis < ndim:
            raise DataError(
                name,
                f"has shape {tuple(t.shape)}, with no class axis {self.class_axis}",
                "pass (rows, classes) outputs, or set class_axis",
            )
        return torch.movedim(t, axis, -1).reshape(-1, t.shape[axis])

    def _batch(self, y: torch.Tensor, given: dict[str, torch.Tensor]) -> MetricBatch:
        needs = self._needs()
        kind = self.kind
        dtype = _acc_dtype(y.device)
        if kind == "regression":
            v = given.get("values", given.get("logits"))
            if v is None:
                raise DataError(
                    "StreamingMetrics.update",
                    "no values= (or logits=) for regression metrics",
                    "pass the model's continuous outputs as values=",
                )
            width = v.shape[-1] if v.ndim > 1 else 1
            if y.numel() != v.numel():
                raise DataError(
                    "targets",
                    f"have {y.numel()} elements for values of shape {tuple(v.shape)}",
                    "pass one target per predicted value",
                )
            if self.n_classes is not None and width != self.n_classes:
                raise DataError(
                    "values",
                    f"a batch with {width} outputs after batches with {self.n_classes}",
                    "keep the outputs the same width in every batch",
                )
            self.n_classes = width
            v = v.reshape(-1, width)
            yf = y.reshape(-1, width).to(dtype)
            valid = torch.isfinite(yf)
            return MetricBatch(
                kind,
                torch.where(valid, yf, torch.zeros_like(yf)),
                valid,
                width,
                values=v,
                dtype=dtype,
            )
        scored = given.get("logits", given.get("probabilities"))
        if needs - {"labels"} and scored is None:
            wanting = [s.name for s in self.specs if s.info.input == "probabilities"]
            raise DataError(
                "StreamingMetrics.update",
                f"{', '.join(wanting)} need probabilities, and neither logits= nor "
                "probabilities= was passed",
                "pass logits= (preferred) or probabilities=",
            )
        if scored is None and "decoded" not in given:
            raise DataError(
                "StreamingMetrics.update",
                "no predictions were passed",
                "pass logits=, probabilities= or decoded=",
            )
        flat: dict[str, torch.Tensor] = {}
        for name in ("logits", "probabilities"):
            if name in given:
                if not given[name].is_floating_point():
                    raise DataError(name, f"has dtype {given[name].dtype}", "pass float outputs")
                flat[name] = self._rows_of(given[name], name)
        k = next(iter(flat.values())).shape[1] if flat else None
        if "decoded" in given:
            d = given["decoded"]
            if kind == "categorical":
                flat["decoded"] = d.reshape(-1)
            else:
                flat["decoded"] = self._rows_of(d, "decoded") if d.ndim > 1 else d.reshape(-1, 1)
                k = flat["decoded"].shape[1] if k is None else k
        if k is None:
            k = self.n_classes
            if k is None:
                raise DataError(
                    "StreamingMetrics.update",
                    "decoded labels alone do not say how many classes there are",
                    "pass logits= or probabilities= too, or build the metrics from a "
                    "ProbabilitySpec with labels",
                )
        if self.n_classes is not None and k != self.n_classes:
            raise DataError(
                "StreamingMetrics.update",
                f"a batch with {k} classes after batches (or labels) with {self.n_classes}",
                "keep the class axis the same size in every batch",
            )
        rows = next(iter(flat.values())).shape[0]
        for name, t in flat.items():
            if t.shape[0] != rows:
                raise DataError(name, f"has {t.shape[0]} rows, not {rows}", "align the inputs")
        if kind == "categorical":
            if y.is_floating_point() or y.dtype == torch.bool:
                raise DataError(
                    "targets", f"have dtype {y.dtype}", "pass integer class indices (torch.long)"
                )
            if y.numel() != rows:
                raise DataError(
                    "targets",
                    f"have {y.numel()} elements for {rows} predicted rows",
                    "pass one class index per row (the outputs' shape without the class axis)",
                )
            yl = y.reshape(-1).long()
            valid = yl != (self.ignore_index if self.ignore_index is not None else -(2**62))
            in_range = (yl >= 0) & (yl < k)
            bad = valid & ~in_range
            valid = valid & in_range
            targets = torch.where(valid, yl, torch.zeros_like(yl))
        else:
            if y.numel() != rows * k:
                raise DataError(
                    "targets",
                    f"have {y.numel()} elements for {rows} rows of {k} outputs",
                    "pass one 0/1 target per output",
                )
            yf = self._rows_of(y, "targets") if y.ndim > 1 and y.shape != (rows, k) else y
            yf = yf.reshape(rows, k).to(dtype)
            valid = torch.isfinite(yf)
            bad = valid & (yf != 0) & (yf != 1)
            valid = valid & ~bad
            targets = torch.where(valid, yf, torch.zeros_like(yf))
        self.n_classes = k
        batch = MetricBatch(
            kind,
            targets,
            valid,
            k,
            logits=flat.get("logits"),
            probabilities=flat.get("probabilities"),
            decoded=flat.get("decoded"),
            dtype=dtype,
        )
        batch.bad_targets = bad.sum(dtype=dtype)  # type: ignore[attr-defined]
        return batch

    def _add_counters(self, batch: MetricBatch, given: dict[str, torch.Tensor]) -> None:
        dtype = batch.dtype
        valid = batch.valid.sum(dtype=dtype)
        bad_targets = getattr(
            batch, "bad_targets", torch.zeros((), dtype=dtype, device=valid.device)
        )
        bad_inputs = torch.zeros((), dtype=dtype, device=valid.device)
        for name in ("logits", "probabilities", "values"):
            t = given.get(name)
            if t is not None and t.is_floating_point():
                bad = ~torch.isfinite(t)
                if name == "probabilities":
                    bad = bad | (t < 0) | (t > 1)
                bad_inputs = bad_inputs + bad.sum(dtype=dtype)
        self.rows += int(batch.targets.numel())
        if self._valid is None:
            self._valid, self._bad_targets, self._bad_inputs = valid, bad_targets, bad_inputs
        else:
            self._valid = self._valid + valid
            self._bad_targets = self._bad_targets + bad_targets
            self._bad_inputs = self._bad_inputs + bad_inputs

    # -- merge --------------------------------------------------------------------------------
    def merge(self, other: StreamingMetrics) -> StreamingMetrics:
        """A new accumulation holding both; neither input changes. Refuses accumulations
        declared differently (metrics, kind, class axis, ignore_index, class count)."""
        if not isinstance(other, StreamingMetrics):
            raise ConfigError("merge", other, "pass another StreamingMetrics")
        mine, theirs = self.declaration(), other.declaration()
        if mine != theirs:
            diff = [k for k in mine if mine[k] != theirs[k]]
            raise ConfigError(
                "StreamingMetrics.merge",
                {k: (mine[k], theirs[k]) for k in diff},
                "merge only accumulations declared with the same metrics, kind, class_axis "
                "and ignore_index",
            )
        if None not in (self.n_classes, other.n_classes) and self.n_classes != other.n_classes:
            raise ConfigError(
                "StreamingMetrics.merge",
                {"n_classes": (self.n_classes, other.n_classes)},
                "merge only accumulations over the same classes",
            )
        out = StreamingMetrics(
            list(self.specs),
            self.kind,
            class_axis=self.class_axis,
            ignore_index=self.ignore_index,
            device=self.device or other.device,
        )
        out.n_classes = self.n_classes if self.n_classes is not None else other.n_classes
        out.rows = self.rows + other.rows
        dev = out.device
        for src in (self, other):
            if src._valid is None:
                continue
            counters = [t.to(dev) for t in (src._valid, src._bad_targets, src._bad_inputs)]
            if out._valid is None:
                out._valid, out._bad_targets, out._bad_inputs = counters
            else:
                out._valid = out._valid + counters[0]
                out._bad_targets = out._bad_targets + counters[1]
                out._bad_inputs = out._bad_inputs + counters[2]
            for key, sums in src._sums.items():
                target = out._sums.get(key)
                if target is None:
                    out._sums[key] = {k: v.to(dev).clone() for k, v in sums.items()}
                else:
                    for k, v in sums.items():
                        target[k] += v.to(dev)
            for key, parts in src._parts.items():
                target_parts = out._parts.setdefault(key, {k: [] for k in parts})
                for k, v in parts.items():
                    target_parts[k].extend(t.to(dev) for t in v)
        return out

    # -- read-back ----------------------------------------------------------------------------
    def statistic(self, name: str, **options: Any) -> dict[str, torch.Tensor] | None:
        """The accumulated tensors of one statistic (None before any batch): how a tool
        reads per-bin reliability sums without a second pass."""
        key = (name, tuple(sorted(options.items())))
        if key in self._sums:
            return dict(self._sums[key])
        if key in self._parts:
            return {k: torch.cat(v) for k, v in self._parts[key].items()}
        return None

    def finalize(self) -> MetricsResult:
        """Every declared metric, computed on the device and read back in one transfer."""
        if self._valid is None:
            return MetricsResult({s.key: None for s in self.specs}, 0, 0, self.kind)
        assert self.n_classes is not None
        finals = []
        for spec in self.specs:
            name, options = self._stat_keys[spec.key]
            tensors = self.statistic(name, **dict(options))
            assert tensors is not None
            ctx = FinalizeContext(self.kind, self.n_classes, dict(options))
            finals.append(spec.info.finalize(tensors, ctx).to(self._valid.dtype).reshape(()))
        host = torch.stack(
            [*finals, self._valid, self._bad_targets, self._bad_inputs]  # type: ignore[list-item]
        ).tolist()
        *values, valid, bad_targets, bad_inputs = host
        if bad_targets:
            expect = (
                f"class indices in [0, {self.n_classes})"
                + (f" or ignore_index={self.ignore_index}" if self.ignore_index is not None else "")
                if self.kind == "categorical"
                else "0 or 1 (NaN is left out)"
            )
            raise DataError(
                "targets",
                f"{int(bad_targets)} targets were not {expect}",
                "fix the targets; metrics over them would be wrong",
            )
        if bad_inputs:
            raise DataError(
                "StreamingMetrics.update",
                f"{int(bad_inputs)} predicted values were NaN/inf (or probabilities outside "
                "[0, 1])",
                "find what overflowed in the model or its inputs",
            )
        return MetricsResult(
            {
                s.key: None if v != v else float(v)  # NaN: undefined
                for s, v in zip(self.specs, values, strict=True)
            },
            self.rows,
            int(valid),
            self.kind,
        )

    def __repr__(self) -> str:
        names = ", ".join(s.key for s in self.specs)
        return f"StreamingMetrics([{names}], {self.kind!r}, rows={self.rows})"
