"""Content-addressed runs: ids, the run directory, and ``NNRun``.

``runs/<id>/`` holds ``run.yaml`` (the hashed configuration), ``metadata.yaml``
(environment, seed, status), ``metrics.jsonl`` (the event log) and ``checkpoints/``.
The id is the MD5 of the canonical JSON of ``run.yaml``: exactly the values that change
the result, the data's identity included; paths, progress and logging stay out.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._io import atomic_write_yaml, read_yaml
from .enums import RunStatus
from .events import EpochEnded, RunFinished, StepMetrics, StepRecord, event_from_json
from .metrics import EDP
from .precision import ResolvedPrecision

__all__ = ["IDP", "NNRun", "canonical_json", "resolve_runs_root", "run_id_for"]

FORMAT_VERSION = 1


def resolve_runs_root(runs_root: str | os.PathLike[str] | None = None) -> Path:
    """Explicit root > ``NNX_RUNS_ROOT`` > ``./runs``."""
    if runs_root is not None:
        return Path(runs_root)
    return Path(os.environ.get("NNX_RUNS_ROOT", "runs"))


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True)


def run_id_for(config: dict[str, Any]) -> str:
    return hashlib.md5(canonical_json(config).encode(), usedforsecurity=False).hexdigest()


def reserve_run_dir(root: Path, run_id: str, overwrite: bool) -> Path:
    """Create ``root/<id>`` exclusively; an existing run is refused unless overwriting."""
    path = root / run_id
    if path.exists() and not overwrite:
        raise FileExistsError(existing_run_message(root, run_id))
    root.mkdir(parents=True, exist_ok=True)
    if path.exists():
        # Move aside first so readers never see a half-deleted run, then remove.
        trash = root / f".{run_id}.replaced-{uuid.uuid4().hex[:8]}"
        os.rename(path, trash)
        shutil.rmtree(trash, ignore_errors=True)
    path.mkdir()  # fails if another process reserved the same id meanwhile
    (path / "checkpoints").mkdir()
    return path


def existing_run_message(root: Path, run_id: str) -> str:
    return (
        f"run {run_id} already exists under {root}/ (same configuration and data); "
        f"pass NNTrainParams(overwrite_existing=True) to replace it, or delete "
        f"{root / run_id}"
    )


def environment_metadata(device: str, seed: int) -> dict[str, Any]:
    import numpy
    import safetensors
    import torch

    from .._version import __version__

    return {
        "nnx_lab": __version__,
        "torch": str(torch.__version__),
        "numpy": str(numpy.__version__),
        "safetensors": str(safetensors.__version__),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": device,
        "seed": seed,
    }


@dataclass
class IDP:
    """Iteration data point: one optimizer step, with validation at epoch ends."""

    iteration: int
    epoch: int
    batch: int
    lr: float
    train_edp: EDP
    val_edp: EDP | None = None

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
            ),
        )


@dataclass
class NNRun:
    """A run: its id, directory, history (``idps``), status and records."""

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

    @property
    def parent_run_id(self) -> str | None:
        resume = self.config.get("train", {}).get("resume")
        return resume["from_run_id"] if resume else None

    @property
    def net_params(self) -> Any:
        from .params import NNParams

        return NNParams.from_json(self.config["net"])

    @property
    def model_params(self) -> Any:
        from .params import NNModelParams

        return NNModelParams.from_json(self.config["model"])

    def checkpoint_dir(self) -> Path:
        return self.run_dir / "checkpoints"

    def __repr__(self) -> str:
        return (
            f"NNRun(id={self.id!r}, status={self.status.value!r}, steps={len(self.idps)}, "
            f"epochs={len(self.epochs)}, dir={str(self.run_dir)!r})"
        )

    @classmethod
    def load(cls, id: str, runs_root: str | os.PathLike[str] | None = None) -> NNRun:
        """Rehydrate a run (config, metadata, idps) from its directory."""
        root = resolve_runs_root(runs_root)
        run_dir = root / id
        if not (run_dir / "run.yaml").is_file():
            raise FileNotFoundError(
                f"no run {id!r} under {root.resolve()}/ (searched "
                f"{run_dir / 'run.yaml'}); check the id, or pass "
                "runs_root= where the run was written"
            )
        config = read_yaml(run_dir / "run.yaml")
        metadata = read_yaml(run_dir / "metadata.yaml") or {}
        run = cls(
            id=id,
            run_dir=run_dir,
            config=config,
            metadata=metadata,
            status=RunStatus(metadata.get("status", "created")),
            resume_status=metadata.get("resume_status"),
            error=metadata.get("error"),
        )
        if metadata.get("precision"):
            run.precision = ResolvedPrecision.from_record(metadata["precision"])
        log = run_dir / "metrics.jsonl"
        if log.is_file():
            run.replay(read_events(log))
        return run

    def replay(self, events: Any) -> None:
        """Fill idps and epochs from events (the same path a live run takes)."""
        by_step: dict[int, IDP] = {p.iteration: p for p in self.idps}
        for ev in events:
            if isinstance(ev, StepMetrics):
                for r in ev.records:
                    idp = IDP.from_record(r)
                    by_step[r.step] = idp
                    self.idps.append(idp)
            elif isinstance(ev, EpochEnded):
                self.epochs.append(ev.to_json())
                if ev.val is not None and ev.step in by_step:
                    by_step[ev.step].val_edp = EDP.from_json({**ev.val})
            elif isinstance(ev, RunFinished):
                self.status = RunStatus(ev.status)
                self.error = ev.error


def read_events(path: Path) -> list[Any]:
    """Parse a ``metrics.jsonl``; a torn last line (a writer died mid-line) is skipped."""
    events = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.endswith("\n"):
                break
            events.append(event_from_json(json.loads(line)))
    return events


def write_metadata(run: NNRun) -> None:
    atomic_write_yaml(run.run_dir / "metadata.yaml", run.metadata)
