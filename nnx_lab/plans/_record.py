"""Records of plans and runs as the plans layer builds them.

The record type, reading a run's record and comparing two records are torch-free data
code on the floor below (``nnx_lab/runs/_drift_record.py``, ``_compare.py``); a model's
record is the engine's (``nnx_lab/engine/drift.py``), and so is looking code up today:
among the modules this process has loaded, never importing what a record names (a record
read from a run folder is someone else's data).
"""

from __future__ import annotations

from ..engine.drift import code_now, model_record
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
