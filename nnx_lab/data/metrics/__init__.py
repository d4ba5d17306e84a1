"""The metric registry: named metrics that declare their input and direction, accumulated
on the device as additive statistics and finalized once.

A metric is two parts. Its **statistic** turns one batch into tensors that add up across
batches, shards and processes (counts and sums: a confusion matrix, a summed NLL and
its count, per-bin sums), or, for the exact AUROC, tensors that concatenate. Its
**finalize** turns the accumulated tensors into one number, on the device. Metrics that
read the same statistic share it: accuracy, error, precision, recall and the F1 variants
all read one confusion matrix. See docs/metrics.md for the contract.

Inputs a metric declares:

- ``"labels"``: decoded predictions (argmax classes, or 0/1 indicators at logit >= 0);
- ``"probabilities"``: the predicted distribution (from logits where given, in float64,
  so a saturated probability does not become log(0));
- ``"values"``: continuous outputs (regression);
- ``"reported"``: a value a custom evaluator reports in ``EDP.metrics`` by itself (a
  ranking task's NDCG over whole queries): declared, monitored, never computed from
  outputs (``register_reported_metric``).

NNx's ``register_metric(id, version, factory, *, input, mode)`` (an accumulator
protocol) is read too, adapted onto these parts in ``_accumulators``.
"""

# the engine's scoring and the calibration report also read FinalizeContext,
# statistic_for, reliability_edges and auroc_per_column from here (not in __all__)
from ._accumulators import (
    METRIC_INPUTS,
    MetricAccumulator,
    mark_built_in,
    register_metric,
    registered_metrics,
    unregister_metric,
)
from ._batch import MetricBatch
from ._definitions import METRICS
from ._definitions import auroc_per_column as auroc_per_column
from ._registry import (
    DIRECTIONS,
    INPUTS,
    KINDS,
    MetricDef,
    MetricSpec,
    Statistic,
    metric_info,
    metric_names,
    register_reported_metric,
    register_statistic,
)
from ._registry import FinalizeContext as FinalizeContext
from ._registry import register_metric as _register_def
from ._registry import statistic_for as statistic_for
from ._statistics import STATISTICS
from ._statistics import reliability_edges as reliability_edges

__all__ = [
    "DIRECTIONS",
    "INPUTS",
    "KINDS",
    "METRIC_INPUTS",
    "MetricAccumulator",
    "MetricBatch",
    "MetricDef",
    "MetricSpec",
    "Statistic",
    "metric_info",
    "metric_names",
    "register_metric",
    "register_reported_metric",
    "register_statistic",
    "registered_metrics",
    "unregister_metric",
]

# the built-ins enter the registry here, statistics first: a metric names its statistic
for _statistic in STATISTICS:
    register_statistic(_statistic)
for _metric in METRICS:
    _register_def(_metric)
mark_built_in()
