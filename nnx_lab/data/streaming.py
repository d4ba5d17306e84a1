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
from ._stream_inputs import Declared, as_tensor, shape_batch, valid_mask
from .metrics import KINDS, FinalizeContext, MetricBatch, MetricSpec, statistic_for

__all__ = ["BatchCount", "MetricSnapshot", "MetricsResult", "StreamingMetrics"]

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

    @property
    def count(self) -> int:
        """NNx's name for ``valid``: the target entries scored."""
        return self.valid

    @property
    def unavailable(self) -> tuple[str, ...]:
        """The declared metrics with no value (NNx's field; here they are None in
        ``values``)."""
        return tuple(k for k, v in self.values.items() if v is None)


MetricSnapshot = MetricsResult  # NNx's name for what finalize() returns


class BatchCount:
    """What ``update`` returns: the entries a batch scored, an integer read from the
    device when first used (``int(c)``, ``c == 3``, ``c + 1``, an index)."""

    __slots__ = ("_tensor", "_value")

    def __init__(self, tensor: torch.Tensor) -> None:
        self._tensor, self._value = tensor, None

    def __int__(self) -> int:
        if self._value is None:
            self._value = int(self._tensor)
        return self._value

    __index__ = __int__

    def __eq__(self, other: object) -> bool:
        return int(self) == other

    def __hash__(self) -> int:
        return hash(int(self))

    def __lt__(self, other: Any) -> bool:
        return int(self) < other

    def __add__(self, other: Any) -> Any:
        return int(self) + other

    __radd__ = __add__

    def __repr__(self) -> str:
        return repr(int(self))


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
            if s.info.reported:
                raise ConfigError(
                    f"MetricSpec({s.name!r})",
                    s.key,
                    f"{s.name} is reported by a custom evaluator (an eval_step_fn), not "
                    "computed from outputs; drop it here",
                )
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

    @classmethod
    def for_task(
        cls, metrics: Sequence[MetricSpec | str], task: Any, *, materialize: bool = False
    ) -> StreamingMetrics:
        """NNx's form: accumulators for a model's ``TaskSpec`` (its kind, its
        ``ignore_index`` and its class count). ``materialize`` is accepted for NNx's
        signature: nnx-lab's metrics that keep every score (AUROC) always do."""
        kind = getattr(task, "metric_kind", None)
        if not isinstance(kind, str):
            raise ConfigError(
                "StreamingMetrics.for_task", task, "pass a TaskSpec, e.g. model.params.task"
            )
        if not isinstance(materialize, bool):
            raise ConfigError("StreamingMetrics.materialize", materialize, "pass True or False")
        out = cls(metrics, kind, ignore_index=task.ignore_index)
        if kind != "regression" and task.n_outputs is not None:
            out.n_classes = int(task.n_outputs)
        return out

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
        target: Any,
        *,
        logits: Any = None,
        probabilities: Any = None,
        labels: Any = None,
        decoded: Any = None,
        values: Any = None,
        prediction: Any = None,
        valid: Any = None,
    ) -> int:
        """Add one batch; returns the number of target entries it scored (NNx's count:
        a ``BatchCount``, read from the device only when it is used, so an update whose
        count is ignored never waits for the device).

        Pass what you have: ``logits`` (preferred: exact NLL and AUROC for saturated
        outputs), ``probabilities``, decoded ``labels`` (``decoded`` is nnx-lab's name),
        regression ``values``, or a ``prediction`` (a ``PredictionResult`` or
        ``CalibratedPrediction``). ``target`` aligns with the rows; ``valid`` (boolean,
        shaped like it) leaves entries out, as ``ignore_index`` and NaN targets are."""
        if labels is not None:
            if decoded is not None:
                raise ConfigError(
                    "StreamingMetrics.update",
                    "labels= with decoded=",
                    "pass the decoded predictions once (labels is NNx's name for decoded)",
                )
            decoded = labels
        batch = self._update(target, logits, probabilities, decoded, values, prediction, valid)
        return BatchCount(batch.valid.sum())  # type: ignore[return-value]

    def update_logits(self, target: Any, logits: Any, *, valid: Any = None) -> int:
        """NNx's form for raw model outputs (class axis as declared): ``update(target,
        logits=logits, valid=valid)``."""
        return self.update(target, logits=logits, valid=valid)

    def _update(
        self,
        targets: Any,
        logits: Any = None,
        probabilities: Any = None,
        decoded: Any = None,
        values: Any = None,
        prediction: Any = None,
        valid: Any = None,
    ) -> MetricBatch:
        """Add one batch without reading anything back (what the engine calls)."""
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
        if valid is not None:
            keep = valid_mask(valid, y, device).reshape(batch.valid.shape)
            batch.valid = batch.valid & keep
            batch.targets = torch.where(keep, batch.targets, torch.zeros_like(batch.targets))
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
        return batch

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
