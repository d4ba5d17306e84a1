"""Graphs (§2.12, §3.8, §3.9), behind the optional graph extra (``pip install
"nnx-lab[graph]"``, torch-geometric): issue 26.

Every name imports without the extra; building anything that needs torch-geometric
(``NNGraphDataset``, ``GraphCollection``, the specs, ``LinkTask``) raises ImportError
with the install command. ``split_links`` and ``link_metrics`` are plain torch / NumPy.
"""

from .batch import GraphBatch, GraphLoader
from .classifier import GraphClassifierNN, graph_classifier_spec
from .collection import IGNORE, GraphCollection
from .dataset import NNGraphDataset
from .link_metrics import link_metrics
from .link_split import LinkSplit, split_links
from .link_task import LinkPrediction, LinkTask, link_predictor_spec

__all__ = [
    "IGNORE",
    "GraphBatch",
    "GraphClassifierNN",
    "GraphCollection",
    "GraphLoader",
    "LinkPrediction",
    "LinkSplit",
    "LinkTask",
    "NNGraphDataset",
    "graph_classifier_spec",
    "link_metrics",
    "link_predictor_spec",
    "split_links",
]
