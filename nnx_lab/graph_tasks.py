"""``nnx_lab.graph_tasks`` (§3.8, the graph extra): graph-level classification."""

from .graphs import IGNORE, GraphCollection, graph_classifier_spec

__all__ = ["IGNORE", "GraphCollection", "graph_classifier_spec"]
