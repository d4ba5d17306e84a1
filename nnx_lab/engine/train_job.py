"""``TrainJob``: one ``NNModel.train`` call written down as data, to run later.

A race (``TrainingMonitor.race``) trains its entries one after another and must refuse
a bad one before the first starts. An ``ExperimentPlan`` can say that of itself
(``plan.validate()``), but a plan takes no ``train_step_fn``: a Mixup step, a
distillation step or a custom objective is passed to ``NNModel.train`` directly. A
``TrainJob`` holds that call (the model, its ``NNTrainParams`` and ``train()``'s
keywords) so a race can check it with the engine's own checks (``check_train``, the
same call ``train`` makes before it reserves its run directory) and run it afterwards.

A plain zero-argument callable would not do: it cannot be checked without being run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError
from .train_gate import TrainGate, check_train

__all__ = ["TrainJob"]

# The keywords of NNModel.train a job may carry: a race runs in one process, so no
# distributed=, and the monitor owns the stop control (tests check each is a keyword
# of NNModel.train).
_KEYWORDS = ("eval_step_fn", "objective", "train_step_fn", "salt", "provenance")


class TrainJob:
    """``model.train(params, callbacks=..., components=..., **keywords)``, not run yet.

    ``keywords`` are ``train()``'s: ``train_step_fn=``, ``objective=``,
    ``eval_step_fn=``, ``salt=``, ``provenance=``. A job's randomness is its model's
    and its params': the initial weights come from the model (built under its
    ``init_seed``), the shuffling and dropout from ``NNTrainParams.seed`` (the loop
    seeds the process-wide streams with it when the run starts), and a step's own
    draws (Mixup's lambdas) from the step's generator. So a job trains the same
    weights in a race as alone; give each job its own model and its own step (call
    the factory once per job), or the second would go on from the first's state.
    """

    def __init__(
        self,
        model: Any,
        params: Any,
        *,
        callbacks: Sequence[Any] = (),
        components: Sequence[Any] = (),
        **keywords: Any,
    ) -> None:
        from .model import NNModel

        if not isinstance(model, NNModel):
            raise ConfigError("TrainJob.model", model, "pass an nnx_lab.NNModel")
        unknown = sorted(set(keywords) - set(_KEYWORDS))
        if unknown:
            why = ""
            if "distributed" in unknown:
                why = " (a race trains in this process: launch a DDP run on its own)"
            elif "control" in unknown:
                why = " (the monitor's Stop controls the run)"
            raise ConfigError(
                "TrainJob",
                unknown,
                f"a job takes train()'s keywords {', '.join(_KEYWORDS)}, callbacks= and "
                f"components={why}",
            )
        self.model = model
        self.params = params
        self.callbacks = list(callbacks)
        self.components = list(components)
        self.keywords = dict(keywords)

    def __repr__(self) -> str:
        step = self.keywords.get("train_step_fn") or self.keywords.get("objective")
        how = f", {getattr(step, '__qualname__', type(step).__name__)}" if step else ""
        return f"TrainJob({type(self.model.net).__name__}{how})"

    @property
    def owned(self) -> list[Any]:
        """The objects whose state this job's run changes (its model, its step or
        objective): two jobs of one race must not share one."""
        objects = (self.model, self.keywords.get("train_step_fn"), self.keywords.get("objective"))
        return [o for o in objects if o is not None]

    def check(self, callbacks: Sequence[Any] = ()) -> TrainGate:
        """``train()``'s refusals for this job (with ``callbacks`` added to its own, as
        ``run`` adds them), before anything exists: no run directory, no file."""
        return check_train(
            self.model,
            self.params,
            [*callbacks, *self.callbacks],
            self.components,
            banner=False,
            **self.keywords,
        )

    def run(self, callbacks: Sequence[Any] = ()) -> Any:
        """Train: ``model.train(...)`` with ``callbacks`` before the job's own; the
        ``NNRun``. ``train`` checks again first (the model may have changed since)."""
        return self.model.train(
            self.params,
            callbacks=[*callbacks, *self.callbacks],
            components=self.components,
            **self.keywords,
        )
