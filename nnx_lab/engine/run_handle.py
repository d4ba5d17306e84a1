"""Content-addressed runs: ids, the run directory, and ``NNRun``.

``runs/<id>/`` holds ``run.yaml`` (the hashed configuration), ``metadata.yaml``
(environment, seed, status), ``metrics.jsonl`` (the event log) and ``checkpoints/``.
The id is the MD5 of the canonical JSON of ``run.yaml``: exactly the values that change
the result, the data's identity included; paths, progress and logging stay out. The
format itself (ids, paths, the log reader) is ``nnx_lab.runs``, which needs no torch.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..runs import (
    FORMAT_VERSION,
    JsonlReader,
    RunRecordError,
    effective_status,
    event_from_line,
    is_run_id,
    read_provenance,
    read_record,
    resolve_runs_root,
    run_dir,
    run_id_for,
    write_run_metadata,
)
from .edp import EDP
from .enums import Nets, RunStatus
from .events import EpochEnded, Event, RunFinished, StepMetrics, StepRecord
from .net_kinds import net_params_from_json
from .params import NNModelParams
from .precision import ResolvedPrecision
from .selection import MonitorRecord

__all__ = [
    "FORMAT_VERSION",
    "IDP",
    "NNRun",
    "iter_events",
    "read_events",
    "run_id_for",
    "saved_line",
]


_PLATFORM: dict[str, str] = {}


def environment_metadata(device: str, seed: int) -> dict[str, Any]:
    # Imported here: NNRun.load and this module's readers need no torch.
    import numpy
    import safetensors
    import torch

    from .._version import __version__

    if not _PLATFORM:  # platform.platform() spawns a subprocess on some systems: once
        _PLATFORM.update(python=platform.python_version(), platform=platform.platform())
    return {
        "nnx_lab": __version__,
        "torch": str(torch.__version__),
        "numpy": str(numpy.__version__),
        "safetensors": str(safetensors.__version__),
        **_PLATFORM,
        "device": device,
        "seed": seed,
    }


@dataclass
class IDP:
    """Iteration data point: one optimizer step, with validation at epoch ends.

    The last step of an epoch also holds ``train_summary`` (the whole training epoch,
    full-epoch denominators: an ``EDP``) and, with a declared monitor, ``selection``
    (its ``MonitorRecord`` for the epoch).
    """

    iteration: int
    epoch: int
    batch: int
    lr: float | None  # None: several optimizers (the Trainer's; see the log's lrs)
    train_edp: EDP
    val_edp: EDP | None = None
    train_summary: EDP | None = None
    selection: MonitorRecord | None = None

    @classmethod
    def from_record(cls, r: StepRecord) -> IDP:
        return cls(
            r.step,
            r.epoch,
            r.batch,
            r.lr,
            EDP(
                loss=r.loss,
                error=r.error,
                accuracy=r.accuracy,
                precision=r.precision,
                recall=r.recall,
                f1=r.f1,
                samples=r.samples,
                valid=r.valid,
                metrics=dict(r.metrics or {}),
                extra=dict(r.extra or {}),
            ),
        )


@dataclass
class NNRun:
    """A run: its id, directory, history (``idps``), status and records.

    While it trains, the run is a sink of the loop's events: its history grows from the
    same events a reloaded run replays from the log.
    """

    id: str
    run_dir: Path
    config: dict[str, Any]
    status: RunStatus = RunStatus.CREATED
    idps: list[IDP] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    precision: ResolvedPrecision | None = None
    resume_status: dict[str, Any] | None = None
    epochs: list[dict[str, Any]] = field(default_factory=list)  # EpochEnded as JSON
    error: str | None = None
    provenance: Any = None  # nnx_lab.provenance.Provenance; None: trained without a manifest

    @property
    def parent_run_id(self) -> str | None:
        resume = self.config.get("train", {}).get("resume")
        return resume["from_run_id"] if resume else None

    @property
    def net_params(self) -> Any:
        net, kind = self.config["net"], self.config.get("model", {}).get("net")
        if isinstance(kind, dict):
            return None  # an own module: its recipe is model_params.net
        member = next((n for n in Nets if n.value == kind), Nets.FEED_FWD)
        return net_params_from_json(member, net)

    @property
    def model_params(self) -> Any:
        return NNModelParams.from_json(self.config["model"])

    def __repr__(self) -> str:
        return (
            f"NNRun(id={self.id!r}, status={self.status.value!r}, steps={len(self.idps)}, "
            f"epochs={len(self.epochs)}, dir={str(self.run_dir)!r})"
        )

    # -- the history, as a sink --------------------------------------------------------
    def on_step_metrics(self, event: StepMetrics) -> None:
        self.idps.extend(IDP.from_record(r) for r in event.records)

    def on_epoch_ended(self, event: EpochEnded) -> None:
        self.epochs.append(event.to_json())
        if self.idps and self.idps[-1].iteration == event.step:
            last = self.idps[-1]
            if event.val is not None:
                last.val_edp = EDP.from_json(event.val)
            if event.train:
                last.train_summary = _summary(event.train)
            last.selection = MonitorRecord.from_json(event.selection)

    def on_run_finished(self, event: RunFinished) -> None:
        self.status = RunStatus(event.status)
        self.error = event.error
        self.metadata.update(
            status=event.status,
            error=event.error,
            stop_reason=event.stop_reason,
            finished_at=event.time,
            steps=event.steps,
            epochs_completed=event.epochs_completed,
        )

    def replay(self, events: Any) -> None:
        """Fill idps and epochs from events, as a live run does."""
        for ev in events:
            hook = getattr(self, ev.hook, None)
            if hook is not None:
                hook(ev)

    @property
    def salt(self) -> str | None:
        """The ``train(salt=...)`` folded into this run's id (None without one)."""
        salt = self.config.get("salt")
        return salt if isinstance(salt, str) else None

    def checkpoints(self, root: str | os.PathLike[str] | None = None) -> list[Any]:
        """NNx's phase checkpoints: ``[FIRST, Q1, Q2, Q3, LAST]``, each an
        ``NNCheckpoint`` or None where this run wrote none (a short run has no Q1:
        docs/runs.md#phase-checkpoints). BEST is left out, as in NNx: it duplicates
        whichever of these won; ``NNCheckpoint.load(run, Checkpoints.BEST)`` loads it.
        ``root``: the runs root to read the run from (default: the run's own folder)."""
        from .phases import run_checkpoints

        return run_checkpoints(self, root)

    @staticmethod
    def all(root: str | os.PathLike[str] | None = None) -> list[NNRun]:
        """Every run under the runs root (``NNRun.load`` of each folder named by a run id
        that holds a ``run.yaml``), in id order; ``[]`` when there is no runs root.
        Other entries (files, links, lock files) are passed over; a damaged run raises
        as ``NNRun.load`` does. ``nnx_lab.list_runs()`` lists without loading."""
        base = resolve_runs_root(root)
        if not base.is_dir():
            return []
        ids = sorted(
            e.name
            for e in os.scandir(base)
            if is_run_id(e.name)
            and e.is_dir(follow_symlinks=False)
            and os.path.isfile(os.path.join(e.path, "run.yaml"))
        )
        return [NNRun.load(i, base) for i in ids]

    @classmethod
    def load(cls, id: str, runs_root: str | os.PathLike[str] | None = None) -> NNRun:
        """Rehydrate a run (config, metadata, idps) from its directory.

        The folder must be the runs root's own child (a link out is refused,
        ``ValueError``); ``run.yaml`` and ``metadata.yaml`` pass their schemas and the log
        its line shape (``RunRecordError`` / ``LogDamagedError``, each also a
        ``SchemaError`` naming the file, the field and the value); the log is replayed as
        a stream."""
        root = resolve_runs_root(runs_root)
        path = run_dir(root, id, "id")
        if not (path / "run.yaml").is_file():
            raise FileNotFoundError(
                f"no run {id!r} under {root.resolve()}/ (searched "
                f"{path / 'run.yaml'}); check the id, or pass "
                "runs_root= where the run was written"
            )
        config = read_record(path / "run.yaml")
        if run_id_for(config) != id:
            raise RunRecordError(
                path / "run.yaml", f"it does not hash to the run id {id} (it was edited)"
            )
        meta_path = path / "metadata.yaml"
        metadata = read_record(meta_path) if os.path.lexists(meta_path) else {}
        status = effective_status(metadata)
        if status not in RunStatus.__members__.values():
            raise RunRecordError(path / "metadata.yaml", f"unknown status {status!r}")
        run = cls(
            id=id,
            run_dir=path,
            config=config,
            metadata=metadata,
            status=RunStatus(status),
            resume_status=metadata.get("resume_status"),
            error=metadata.get("error"),
        )
        if metadata.get("precision"):
            run.precision = ResolvedPrecision.from_record(metadata["precision"])
        run.provenance = read_provenance(path, id)
        log = path / "metrics.jsonl"
        if os.path.lexists(log):  # a link is refused by the reader, not passed over
            run.replay(iter_events(log))
        run.status = RunStatus(status)  # the log's last word may predate a dead writer
        return run


