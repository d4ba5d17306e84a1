"""``nnx_lab.precision``: precision policies (§2.2), re-exported from the engine."""

from .engine.errors import PrecisionUnsupportedError
from .engine.precision import (
    MODES,
    REFERENCE_TOLERANCES,
    PrecisionPolicy,
    ResolvedPrecision,
    precision_support,
    resolve_precision,
)

__all__ = [
    "MODES",
    "REFERENCE_TOLERANCES",
    "PrecisionPolicy",
    "PrecisionUnsupportedError",
    "ResolvedPrecision",
    "precision_support",
    "resolve_precision",
]
