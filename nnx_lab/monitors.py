"""``nnx_lab.monitors``: NNx's module of declared metrics and monitors, re-exported
(the registry lives in ``nnx_lab.data.metrics``, the monitor in the engine)."""

from .data.metrics import (
    METRIC_INPUTS,
    MetricAccumulator,
    MetricSpec,
    register_metric,
    registered_metrics,
    unregister_metric,
)
from .engine.selection import MonitorRecord, MonitorSpec
from .errors import MonitorUnavailableError

__all__ = [
    "METRIC_INPUTS",
    "MetricAccumulator",
    "MetricSpec",
    "MonitorRecord",
    "MonitorSpec",
    "MonitorUnavailableError",
    "register_metric",
    "registered_metrics",
    "unregister_metric",
]
