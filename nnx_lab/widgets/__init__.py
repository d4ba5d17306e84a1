"""nnx-lab's JupyterLab widgets (anywidget): the live TrainingMonitor, the PlanBuilder
form, the DriftReport table and the LRFinderWidget sweep.

The front end is built from ``js/`` into ``nnx_lab/static/`` by ``npm run build``
(``pip install -e .`` runs it). The wire protocol is in ``_protocol.py``.
"""

from ._bundle import BundleMissingError
from ._drift import DriftReport
from ._lr_finder import LRFinderWidget
from ._monitor import TrainingMonitor
from ._plan_builder import PlanBuilder

__all__ = ["BundleMissingError", "DriftReport", "LRFinderWidget", "PlanBuilder", "TrainingMonitor"]
