"""Checkpoints: a ``.safetensors`` file for tensors plus a ``.json`` sidecar for the rest.

``checkpoints/<type>.json`` is the commit point. A write puts the tensors in a new,
uniquely named ``<type>-<step>-<tag>.safetensors`` (temp file + ``os.replace``), then
replaces the sidecar, which names that file and its SHA-256, and only then removes the
previous tensors file. A process killed at any point leaves the previous checkpoint
whole; a damaged tensors file is refused on load, naming the file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as st_load

from ..runs import FORMAT_VERSION, canonical_json, resolve_runs_root, run_dir
from ._codec import join_state, split_state
from ._io import atomic_write_bytes, file_lock, read_json
from .enums import Checkpoints, coerce_enum
from .params import NNModelParams, NNParams
from .runs import NNRun
from .safetensors_io import encode as st_save
from .training_state import TrainingState

__all__ = ["CheckpointCorruptError", "NNCheckpoint"]

_MODEL = "model."


class CheckpointCorruptError(RuntimeError):
    """A checkpoint file does not match the checksum its sidecar recorded."""


def _run_dir(run: Any, runs_root: Any) -> tuple[str, Path]:
    if isinstance(run, NNRun):
        return run.id, run.run_dir
    return run, run_dir(resolve_runs_root(runs_root), run, "run")


def write_checkpoint(
    run_dir: Path,
    types: Sequence[str],
    *,
    model_state: dict[str, torch.Tensor],
    training_state: TrainingState | dict[str, Any] | None,
    meta: dict[str, Any],
) -> list[Path]:
    """Write one or more checkpoint types (last/best) of the same state atomically.

    The tensors are serialized once; a second type gets a hard link to the same bytes
    under its own name, so LAST and BEST of one epoch cost one write.
    """
    tensors: dict[str, torch.Tensor] = {
        _MODEL + k: v.detach().cpu().contiguous() for k, v in model_state.items()
    }
    state_json = None
    if isinstance(training_state, TrainingState):
        training_state = training_state.to_tree()
    if training_state is not None:
        state_json = split_state(training_state, "state", tensors)
    payload = st_save(tensors)
    digest = hashlib.sha256(payload).hexdigest()
    folder = run_dir / "checkpoints"
    tag = f"{meta.get('step', 0):08d}-{uuid.uuid4().hex[:8]}"
    sidecars = []
    with file_lock(run_dir / ".lock"):
        first: Path | None = None
        for type_ in types:
            sidecar = folder / f"{type_}.json"
            old = _referenced_file(sidecar)
            name = f"{type_}-{tag}.safetensors"
            if first is None:
                atomic_write_bytes(folder / name, payload)
                first = folder / name
            else:
                _link_or_copy(first, folder / name)
            atomic_write_bytes(
                sidecar,
                _sidecar_bytes(
                    {
                        "format": FORMAT_VERSION,
                        "type": type_,
                        "tensors_file": name,
                        "sha256": digest,
                        "weights_only": training_state is None,
                        "training_state": state_json,
                        **meta,
                    }
                ),
            )
            if old is not None and old != name:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(folder / old)
            sidecars.append(sidecar)
        _remove_orphans(folder)
    return sidecars


def _sidecar_digest(sidecar: dict[str, Any]) -> str:
    body = {k: v for k, v in sidecar.items() if k != "sidecar_sha256"}
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def _sidecar_bytes(sidecar: dict[str, Any]) -> bytes:
    """The sidecar's JSON with its own checksum; keys keep their order (lossless state)."""
    sidecar = {**sidecar, "sidecar_sha256": _sidecar_digest(sidecar)}
    return (json.dumps(sidecar, separators=(",", ":"), allow_nan=True) + "\n").encode()


def _read_sidecar(path: Path) -> dict[str, Any]:
    """Parse and verify a sidecar; a torn or edited one raises CheckpointCorruptError."""
    try:
        sidecar = read_json(path)
    except ValueError as exc:
        raise CheckpointCorruptError(
            f"{path} is corrupted or truncated ({exc}); the checkpoint was not loaded. "
            "Resume from the other checkpoint type, or retrain"
        ) from None
    recorded = sidecar.get("sidecar_sha256") if isinstance(sidecar, dict) else None
    if not isinstance(sidecar, dict) or "tensors_file" not in sidecar or "sha256" not in sidecar:
        raise CheckpointCorruptError(
            f"{path} is not a checkpoint sidecar (no tensors_file/sha256); it was not loaded"
        )
    if recorded is not None and recorded != _sidecar_digest(sidecar):
        raise CheckpointCorruptError(
            f"{path} is corrupted: its content does not match the SHA-256 it recorded; the "
            "checkpoint was not loaded. Resume from the other checkpoint type, or retrain"
        )
    return sidecar


