"""``to_wandb(run_id, project)``: a run's ``metrics.jsonl`` replayed into a
``WandbCallback``, so a run trained without the callback reaches W&B with the same
scalars, config and summary (docs/logging.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..engine.handlers.wandb_logger import WandbCallback
from ..engine.run_handle import read_events
from ..errors import ConfigError
from ..runs import resolve_runs_root, run_dir

__all__ = ["to_wandb"]

_REPLAYED = ("on_run_started", "on_step_metrics", "on_epoch_ended", "on_run_finished")


def to_wandb(
    run_id: str,
    project: str,
    *,
    name: str | None = None,
    mode: str = "offline",
    dir: str | os.PathLike[str] | None = None,  # wandb.init names it dir too
    config: dict[str, Any] | None = None,
    runs_root: str | os.PathLike[str] | None = None,
) -> Path | None:
    """Log run ``run_id``'s log as one W&B run; returns the W&B run's local folder
    (None with ``mode="disabled"``). A log still being written, or cut off, gets the
    summary status ``incomplete``."""
    root = resolve_runs_root(runs_root)
    log = run_dir(root, run_id, "run_id") / "metrics.jsonl"
    if not log.is_file():
        raise ConfigError("run_id", run_id, f"no log at {log}; check the id, or pass runs_root=")
    callback = WandbCallback(project, name=name, mode=mode, dir=dir, config=config)
    events = read_events(log)  # the whole log is checked before anything is logged
    folder = None
    try:
        for event in events:
            if event.hook not in _REPLAYED:
                continue
            getattr(callback, event.hook)(event)
            if event.hook == "on_run_started" and callback.run is not None and mode != "disabled":
                folder = Path(callback.run.dir).parent  # the run's folder (files/ is in it)
        callback.end("incomplete")  # no run_finished: a log still written, or cut off
    finally:
        callback.on_detach()
    return folder
