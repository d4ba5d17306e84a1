"""The LR finder's link to a plan: "Use this LR" sets a plan's (or a linked
PlanBuilder's) learning-rate field. A mixin of ``LRFinderWidget``: it reads the widget's
``plan``, ``chosen_lr`` and lock, and sets its ``linked``, ``can_use``, ``plan_lr`` and
``applied_*`` traits."""

from __future__ import annotations

from typing import Any

from ..plans import ExperimentPlan, PlanError
from ._lr_finder_inputs import rounded_lr
from ._plan_builder import PlanBuilder

__all__ = ["LR_PATH", "PlanLink"]

LR_PATH = "train.optim.max_lr"  # the plan field "Use this LR" sets


class PlanLink:
    def link(self, builder: PlanBuilder) -> Any:
        """Give "Use this LR" a PlanBuilder to set the learning-rate field of; returns
        the widget. Linking another builder drops the first."""
        if not isinstance(builder, PlanBuilder):
            raise TypeError(f"link({type(builder).__name__}): pass a PlanBuilder (nnx_lab.widgets)")
        with self._lock:
            if self._builder is not None:
                self._builder.unobserve(self._on_builder_plan, "plan")
            self._builder = builder
            builder.observe(self._on_builder_plan, "plan")
            self.linked = True
        self._refresh_use()
        return self

    def unlink(self) -> None:
        with self._lock:
            if self._builder is not None:
                self._builder.unobserve(self._on_builder_plan, "plan")
            self._builder = None
            self.linked = False
        self._refresh_use()

    @property
    def builder(self) -> PlanBuilder | None:
        """The linked PlanBuilder, or None."""
        return self._builder

    def _on_builder_plan(self, change: dict[str, Any]) -> None:
        self._refresh_use()

    def _target(self) -> ExperimentPlan | None:
        """The plan "Use this LR" changes."""
        if self._builder is not None:
            return self._builder.plan
        return self.plan

    def _refresh_use(self) -> None:
        target = self._target()
        with self.hold_sync():
            self.plan_lr = None if target is None else float(target.value(LR_PATH))
            self.can_use = target is not None and self.chosen_lr is not None

    def use_lr(self, lr: float | None = None) -> ExperimentPlan:
        """ "Use this LR": the plan with ``lr`` (default: ``chosen_lr``), rounded to three
        significant digits, as its ``max_lr``, kept in ``widget.plan`` and returned.
        With a linked PlanBuilder, its learning-rate field is set (``builder.set_value``)
        and its new plan returned."""
        if lr is not None:
            self.chosen_lr = lr
        chosen = self.chosen_lr
        if chosen is None:
            raise ValueError(
                "no learning rate chosen yet: click the curve, type one, or wait for the "
                "sweep's suggestion"
            )
        lr = rounded_lr(chosen)  # chosen_lr keeps the pick at full precision
        builder = self._builder
        if builder is not None:
            problems = builder.set_value(LR_PATH, lr)
            if problems:
                raise PlanError(problems)
            plan = self.plan.with_lr(lr) if self._kind == "plan" else builder.plan
            note = f"{LR_PATH} = {lr:.3g} in the PlanBuilder"
        elif self.plan is not None:
            plan = self.plan.with_lr(lr)
            note = f"{LR_PATH} = {lr:.3g} in widget.plan"
        else:
            raise RuntimeError(
                "no plan to give the learning rate to: this widget sweeps a model; link a "
                "PlanBuilder (widget.link(builder)) or read widget.chosen_lr"
            )
        with self.hold_sync():
            self.plan = plan
            self.applied_lr = lr
            self.applied_note = note
        self._refresh_use()
        return plan
