"""``TrainJob``: one ``NNModel.train`` (or ``Trainer.train``) call written down as data,
to run later.

A race (``TrainingMonitor.race``) trains its entries one after another and must refuse
a bad one before the first starts. An ``ExperimentPlan`` can say that of itself
(``plan.validate()``), but a plan takes no ``train_step_fn``: a Mixup step, a
distillation step or a custom objective is passed to ``NNModel.train`` directly, and a
multi-optimizer run is a ``Trainer``'s. A ``TrainJob`` holds that call (the model or
the Trainer, its params and ``train()``'s keywords) so a race can check it with the
engine's own checks (``check_train``, the same call ``NNModel.train`` makes before it
reserves its run directory; ``Trainer.check``, ``Trainer.train``'s own refusals before
that same call) and run it afterwards.

A plain zero-argument callable would not do: it cannot be checked without being run.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError
from .train_gate import TrainGate, check_train

__all__ = ["TrainJob"]

# The keywords of NNModel.train a job may carry: a race runs in one process, so no
# distributed=, and the monitor owns the stop control (tests check each is a keyword
# of NNModel.train).
_KEYWORDS = ("eval_step_fn", "objective", "train_step_fn", "salt", "provenance")
# Trainer.train's: its step is trainer_step_fn= (the optimizers named) or objective=.
_TRAINER_KEYWORDS = ("eval_step_fn", "objective", "trainer_step_fn", "salt", "provenance")


class TrainJob:
    """``model.train(params, callbacks=..., components=..., **keywords)``, not run yet;
    or, with a ``Trainer`` in place of the model, ``trainer.train(params, ...)``.

    ``keywords`` are ``train()``'s: ``train_step_fn=``, ``objective=``,
    ``eval_step_fn=``, ``salt=``, ``provenance=`` (a Trainer's: ``trainer_step_fn=`` in
    place of ``train_step_fn=``, with ``NNTrainerParams``). A job's randomness is its
    model's and its params': the initial weights come from the model (built under its
    ``init_seed``), the shuffling and dropout from the params' ``seed`` (the loop seeds
    the process-wide streams with it when the run starts), and a step's own draws
    (Mixup's lambdas) from the step's generator. So a job trains the same weights in a
    race as alone; give each job its own model (and Trainer) and its own step (call the
    factory once per job), or the second would go on from the first's state.
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
        from .trainer import Trainer

        if isinstance(model, Trainer):
            trainer, allowed = model, _TRAINER_KEYWORDS
        elif isinstance(model, NNModel):
            trainer, allowed = None, _KEYWORDS
        else:
            raise ConfigError(
                "TrainJob.model",
                model,
                "pass an nnx_lab.NNModel (or an nnx_lab.trainer.Trainer for a run with "
                "several named optimizers)",
            )
        _check_keywords(keywords, allowed, trainer is not None)
        self.trainer = trainer  # None for an NNModel job
        self.model = model.model if trainer is not None else model
        self.params = params
        self.callbacks = list(callbacks)
        self.components = list(components)
        self.keywords = dict(keywords)

    def __repr__(self) -> str:
        k = self.keywords
        step = k.get("trainer_step_fn") or k.get("train_step_fn") or k.get("objective")
        how = f", {getattr(step, '__qualname__', type(step).__name__)}" if step else ""
        what = type(self.model.net).__name__
        if self.trainer is not None:
            what = f"Trainer({what})"
        return f"TrainJob({what}{how})"

    @property
    def owned(self) -> list[Any]:
        """The objects whose state this job's run changes (its model, its Trainer, its
        step or objective): two jobs of one race must not share one."""
        k = self.keywords
        objects = (  # the Trainer first: a shared one is named, not its model
            self.trainer,
            self.model,
            k.get("train_step_fn"),
            k.get("trainer_step_fn"),
            k.get("objective"),
        )
        return [o for o in objects if o is not None]

    def renamed(self, name: str | None) -> TrainJob:
        """This job with its run named ``name`` (its params' ``name``; a name is not in
        the run id): the same model, Trainer, step and keywords."""
        job = copy.copy(self)
        job.params = dataclasses.replace(self.params, name=name)
        return job

    def check(self, callbacks: Sequence[Any] = ()) -> TrainGate:
        """``train()``'s refusals for this job (with ``callbacks`` added to its own, as
        ``run`` adds them), before anything exists: no run directory, no file."""
        callbacks = [*callbacks, *self.callbacks]
        if self.trainer is not None:
            return self.trainer.check(
                self.params,
                callbacks=callbacks,
                components=self.components,
                banner=False,
                **self.keywords,
            )
        return check_train(
            self.model,
            self.params,
            callbacks,
            self.components,
            banner=False,
            **self.keywords,
        )

    def run(self, callbacks: Sequence[Any] = ()) -> Any:
        """Train: ``model.train(...)`` (or ``trainer.train(...)``) with ``callbacks``
        before the job's own; the ``NNRun``. ``train`` checks again first (the model may
        have changed since)."""
        train = self.model.train if self.trainer is None else self.trainer.train
        return train(
            self.params,
            callbacks=[*callbacks, *self.callbacks],
            components=self.components,
            **self.keywords,
        )


def _check_keywords(keywords: dict[str, Any], allowed: tuple[str, ...], trainer: bool) -> None:
    """Refuse a keyword the job's ``train()`` would not take in a race, when the job is
    built (not when the race starts), saying which form fits."""
    unknown = sorted(set(keywords) - set(allowed))
    if not unknown:
        return
    why = ""
    if "distributed" in unknown:
        why = " (a race trains in this process: launch a DDP run on its own)"
    elif "control" in unknown:
        why = " (the monitor's Stop controls the run)"
    elif trainer and "train_step_fn" in unknown:
        why = " (a Trainer's step is trainer_step_fn=: its optimizers are named)"
    elif not trainer and "trainer_step_fn" in unknown:
        why = (
            " (a trainer_step_fn is a Trainer's: pass TrainJob(Trainer(model), "
            "NNTrainerParams(...), trainer_step_fn=...))"
        )
    raise ConfigError(
        "TrainJob",
        unknown,
        f"a job takes train()'s keywords {', '.join(allowed)}, callbacks= and components={why}",
    )
