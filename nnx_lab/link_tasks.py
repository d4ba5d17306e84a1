"""``nnx_lab.link_tasks`` (§3.9, the graph extra): link and edge prediction."""

from .graphs import (
    LinkPrediction,
    LinkSplit,
    LinkTask,
    link_metrics,
    link_predictor_spec,
    split_links,
)

__all__ = [
    "LinkPrediction",
    "LinkSplit",
    "LinkTask",
    "link_metrics",
    "link_predictor_spec",
    "split_links",
]
