"""Records of plans and runs as the plans layer builds them.

The record type, reading a run's record and comparing two records are torch-free data
code on the floor below (``nnx_lab/runs/_drift_record.py``, ``_compare.py``); a model's
record is the engine's (``nnx_lab/engine/drift.py``). What stays here is looking code up
today with the plans' importing lookup.
"""

from __future__ import annotations

from typing import Any

from ..engine.drift import code_now as _engine_code_now
from ..engine.drift import model_record
from ..runs import (
    BINDING_FILE,
    ENVIRONMENT_KEYS,
    PLAN_FILE,
    Record,
    display_code,
    environment_now,
    flatten,
    locate_run,
    read_plan_file,
    run_record,
)
from ._refs import lookup

__all__ = [
    "BINDING_FILE",
    "ENVIRONMENT_KEYS",
    "PLAN_FILE",
    "Record",
    "code_now",
    "display_code",
    "environment_now",
    "flatten",
    "locate_run",
    "model_record",
    "read_plan_file",
    "run_record",
]


def code_now(record: dict[str, Any], held: Any = None, *, allow_import: bool) -> dict[str, Any]:
    """``engine.drift.code_now``, importing a record's module first when ``allow_import``."""
    if not allow_import:
        return _engine_code_now(record, held)
    return _engine_code_now(record, held, find=lambda m, q: lookup(m, q, allow_import=True))
