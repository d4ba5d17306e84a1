"""What an ``LRFinderWidget`` is given, checked before anything starts: what it sweeps
(a plan, a PlanBuilder, a model and its loader), the sweep's arguments, and a learning
rate picked on the curve; and the series the sweep's points go into."""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any

import traitlets as t

from ..plans import ExperimentPlan, Problems
from ._plan_builder import PlanBuilder
from ._series import BucketSeries, ColumnSpec, Reduce

__all__ = [
    "check_chosen_lr",
    "check_display",
    "check_sweep_kwargs",
    "check_sweep_plan",
    "classify",
    "rounded_lr",
    "sweep_defaults",
    "sweep_series",
]

USE_DIGITS = 3  # "Use this LR" writes a rate to this many significant digits
SNAP = 1e-5  # a value this close (relatively) to a swept rate is that rate (float32 wire)
NOT_FORWARDED = ("net", "train_loader", "loss_fn", "control")


def rounded_lr(lr: float) -> float:
    """The rate "Use this LR" writes: ``lr`` to three significant digits (0.0105, not
    0.010476157527896641). A pick on a log curve is not known any closer, and the plan,
    the form and the run id then carry a number a person can read and type again."""
    return float(f"{float(lr):.{USE_DIGITS}g}")


def sweep_series(capacity: int) -> BucketSeries:
    """The sweep's points: ``step``, ``lr`` (x), ``loss`` and ``smoothed`` (with their
    ``:min`` / ``:max`` once decimated), ``n`` points per row, ``bad`` non-finite losses."""
    return BucketSeries(
        [
            ColumnSpec("step", "int32", Reduce.LAST),
            ColumnSpec("lr", "float32", Reduce.LAST),
            ColumnSpec("loss", "float32", Reduce.MEAN),
            ColumnSpec("smoothed", "float32", Reduce.MEAN),
            ColumnSpec("n", "int32", Reduce.SUM),
            ColumnSpec("bad", "int32", Reduce.SUM),
        ],
        capacity=capacity,
        weight="n",
        bad="bad",
    )


def classify(source: Any, train_loader: Any) -> tuple[str, Any, Any, Any]:
    """``(kind, plan, builder, model)`` of what the widget sweeps; ``kind`` is "plan",
    "builder" or "model"."""
    if isinstance(source, PlanBuilder):
        kind, plan, builder, model = "builder", source.plan, source, None
    elif isinstance(source, ExperimentPlan):
        kind, plan, builder, model = "plan", source, None, None
    else:
        from ..engine.model import NNModel  # torch: only when a model is passed

        if not isinstance(source, NNModel):
            raise TypeError(
                f"LRFinderWidget({type(source).__name__}): pass an ExperimentPlan, a "
                "PlanBuilder, or an NNModel with its training loader "
                "(LRFinderWidget(model, train_loader))"
            )
        kind, plan, builder, model = "model", None, None, source
    if kind == "model" and train_loader is None:
        raise TypeError(
            "LRFinderWidget(model, train_loader): a model is swept on batches of a "
            "training loader; pass it as the second argument"
        )
    if kind != "model" and train_loader is not None:
        raise TypeError(
            f"LRFinderWidget({kind}, train_loader): a {kind} brings its own data; pass "
            "no loader (or sweep a model: LRFinderWidget(model, train_loader))"
        )
    return kind, plan, builder, model


def check_display(update_interval: Any, max_points: Any) -> None:
    """The widget's own settings: seconds between updates, points kept."""
    if not 0.01 <= update_interval <= 10:
        raise ValueError(
            f"update_interval={update_interval!r} is out of range: pass seconds between 0.01 and 10"
        )
    if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 16:
        raise ValueError(f"max_points={max_points!r}: pass an even integer >= 16")


def sweep_defaults() -> dict[str, Any]:
    """``nnx_lab.lr_finder``'s keyword arguments and their defaults."""
    from ..lr_sweep import lr_finder  # torch: loaded when a widget is made

    return {
        name: p.default
        for name, p in inspect.signature(lr_finder).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def check_sweep_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The sweep's arguments, refused here with the fix rather than in the thread."""
    from ..lr_sweep import check_sweep  # torch: the sweep's own module

    defaults = sweep_defaults()
    if "control" in kwargs:
        raise TypeError(
            "LRFinderWidget(control=...): the widget owns the sweep's control; stop it "
            "with its Stop button or widget.stop()"
        )
    allowed = sorted(set(defaults) - set(NOT_FORWARDED))
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise TypeError(
            f"LRFinderWidget got unknown sweep argument(s) {unknown}; the sweep takes "
            f"{allowed}, the widget autostart, update_interval and max_points"
        )
    m = {**defaults, **kwargs}
    check_sweep(m["start_lr"], m["end_lr"], m["num_iter"], m["mode"], m["rule"])
    return dict(kwargs)


def check_sweep_plan(plan: ExperimentPlan) -> None:
    """What ``plan.lr_finder`` refuses (a sweep needs no callbacks), before the thread."""
    problems = [p for p in plan.validate() if not p.field.startswith("callbacks")]
    Problems(problems).raise_for_errors()


def check_chosen_lr(
    value: float | None,
    *,
    start_lr: float,
    end_lr: float,
    suggestions: dict[str, Any],
    lrs: Sequence[float],
) -> float | None:
    """A picked learning rate: inside the swept range (or at a rule's pick below it),
    snapped to the swept rate it stands for; ``traitlets.TraitError`` otherwise."""
    if value is None:
        return None
    # the swept range, and below it a rule's pick (min / 10 can be under start_lr)
    picks = [v for v in suggestions.values() if isinstance(v, int | float) and v > 0]
    lo, hi = min([start_lr, *picks]), end_lr
    if not math.isfinite(value) or value <= 0:
        raise t.TraitError(
            f"chosen_lr={value!r}: pass a learning rate > 0 (the sweep covers "
            f"{lo:.3g} to {hi:.3g}); click the curve or type one"
        )
    if lrs:  # the view sends float32 rates: the swept one it stands for
        nearest = min(lrs, key=lambda lr: abs(lr - value))
        if abs(nearest - value) <= SNAP * nearest:
            value = nearest
    if not lo * (1 - SNAP) <= value <= hi * (1 + SNAP):
        raise t.TraitError(
            f"chosen_lr={value!r} is out of the swept range {lo:.3g} to {hi:.3g}: pick a "
            "rate on the curve, or sweep a wider range (start_lr=, end_lr=)"
        )
    return float(value)
