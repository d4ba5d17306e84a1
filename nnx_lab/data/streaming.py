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

import torch

from ..errors import ConfigError, DataError, MetricMergeError
from ._stream_inputs import Declared, as_tensor, shape_batch
from .metrics import KINDS, FinalizeContext, MetricBatch, MetricSpec, statistic_for

__all__ = ["MetricsResult", "StreamingMetrics"]

_ALIASES = {"binary": "bernoulli", "multilabel": "bernoulli", "continuous": "regression"}
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
        kind: Any = None,
        *,
        class_axis: int | None = None,
        ignore_index: int | None = _IGNORE_INDEX,
        device: torch.device | str | None = None,
        semantics: Any = None,
    ) -> None:
        if semantics is not None:  # NNx's name for the kind
            if kind is not None and kind != semantics:
                raise ConfigError(
                    "StreamingMetrics.semantics",
                    semantics,
                    f"kind={kind!r} says otherwise; pass one of them (semantics is NNx's name)",
                )
            kind = semantics
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

    def _declared(self) -> Declared:
        needs: set[str] = set()
        for name, _ in self._stat_keys.values():
            needs |= statistic_for(name).needs
        return Declared(
            self.kind,
            self.specs,
            frozenset(needs),
            self.class_axis,
            self.ignore_index,
            self.n_classes,
        )

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
        y = as_tensor(targets, "targets", device)
        given = {
            name: as_tensor(v, name, device)
            for name, v in (
                ("logits", logits),
                ("probabilities", probabilities),
                ("decoded", decoded),
                ("values", values),
            )
            if v is not None
        }
        shaped = shape_batch(self._declared(), y, given)
        batch = shaped.batch
        self.n_classes = shaped.n_classes
        self.device = device
        self._add_counters(batch, given, shaped.bad_targets)
        for key in dict.fromkeys(self._stat_keys.values()):
            name, options = key
            stat = statistic_for(name)
            contribution = stat.compute(batch, dict(options))
            if stat.reduce == "sum":
                self._add_sums(key, contribution)
            else:
                parts = self._parts.setdefault(key, {k: [] for k in contribution})
                for k, v in contribution.items():
                    parts[k].append(v)

    def _add_sums(self, key: tuple[str, tuple], tensors: dict[str, torch.Tensor]) -> None:
        sums = self._sums.get(key)
        if sums is None:
            self._sums[key] = {k: v.clone() for k, v in tensors.items()}
        else:
            for k, v in tensors.items():
                sums[k] += v

    def _add_counts(
        self, valid: torch.Tensor, bad_targets: torch.Tensor, bad_inputs: torch.Tensor
    ) -> None:
        """Add rows scored, targets out of range and bad inputs (0-d, on the device)."""
        if self._valid is None:
            self._valid, self._bad_targets, self._bad_inputs = valid, bad_targets, bad_inputs
        else:
            self._valid = self._valid + valid
            self._bad_targets = self._bad_targets + bad_targets
            self._bad_inputs = self._bad_inputs + bad_inputs

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

    def _add_counters(
        self,
        batch: MetricBatch,
        given: dict[str, torch.Tensor],
        bad_targets: torch.Tensor | None,
    ) -> None:
        dtype = batch.dtype
        valid = batch.valid.sum(dtype=dtype)
        if bad_targets is None:
            bad_targets = torch.zeros((), dtype=dtype, device=valid.device)
        bad_inputs = torch.zeros((), dtype=dtype, device=valid.device)
        for name in ("logits", "probabilities", "values"):
            t = given.get(name)
            if t is not None and t.is_floating_point():
                bad = ~torch.isfinite(t)
                if name == "probabilities":
                    bad = bad | (t < 0) | (t > 1)
                bad_inputs = bad_inputs + bad.sum(dtype=dtype)
        self.rows += int(batch.targets.numel())
        self._add_counts(valid, bad_targets, bad_inputs)

    # -- merge --------------------------------------------------------------------------------
    def merge(self, other: StreamingMetrics) -> StreamingMetrics:
        """A new accumulation holding both; neither input changes. Refuses accumulations
        declared differently (metrics, kind, class axis, ignore_index, class count)."""
        if not isinstance(other, StreamingMetrics):
            raise ConfigError("merge", other, "pass another StreamingMetrics")
        mine, theirs = self.declaration(), other.declaration()
        if mine != theirs:
            diff = [k for k in mine if mine[k] != theirs[k]]
            raise MetricMergeError(
                "StreamingMetrics.merge",
                {k: (mine[k], theirs[k]) for k in diff},
                "merge only accumulations declared with the same metrics, kind, class_axis "
                "and ignore_index",
            )
        if None not in (self.n_classes, other.n_classes) and self.n_classes != other.n_classes:
            raise MetricMergeError(
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
            out._add_counts(*(t.to(dev) for t in (src._valid, src._bad_targets, src._bad_inputs)))
            for key, sums in src._sums.items():
                out._add_sums(key, {k: v.to(dev) for k, v in sums.items()})
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
