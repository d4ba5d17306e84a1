"""``to_tensorboard(run_id, log_dir)``: a run's ``metrics.jsonl`` replayed into a
``TensorBoardCallback``, so a run trained without the callback opens in TensorBoard
with the same scalars and HParams entry (histograms need the weights of each epoch, which
a log does not hold)."""

from __future__ import annotations

import os
from pathlib import Path

from ..engine.handlers.tensorboard import TensorBoardCallback
from ..engine.run_handle import read_events
from ..errors import ConfigError
from ..runs import resolve_runs_root, run_dir

__all__ = ["to_tensorboard"]

_REPLAYED = ("on_run_started", "on_step_metrics", "on_epoch_ended", "on_run_finished")


def to_tensorboard(
    run_id: str,
    log_dir: str | os.PathLike[str] = "tb_logs",
    *,
    runs_root: str | os.PathLike[str] | None = None,
) -> Path:
    """Write run ``run_id``'s log as TensorBoard events under ``log_dir/<run_id>``;
    returns that folder. A folder that already holds events is refused (TensorBoard
    would draw every point twice)."""
    root = resolve_runs_root(runs_root)
    log = run_dir(root, run_id, "run_id") / "metrics.jsonl"
    if not log.is_file():
        raise ConfigError("run_id", run_id, f"no log at {log}; check the id, or pass runs_root=")
    if not isinstance(log_dir, str | os.PathLike) or not str(log_dir).strip():
        raise ConfigError("log_dir", log_dir, "pass the folder to write into, e.g. 'tb_logs'")
    target = Path(log_dir) / run_id
    if target.is_dir() and any(p.name.startswith("events.out.tfevents") for p in target.iterdir()):
        raise ConfigError(
            "log_dir",
            str(log_dir),
            f"already holds TensorBoard events of run {run_id} in {target}; remove them "
            "or pass another log_dir",
        )
    events = read_events(log)  # the whole log is checked before anything is written
    callback = TensorBoardCallback(log_dir)
    finished = False
    try:
        for event in events:
            if event.hook in _REPLAYED:
                getattr(callback, event.hook)(event)
                finished = finished or event.hook == "on_run_finished"
        if not finished:
            callback.write_hparams("incomplete")  # a log still being written, or cut off
    finally:
        callback.on_detach()
    return target
