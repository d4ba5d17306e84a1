"""nnx-lab's JupyterLab widgets (anywidget): the live TrainingMonitor.

The front end is built from ``js/`` into ``nnx_lab/static/`` by ``npm run build``
(``pip install -e .`` runs it). The wire protocol is in ``_protocol.py``.
"""

from ._bundle import BundleMissingError
from ._monitor import TrainingMonitor

__all__ = ["BundleMissingError", "TrainingMonitor"]
