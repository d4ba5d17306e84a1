"""The loop's validation pass at each epoch's end.

``evaluate()`` by default, or the run's ``eval_step_fn``: called as
``evaluator(net, loader, loss, task, *, device, precision)`` plus the keyword arguments
it takes of those the run offers (declared metrics, extra metrics, the gather of a
data-parallel run), so a custom evaluator decides whether and how to compute them. Its
result must be an ``EDP``; when it raises, the batch that broke it is named if a check
finds one.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from .edp import EDP
from .eval_context import EvalStepContext, takes_context
from .evaluate import evaluate
from .train_step import TrainStep
from .training_state import preserved_rng

__all__ = ["Validation", "accepted"]


class Validation:
    """One run's validation pass: the evaluator and the keyword arguments it is given."""

    def __init__(
        self,
        evaluator: Callable[..., EDP] | None,
        offered: dict[str, Any],
        *,
        reduce: Callable[[Any], Any] | None = None,
        diagnose: Callable[[Any, str, str], Exception | None] | None = None,
    ) -> None:
        """``reduce`` sums the shards' statistics across the ranks (a data-parallel
        run); ``diagnose(batch, field, where)`` explains a failed pass (see the loop)."""
        self.evaluator = evaluate if evaluator is None else evaluator
        self.with_context = evaluator is not None and takes_context(evaluator)
        self.offered = offered
        self.kwargs: dict[str, Any] = {} if reduce is None else {"reduce": reduce}
        if not self.with_context:
            self.kwargs.update(accepted(self.evaluator, offered))
        self.diagnose = diagnose

    def __call__(self, step: TrainStep, loader: Any, epoch: int, loaders: list[Any]) -> EDP:
        """Validate ``step``'s network on ``loader`` after ``epoch``; ``loaders`` are
        every loader of the run, whose generators a diagnosis must not move."""
        try:
            if self.with_context:
                val = self._with_context(step, loader, epoch)
            else:
                val = self.evaluator(
                    step.net,
                    loader,
                    step.loss,
                    step.task,
                    device=step.device,
                    precision=step.precision,
                    **self.kwargs,
                )
        except Exception as exc:
            self._explain(exc, loader, epoch, loaders)
            raise
        if not isinstance(val, EDP):
            name = getattr(self.evaluator, "__qualname__", type(self.evaluator).__name__)
            raise TypeError(
                f"eval_step_fn {name} returned {type(val).__name__}; it must return an "
                "EDP (nnx_lab.EDP(loss=..., error=..., samples=...))"
            )
        return val

    def _with_context(self, step: TrainStep, loader: Any, epoch: int) -> Any:
        ctx = EvalStepContext(
            model=step.net,
            val_loader=loader,
            extra_metrics=self.offered.get("extra_metrics"),
            epoch_idx=epoch,
            metrics=self.offered.get("metrics"),
            loss_fn=step.loss,
            device=step.device,
            precision=step.precision,
        )
        step.net.eval()
        with torch.no_grad():
            return self.evaluator(ctx)

    def _explain(self, exc: Exception, loader: Any, epoch: int, loaders: list[Any]) -> None:
        if self.diagnose is None:
            return
        with preserved_rng(loaders):  # a second pass must not move any generator
            for index, batch in enumerate(loader):
                where = f"validation batch {index} after epoch {epoch}"
                problem = self.diagnose(batch, "NNTrainParams.val_loader", where)
                if problem is not None:
                    raise problem from exc


def accepted(fn: Callable[..., Any], offered: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``offered`` that ``fn`` takes."""
    if not offered:
        return {}
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return offered
    return {k: v for k, v in offered.items() if k in params}
