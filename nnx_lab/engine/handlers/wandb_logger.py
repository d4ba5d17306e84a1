"""Weights & Biases as a sink of the event stream (§2.8, docs/logging.md).

``WandbCallback(project=...)`` starts one W&B run when the nnx-lab run starts and logs
what ``TensorBoardCallback`` writes, under the same names: every step record's scalars
(``step/...``: the loss, the metrics, each ``LossTerm`` as ``step/terms/<name>``, the
learning rate and a Trainer's per-group ``step/lrs/<group>``) at the global step; each
epoch's training summary, validation metrics (declared ones included), ``epoch/lr`` and
``epoch/signal`` against ``epoch`` (``define_metric``). The run's configuration
(``net``, ``model``, ``train`` of ``run.yaml``, with the nnx-lab run id) is the W&B
config; the final epoch's metrics and the status are its summary.

wandb is an optional extra (``pip install "nnx-lab[wandb]"``), imported when a callback
is made, so a missing wandb is refused before any run directory exists; the engine
imports it nowhere else. In a data-parallel run wrap it in
``distributed.writer_only`` (rank 0 logs).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...runs import EpochEnded, RunFinished, RunStarted, StepMetrics
from ..sinks import Callback
from .scalars import epoch_scalars, step_scalars

__all__ = ["WandbCallback"]

_INSTALL = 'pip install "nnx-lab[wandb]"'
_MODES = ("offline", "online", "disabled")


def _wandb() -> Any:
    try:
        import wandb
    except ImportError as exc:
        raise ImportError(f"WandbCallback needs wandb ({exc}); install it: {_INSTALL}") from None
    return wandb


def _text(value: Any, field: str, fix: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(field, value, fix)
    return value


class WandbCallback(Callback):
    """Log a run to Weights & Biases:
    ``model.train(params, callbacks=[WandbCallback(project="nnx", mode="offline")])``.

    ``name`` is the W&B run's display name (default: the nnx-lab run id); ``mode``
    "offline" writes under ``dir`` for ``wandb sync`` later, "online" sends as it goes,
    "disabled" logs nothing; ``config`` adds values to the run's configuration.
    """

    def __init__(
        self,
        project: str,
        name: str | None = None,
        mode: str = "offline",
        dir: str | os.PathLike[str] | None = None,  # wandb.init names it dir too
        config: dict[str, Any] | None = None,
    ) -> None:
        self.project = _text(project, "project", "pass the W&B project's name, e.g. 'nnx'")
        self.name = _text(name, "name", "pass the run's name as text, or None", optional=True)
        if mode not in _MODES:
            raise ConfigError("mode", mode, f"pass one of {', '.join(map(repr, _MODES))}")
        if dir is not None and (not isinstance(dir, str | os.PathLike) or not str(dir).strip()):
            raise ConfigError("dir", dir, "pass the folder W&B writes into, or None")
        if config is not None and not isinstance(config, dict):
            raise ConfigError("config", config, "pass a dict of values to add to the run's config")
        if dir is not None and not Path(dir).is_dir():
            raise ConfigError("dir", str(dir), "does not exist; create the folder first")
        self._wandb = _wandb()  # refused now, not when the run starts
        self.mode = mode
        self.dir = Path(dir) if dir is not None else None
        self.config = dict(config or {})
        self.run: Any = None
        self._final: dict[str, float] = {}

    # -- the stream ----------------------------------------------------------------------------
    def on_run_started(self, event: RunStarted) -> None:
        if self.run is not None:
            return  # a replayed log that holds a second start
        config = {k: v for k, v in event.config.items() if k in ("net", "model", "train")}
        config = {**config, "nnx_run_id": event.run_id, **self.config}
        if event.parent_run_id is not None:
            config["parent_run_id"] = event.parent_run_id
        settings = self._wandb.Settings(
            silent=True,
            console="off",  # the notebook's output stays the notebook's
            x_disable_stats=True,  # no system-metrics thread beside the loop
            disable_git=True,
            save_code=False,
        )
        self.run = self._wandb.init(
            project=self.project,
            name=self.name or event.run_id,
            mode=self.mode,
            dir=str(self.dir) if self.dir is not None else None,
            config=config,
            settings=settings,
            reinit="create_new",  # several runs in one kernel are several W&B runs
        )
        # epoch values are charted against the epoch, step values against the step
        self.run.define_metric("epoch")
        self.run.define_metric("epoch/*", step_metric="epoch")
        self._final = {}

    def on_step_metrics(self, event: StepMetrics) -> None:
        if self.run is None:
            return
        for record in event.records:
            self.run.log(step_scalars(record), step=record.step)

    def on_epoch_ended(self, event: EpochEnded) -> None:
        if self.run is None:
            return
        values = epoch_scalars(event)
        # at the epoch's last step (W&B's step only grows), on the epoch axis
        self.run.log({**values, "epoch": event.epoch}, step=event.step)
        self._final = {t: v for t, v in values.items() if math.isfinite(v)}

    def on_run_finished(self, event: RunFinished) -> None:
        self.end(event.status)

    def end(self, status: str) -> None:
        """Write the summary (the final epoch's metrics and ``status``) and finish the W&B
        run; ``nnx_lab.export.to_wandb`` ends a cut-off log's run as "incomplete"."""
        if self.run is None:
            return
        self.run.summary.update({**self._final, "status": status})
        self._finish(0 if status in ("finished", "stopped") else 1)

    def _finish(self, exit_code: int) -> None:
        run, self.run = self.run, None
        if run is not None:
            run.finish(exit_code=exit_code)

    def on_detach(self) -> None:
        self._finish(1)  # a run that ended without its finish event
