"""Data: tabular datasets, torchvision-style image datasets (``NNDataset``), split
manifests, train-only preprocessing, and the one metric registry (``MetricSpec``,
``StreamingMetrics``) shared by the engine and the tools.

``nnx_lab.data_splits`` and ``nnx_lab.preprocessing`` are the NNx module names for the
split manifests and the standardizer; ``NNTabularDataset`` is exported from ``nnx_lab``.
"""

from ._images import NNDataset
from ._splits import SPLITS, STRATEGIES, SplitError, SplitManifest, plan_split
from ._standardizer import Standardizer, StandardizerError
from ._tabular import NNTabularDataset, resolve_batch_sizes
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
    "SPLITS",
    "STRATEGIES",
    "MetricBatch",
    "MetricDef",
    "MetricSpec",
    "MetricsResult",
    "NNDataset",
    "NNTabularDataset",
    "SplitError",
    "SplitManifest",
    "Standardizer",
    "StandardizerError",
    "Statistic",
    "StreamingMetrics",
    "metric_info",
    "metric_names",
    "plan_split",
    "register_metric",
    "register_statistic",
    "resolve_batch_sizes",
]
