"""Data: tabular datasets, split manifests and train-only preprocessing.

``nnx_lab.data_splits`` and ``nnx_lab.preprocessing`` are the NNx module names for the
split manifests and the standardizer; ``NNTabularDataset`` is exported from ``nnx_lab``.
"""

from ._splits import SplitError, SplitManifest, plan_split
from ._standardizer import Standardizer, StandardizerError
from ._tabular import NNTabularDataset, resolve_batch_sizes

__all__ = [
    "NNTabularDataset",
    "SplitError",
    "SplitManifest",
    "Standardizer",
    "StandardizerError",
    "plan_split",
    "resolve_batch_sizes",
]
