"""The TrainingMonitor's two series and how an event becomes their rows.

One run's history is a step series (loss and lr per optimizer step, and each loss term
and optimizer's lr when the records name them) and an epoch
series (the per-epoch metrics). The monitor keeps one pair for the run it follows and,
when it shows a race, one pair per run of the race (``_race.RaceLane``): both fill
them with the functions below, so a run looks the same wherever it is drawn.
"""

from __future__ import annotations

import math
from typing import Any

from ..engine.events import EpochEnded, StepRecord
from ._series import BucketSeries, ColumnSpec, Reduce

__all__ = [
    "MONITOR_KEY",
    "NOT_METRICS",
    "STEP_PARTS",
    "STEP_PREFIXES",
    "add_epoch",
    "add_steps",
    "epoch_rows",
    "epoch_series",
    "epoch_values",
    "finite",
    "step_series",
]

# Counts, not metrics: kept out of the epoch series (the table and the chart).
NOT_METRICS = frozenset({"samples", "valid", "skipped_updates"})
MONITOR_KEY = "monitor"  # epoch series column: the monitored value of each epoch


def finite(value: Any) -> float | None:
    """``value`` as a float, or None when it is missing or not a finite number."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def step_series(capacity: int) -> BucketSeries:
    return BucketSeries(
        [
            ColumnSpec("first", "int32", Reduce.FIRST),
            ColumnSpec("step", "int32", Reduce.LAST),
            ColumnSpec("loss", "float32", Reduce.MEAN),
            ColumnSpec("lr", "float32", Reduce.LAST),
            ColumnSpec("n", "int32", Reduce.SUM),
            ColumnSpec("bad", "int32", Reduce.SUM),
        ],
        capacity=capacity + capacity % 2,
        bad="bad",
    )


def epoch_series(capacity: int) -> BucketSeries:
    return BucketSeries(
        [
            ColumnSpec("first", "int32", Reduce.FIRST),
            ColumnSpec("epoch", "int32", Reduce.LAST),
            ColumnSpec("step", "int32", Reduce.LAST),
            ColumnSpec("lr", "float32", Reduce.LAST),
            ColumnSpec("seconds", "float32", Reduce.MEAN),
            ColumnSpec("improved", "int32", Reduce.MAX),
            ColumnSpec("n", "int32", Reduce.SUM),
        ],
        capacity=capacity + capacity % 2,
    )


# Step series columns of the records' named parts: an objective's loss terms, a
# network's auxiliary terms (drawn beside the total loss), each optimizer's learning rate.
STEP_PARTS = (
    ("terms", "term.", Reduce.MEAN),
    ("aux", "aux.", Reduce.MEAN),
    ("lrs", "lr.", Reduce.LAST),
)
STEP_PREFIXES = tuple(prefix for _, prefix, _ in STEP_PARTS)


def _named_columns(series: BucketSeries, records: tuple[StepRecord, ...]) -> dict[str, list]:
    """``term.<name>`` / ``aux.<name>`` / ``lr.<name>`` columns of these records (NaN where
    a record lacks the name); a name seen for the first time gets its column."""
    out: dict[str, list[float]] = {}
    for attr, prefix, reduce in STEP_PARTS:
        for i, record in enumerate(records):
            for name, value in (getattr(record, attr) or {}).items():
                key = prefix + str(name)
                col = out.get(key)
                if col is None:
                    if not series.has(key):
                        series.add_value(key, reduce)
                    col = out[key] = [math.nan] * len(records)
                col[i] = math.nan if value is None else float(value)
    return out


def add_steps(series: BucketSeries, records: tuple[StepRecord, ...]) -> list[float]:
    """Append one row per step record; returns the losses (NaN where there is none)."""
    steps = [int(r.step) for r in records]
    losses = [math.nan if r.loss is None else float(r.loss) for r in records]
    series.extend(
        {
            "first": steps,
            "step": steps,
            "loss": losses,
            "lr": [math.nan if r.lr is None else float(r.lr) for r in records],
            **_named_columns(series, records),
        }
    )
    return losses


def epoch_values(event: EpochEnded) -> dict[str, float]:
    """An epoch's values as flat series columns: ``train.<name>`` / ``val.<name>`` for
    record fields, registry metrics, a network's auxiliary terms and an objective's loss
    terms alike (``metrics``, ``aux`` and ``terms`` are flattened: ``train.load_balance``,
    ``train.kl``; a term named like a field is ``train.term.<name>``; counts are left out), and
    ``monitor`` for a declared monitor's value (NaN: unavailable)."""
    out: dict[str, float] = {}
    for part, values in (("train", event.train), ("val", event.val)):
        for name, value in (values or {}).items():
            if name in NOT_METRICS or name == "extra":
                continue
            if name in ("metrics", "aux") and isinstance(value, dict):  # aux: a MoE's term
                for metric, v in value.items():
                    out[f"{part}.{metric}"] = math.nan if v is None else float(v)
                continue
            if name == "terms" and isinstance(value, dict):  # an objective's loss terms
                for term, v in value.items():
                    # a term named like a record field ("loss") never hides the total
                    key = f"{part}.term.{term}" if term in values else f"{part}.{term}"
                    out[key] = math.nan if v is None else float(v)
                continue
            out.setdefault(f"{part}.{name}", math.nan if value is None else float(value))
    selection = getattr(event, "selection", None)
    if selection:
        value = selection.get("value")
        out[MONITOR_KEY] = math.nan if value is None else float(value)
    return out


def add_epoch(series: BucketSeries, event: EpochEnded) -> None:
    """Append the epoch's row; a metric seen for the first time gets its column."""
    row: dict[str, Any] = {
        "first": [int(event.epoch)],
        "epoch": [int(event.epoch)],
        "step": [int(event.step)],
        "lr": [math.nan if event.lr is None else float(event.lr)],
        "seconds": [math.nan if event.seconds is None else float(event.seconds)],
        "improved": [int(bool(event.improved))],
    }
    for key, value in epoch_values(event).items():
        if not series.has(key):
            series.add_value(key)
        row[key] = [value]
    series.extend(row)


def epoch_rows(series: BucketSeries) -> list[dict[str, Any]]:
    """The rows of an epoch series as dicts, oldest first (``TrainingMonitor.epoch_rows``
    says what each holds); call it under the lock the series changes under."""
    cols = {name: series.column(name).tolist() for name in series.fields}
    metrics = series.values
    rows = []
    for i in range(len(cols["epoch"])):
        train = {m[6:]: finite(cols[m][i]) for m in metrics if m.startswith("train.")}
        val = {m[4:]: finite(cols[m][i]) for m in metrics if m.startswith("val.")}
        row = {
            "epoch": cols["epoch"][i],
            "step": cols["step"][i],
            "lr": finite(cols["lr"][i]),
            "seconds": finite(cols["seconds"][i]),
            "improved": bool(cols["improved"][i]),
            "train": {k: v for k, v in train.items() if v is not None},
            "val": {k: v for k, v in val.items() if v is not None} or None,
        }
        if MONITOR_KEY in cols:  # a declared monitor: its value (None: unavailable)
            row["monitor"] = finite(cols[MONITOR_KEY][i])
        rows.append(row)
    return rows