def _summary(train: dict[str, Any]) -> EDP:
    """The epoch's training summary as an EDP (loss None: no target was scored)."""
    return EDP(
        loss=train.get("loss"),  # type: ignore[arg-type]
        error=train.get("error"),
        accuracy=train.get("accuracy"),
        precision=train.get("precision"),
        recall=train.get("recall"),
        f1=train.get("f1"),
        samples=int(train.get("samples") or 0),
        valid=train.get("valid"),
        metrics=dict(train.get("metrics") or {}),
        extra=dict(train.get("extra") or {}),
    )


def iter_events(path: Path) -> Iterator[Event]:
    """The events of a ``metrics.jsonl``, read as a stream; a torn last line (a writer
    died mid-line) is skipped, any other damage is a ``LogDamagedError`` naming the file,
    the line and the field."""
    for _, event in JsonlReader(path, decode=event_from_line).iter_numbered():
        yield event


def read_events(path: Path) -> list[Event]:
    """The events of a ``metrics.jsonl`` (``iter_events``, as a list)."""
    return list(iter_events(path))


def saved_line(run_dir: str | os.PathLike[str]) -> str:
    """The line ``train()`` ends with, as NNx prints it: the run's folder relative to the
    working directory (``/`` separators) when it lies under it, else absolute."""
    path = Path(run_dir).resolve()
    try:
        shown = path.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return f"Run saved to {path.as_posix()}"
    return f"Run saved to {shown} (relative to the working directory)"


def write_metadata(run: NNRun) -> None:
    """Rewrite the run's ``metadata.yaml``, keeping the name a rename gave it since."""
    write_run_metadata(run.run_dir, run.metadata)
