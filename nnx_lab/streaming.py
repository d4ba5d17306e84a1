"""``nnx_lab.streaming`` (§2.21): NNx's module of the streaming pieces, re-exported
(``StreamingMetrics`` lives in ``nnx_lab.data.streaming``, the step in the engine)."""

from .data.streaming import MetricSnapshot, StreamingMetrics
from .engine.prediction_stream import PredictionStream
from .engine.streaming_eval import streaming_eval_step
from .errors import MetricMergeError, StreamClosedError

__all__ = [
    "MetricMergeError",
    "MetricSnapshot",
    "PredictionStream",
    "StreamClosedError",
    "StreamingMetrics",
    "streaming_eval_step",
]
