"""The canonical JSON that run ids and checksums are computed over."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["FORMAT_VERSION", "canonical_json", "run_id_for"]

# Version of the run directory layout; recorded in run.yaml and in every sidecar.
FORMAT_VERSION = 1


def canonical_json(data: Any) -> str:
    """Sorted keys, no spaces, NaN/Infinity allowed: one text per value, for hashing."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True)


def run_id_for(config: dict[str, Any]) -> str:
    """The run id: MD5 of the canonical JSON of the run's configuration (``run.yaml``)."""
    return hashlib.md5(canonical_json(config).encode(), usedforsecurity=False).hexdigest()
