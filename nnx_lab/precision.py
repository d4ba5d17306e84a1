"""``nnx_lab.precision``: precision policies (§2.2), re-exported from the engine."""

from .engine.custom_step import full_precision_only
from .engine.precision import (
    MODES,
    REFERENCE_TOLERANCES,
    PrecisionPolicy,
    ResolvedPrecision,
    precision_support,
    resolve_precision,
)
from .errors import PrecisionUnsupportedError

__all__ = [
    "MODES",
    "REFERENCE_TOLERANCES",
    "PrecisionPolicy",
    "PrecisionUnsupportedError",
    "ResolvedPrecision",
    "full_precision_only",
    "precision_support",
    "resolve_precision",
]
