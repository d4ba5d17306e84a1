"""The config-drift report: what was fixed, what differs now, and what to do about it.

``drift_report(a)`` compares what a plan, a model or a run fixed with the present:
a plan keeps the objects it was given, so a function redefined since (a loss, a data
factory, a callback class) is not what it will run; a model keeps the network it was
built with; a finished run is compared with today's code and library versions.
``drift_report(a, b)`` compares two sides (plans, models, runs by id). The rows and
their comparison are the torch-free core in ``nnx_lab/runs/_compare.py``; this module
finds the two records to compare.
"""

from __future__ import annotations

import os
from typing import Any

from ..runs import ABSENT, ACTIONS, DriftReport, DriftRow, compare_records, emit
from ._record import Record, code_now, environment_now, model_record, run_record

__all__ = [
    "ABSENT",
    "ACTIONS",
    "DriftReport",
    "DriftRow",
    "compare_records",
    "drift_report",
    "record_of",
]


# -- the public entry point ------------------------------------------------------------------
def _is_plan(obj: Any) -> bool:
    from ._plan import ExperimentPlan

    return isinstance(obj, ExperimentPlan)


def _is_model(obj: Any) -> bool:
    return hasattr(obj, "fixed") and hasattr(obj, "net_params") and hasattr(obj, "net")


def _run_today(then: Record) -> Record:
    """A run's record with its code looked up today and this process's library versions.
    Code is looked up among the modules this process has loaded: a run's code records
    are names and digests, and nothing they name is imported (its code would run)."""
    values = dict(then.values)
    if "environment" in values:
        values["environment"] = environment_now()
    code = tuple(code_now(c) for c in then.code)
    return Record("run", "today", values, code, run_id=then.run_id)


def record_of(
    obj: Any, *, now: bool = True, runs_root: str | os.PathLike[str] | None = None
) -> Record:
    """The record of a plan (what a fit of it runs now, or, ``now=False``, as built), a
    model (as built), a run (by id, ``NNRun`` or ``FitResult``), a ``Record`` or its
    JSON."""
    if isinstance(obj, Record):
        return obj
    if isinstance(obj, dict):
        return Record.from_json(obj)
    if _is_plan(obj):
        # Against another side, a plan is what a fit of it would run: the code it holds
        # and its mutable objects as they are now.
        return obj._record(now=now, mode="fit" if now else "then")
    if _is_model(obj):
        return model_record(obj, now=False)
    return run_record(obj, runs_root)


def drift_report(
    a: Any, b: Any = None, *, runs_root: str | os.PathLike[str] | None = None
) -> DriftReport:
    """What changed: ``a`` against the present (``b=None``), or ``a`` against ``b``.

    ``a`` and ``b`` are plans, models, runs (an id or unique prefix, an ``NNRun``, a
    ``FitResult``) or records. With ``b=None``: a plan is compared with the code its
    names mean today and with its mutable objects as they are now; a model with its
    attributes now; a run with today's code and library versions.
    """
    if b is not None:
        return compare_records(record_of(a, runs_root=runs_root), record_of(b, runs_root=runs_root))
    if _is_plan(a):
        return compare_records(a._record(now=False), a._record(now=True), handle="plan")
    if _is_model(a):
        return compare_records(
            model_record(a, now=False), model_record(a, now=True), handle="model"
        )
    then = record_of(a) if isinstance(a, Record | dict) else run_record(a, runs_root)
    return compare_records(then, _run_today(then), handle="run")


def banner_for(handle_obj: Any) -> str:
    """The drift banner of a plan or model ("" when nothing drifted)."""
    return drift_report(handle_obj).short()


def print_banner(handle_obj: Any, enabled: bool | None = None) -> None:
    text = banner_for(handle_obj)
    if text:
        emit(text, enabled)
