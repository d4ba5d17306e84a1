"""nnx-lab's JupyterLab widgets (anywidget): the live TrainingMonitor, and
``open_in_panel`` (a run in the JupyterLab runs panel).

The front end is built from ``js/`` into ``nnx_lab/static/`` by ``npm run build``
(``pip install -e .`` runs it). The wire protocol is in ``_protocol.py``.
"""

from ._bundle import BundleMissingError
from ._monitor import TrainingMonitor
from ._panel import open_in_panel

__all__ = ["BundleMissingError", "TrainingMonitor", "open_in_panel"]
