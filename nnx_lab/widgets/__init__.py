"""nnx-lab's JupyterLab widgets (anywidget): the live TrainingMonitor, the PlanBuilder
form, the DriftReport table, the LRFinderWidget sweep, the CalibrationExplorer and
AbstentionExplorer, the DatasetSummary and ModelSummary tables, the Interpretation of a
model's mistakes, the GenerationPlayground of a language model, and ``open_in_panel``
(a run in the JupyterLab runs panel).

The front end is built from ``js/`` into ``nnx_lab/static/`` by ``npm run build``
(``pip install -e .`` runs it). The wire protocol is in ``_protocol.py``. The
explorers measure with torch and DatasetSummary reads an ``NNTabularDataset``; they
load on first use, so importing this package (and the monitor) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._bundle import BundleMissingError
from ._drift import DriftReport
from ._lr_finder import LRFinderWidget
from ._monitor import TrainingMonitor
from ._panel import open_in_panel
from ._plan_builder import PlanBuilder

__all__ = [
    "AbstentionExplorer",
    "BundleMissingError",
    "CalibrationExplorer",
    "DatasetSummary",
    "DriftReport",
    "GenerationPlayground",
    "Interpretation",
    "LRFinderWidget",
    "ModelSummary",
    "PlanBuilder",
    "Sweep",
    "TrainingMonitor",
    "open_in_panel",
]

_LAZY = {
    "CalibrationExplorer": "._calibration",
    "AbstentionExplorer": "._abstention",
    "DatasetSummary": "._dataset_summary",
    "ModelSummary": "._model_summary",
    "Interpretation": "._interpretation",
    "GenerationPlayground": "._playground",
    "Sweep": "._sweep",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nnx_lab.widgets' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
