"""Experiment plans, provenance, and the binding and config-drift reports.

``ExperimentPlan`` (§2.20) is an immutable configuration that is branched, validated,
probed and fitted. ``drift_report`` compares what a plan, a model or a run fixed with the
present or with another side; ``binding_report`` says where each value of a fit comes
from. Provenance manifests (§2.15) are ``nnx_lab.provenance``.

Importing this package loads no torch, and comparing two runs' records needs none: the
JupyterLab server extension uses it. Building, probing and fitting a plan load the
engine when they run.

A plan read with ``ExperimentPlan.from_json`` is data: its references to code stay text
until ``plan.resolve()`` (or ``fit()``) imports them, and reading or comparing runs never
imports what their records name (docs/plans.md, "Trust model").

For widgets: ``plan_fields()`` describes every field (path, type, default, choices,
whether it enters the run id), ``plan.check(path, value)`` returns the ``Problem``s a
candidate value would bring, ``plan.with_value(path, value)`` sets it, and
``drift_report(...).rows`` / ``.to_json()`` is the table to render.

Sweeps: ``plan.sweep({path: [choices] or loguniform(lo, hi)}, ...)`` fits trials one
after another and returns a ``SweepResult`` (docs/sweeps.md).
"""

from ..runs import set_config_report
from ._binding import Binding, BindingReport
from ._drift import ABSENT, ACTIONS, DriftReport, DriftRow, compare_records, drift_report, record_of
from ._execution import FitResult, SplitMetrics
from ._fields import PlanField, plan_fields
from ._plan import ExperimentPlan
from ._problems import PlanError, Problem, Problems
from ._record import Record
from ._sweep import SweepResult, SweepTrial
from ._sweep_space import Distribution, loguniform, uniform

__all__ = [
    "ABSENT",
    "ACTIONS",
    "Binding",
    "BindingReport",
    "Distribution",
    "DriftReport",
    "DriftRow",
    "ExperimentPlan",
    "FitResult",
    "PlanError",
    "PlanField",
    "Problem",
    "Problems",
    "Record",
    "SplitMetrics",
    "SweepResult",
    "SweepTrial",
    "compare_records",
    "drift_report",
    "loguniform",
    "plan_fields",
    "record_of",
    "set_config_report",
    "uniform",
]


def __getattr__(name: str):
    if name == "ProbeReport":  # loads torch: only when asked for
        from ._probe import ProbeReport

        return ProbeReport
    raise AttributeError(f"module 'nnx_lab.plans' has no attribute {name!r}")
