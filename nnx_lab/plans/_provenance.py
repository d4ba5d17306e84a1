"""Provenance (§2.15) is torch-free data on the floor below: ``nnx_lab/runs/_provenance.py``."""

from ..runs._provenance import *  # noqa: F403
from ..runs._provenance import __all__  # noqa: F401
