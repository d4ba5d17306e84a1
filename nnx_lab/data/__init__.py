"""Data-side definitions shared by the engine and the tools: the metric registry.

(The DESIGN's home for tabular datasets, tasks, split manifests and preprocessing too;
those arrive with their issues.)
"""

from .metrics import (
    DIRECTIONS,
    INPUTS,
    KINDS,
    MetricBatch,
    MetricDef,
    MetricSpec,
    Statistic,
    metric_info,
    metric_names,
    register_metric,
    register_statistic,
)
from .streaming import MetricsResult, StreamingMetrics

__all__ = [
    "DIRECTIONS",
    "INPUTS",
    "KINDS",
    "MetricBatch",
    "MetricDef",
    "MetricSpec",
    "MetricsResult",
    "Statistic",
    "StreamingMetrics",
    "metric_info",
    "metric_names",
    "register_metric",
    "register_statistic",
]
