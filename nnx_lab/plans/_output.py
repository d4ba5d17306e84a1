"""The switch for what a fit prints lives on the floor below (``nnx_lab/runs/_output.py``)
so the engine's drift banner and the plans' binding report share it."""

from ..runs._output import config_report_enabled, emit, set_config_report

__all__ = ["config_report_enabled", "emit", "set_config_report"]