def _remove_orphans(folder: Path) -> None:
    """Delete tensors files no sidecar names and temp files of writes that were killed.

    Runs under the run's lock, so no other writer's temp file can be caught.
    """
    referenced = set()
    for sidecar in folder.glob("*.json"):
        name = _referenced_file(sidecar)
        if name is not None:
            referenced.add(name)
    for path in folder.iterdir():
        orphan = path.suffix == ".safetensors" and path.name not in referenced
        if orphan or (path.name.startswith(".") and path.name.endswith(".tmp")):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def _link_or_copy(src: Path, dst: Path) -> None:
    tmp = dst.with_name(f".{dst.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    try:
        os.link(src, tmp)
    except OSError:  # a filesystem without hard links
        shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def _referenced_file(sidecar: Path) -> str | None:
    try:
        return read_json(sidecar).get("tensors_file")
    except (FileNotFoundError, ValueError):
        return None


@dataclass
class NNCheckpoint:
    """A loaded checkpoint: weights, the model's recipe, and (optionally) training state."""

    run_id: str
    type: Checkpoints
    path: Path
    epoch: int
    step: int
    net_params: Any
    model_params: Any
    model_state: dict[str, torch.Tensor]
    sidecar: dict[str, Any]
    _tensors: dict[str, torch.Tensor]

    @property
    def weights_only(self) -> bool:
        return bool(self.sidecar.get("weights_only"))

    def training_state_tree(self) -> dict[str, Any] | None:
        """The training state as saved (nested dicts and tensors), not validated."""
        if self.sidecar.get("training_state") is None:
            return None
        return join_state(self.sidecar["training_state"], self._tensors)

    def training_state(self) -> TrainingState | None:
        """The typed training state (None for a weights-only checkpoint); validated."""
        tree = self.training_state_tree()
        return None if tree is None else TrainingState.from_tree(tree, source=str(self.path))

    @classmethod
    def load(
        cls, run: Any, type: Checkpoints | str = Checkpoints.LAST, runs_root: Any = None
    ) -> NNCheckpoint:
        """Load LAST or BEST of a run (an NNRun or an id); verifies the checksum first."""
        type_ = coerce_enum(Checkpoints, type, "type")
        run_id, run_dir = _run_dir(run, runs_root)
        sidecar_path = run_dir / "checkpoints" / f"{type_.value}.json"
        if not sidecar_path.is_file():
            raise FileNotFoundError(
                f"run {run_id} has no {type_.name} checkpoint (looked for {sidecar_path}); "
                "check the run id and runs_root, or train the run first"
            )
        with file_lock(run_dir / ".lock"):
            sidecar = _read_sidecar(sidecar_path)
            tensors_path = sidecar_path.parent / sidecar["tensors_file"]
            try:
                payload = tensors_path.read_bytes()
            except FileNotFoundError:
                raise CheckpointCorruptError(
                    f"{tensors_path} named by {sidecar_path} is missing; the checkpoint "
                    "cannot be loaded"
                ) from None
        digest = hashlib.sha256(payload).hexdigest()
        if digest != sidecar["sha256"]:
            raise CheckpointCorruptError(
                f"{tensors_path} is corrupted or truncated: its SHA-256 {digest[:12]}... does "
                f"not match {sidecar['sha256'][:12]}... recorded in {sidecar_path}; it was not "
                "loaded. Resume from the other checkpoint type, or retrain"
            )
        tensors = st_load(payload)
        return cls(
            run_id=run_id,
            type=type_,
            path=sidecar_path,
            epoch=int(sidecar.get("epoch", 0)),
            step=int(sidecar.get("step", 0)),
            net_params=NNParams.from_json(sidecar["net_params"]),
            model_params=NNModelParams.from_json(sidecar["model_params"]),
            model_state={k[len(_MODEL) :]: v for k, v in tensors.items() if k.startswith(_MODEL)},
            sidecar=sidecar,
            _tensors=tensors,
        )

    @classmethod
    def load_with_training_state(
        cls, run: Any, type: Checkpoints | str = Checkpoints.LAST, runs_root: Any = None
    ) -> tuple[Any, Any]:
        """``(checkpoint, training_state)``, or ``(None, None)`` for a run never written.

        Side-effect free for a missing run: no directory or lock file is created.
        """
        type_ = coerce_enum(Checkpoints, type, "type")
        _, run_dir = _run_dir(run, runs_root)
        if not (run_dir / "checkpoints" / f"{type_.value}.json").is_file():
            return None, None
        ckpt = cls.load(run, type_, runs_root)
        return ckpt, ckpt.training_state()

    @classmethod
    def load_training_state(
        cls, run: Any, type: Checkpoints | str = Checkpoints.LAST, runs_root: Any = None
    ) -> TrainingState | None:
        return cls.load(run, type, runs_root).training_state()
