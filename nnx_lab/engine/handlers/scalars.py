"""The scalars a metrics sink charts, named once for every sink (TensorBoard, W&B).

Both sinks log the same values under the same tags, so a run reads alike in either:
``step/...`` from each step record, ``epoch/...`` from each epoch's summary.
"""

from __future__ import annotations

from typing import Any

from ...runs import EpochEnded

__all__ = ["SKIPPED", "epoch_scalars", "flat_scalars", "step_scalars"]

SKIPPED = {"step", "epoch", "batch", "samples", "valid"}  # axes and counts, not values


def flat_scalars(value: Any, prefix: str) -> dict[str, float]:
    """The numbers of a nested dict as ``{"prefix/a/b": x}``; None, text and booleans
    are left out (a scalar chart has no point for them)."""
    out: dict[str, float] = {}
    stack = [(prefix, value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, dict):
            stack.extend((f"{where}/{k}", v) for k, v in node.items())
        elif isinstance(node, int | float) and not isinstance(node, bool):
            out[where] = float(node)
    return out


def step_scalars(record: Any) -> dict[str, float]:
    """A step record's values as ``step/...`` tags (its axes and counts left out)."""
    values = {k: v for k, v in record.__dict__.items() if k not in SKIPPED}
    return flat_scalars(values, "step")


def epoch_scalars(event: EpochEnded) -> dict[str, float]:
    """An epoch's training summary, validation metrics, learning rate and signal as
    ``epoch/...`` tags."""
    halves = {"train": event.train, "val": event.val or {}}
    values = {
        tag: v
        for tag, v in flat_scalars(halves, "epoch").items()
        if tag.rsplit("/", 1)[-1] not in SKIPPED
    }
    if event.lr is not None:  # None: several optimizers (the Trainer's `lrs`)
        values["epoch/lr"] = float(event.lr)
    if event.signal is not None:
        values["epoch/signal"] = float(event.signal)
    return values
