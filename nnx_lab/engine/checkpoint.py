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
import stat
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as st_load

from ..errors import CheckpointCorruptError
from ..runs import (
    FORMAT_VERSION,
    TENSORS_FILE,
    CheckpointFileError,
    SchemaError,
    SidecarFile,
    atomic_write_bytes,
    canonical_json,
    check_shape,
    check_tensors_header,
    file_lock,
    parse_json,
    read_file,
    read_record,
    resolve_runs_root,
    run_dir,
    run_id_for,
    state_problem,
)
from ._codec import join_state, split_state
from .checkpoint_files import forget_sidecar, remember_sidecar
from .checkpoint_files import link_or_copy as _link_or_copy
from .checkpoint_files import referenced_file as _referenced_file
from .checkpoint_files import remove_orphans as _remove_orphans
from .digest import Digest
from .enums import Checkpoints, Nets, coerce_enum
from .net_kinds import NET_PARAMS
from .params import NNModelParams, NNParams
from .run_handle import NNRun
from .safetensors_io import encode as st_save
from .training_state import TrainingState
from .write_faults import kill_point

__all__ = ["CheckpointCorruptError", "NNCheckpoint"]

_MODEL = "model."


# What a sidecar may name: a plain file of this folder, as the writer names them. Any
# other name (a path, "..", another file) is refused on read and never deleted.
_TENSORS_FILE = TENSORS_FILE


def _checkpoint_folder(run_dir: Path) -> Path:
    """``run_dir/checkpoints``, refused when it is a link leading out of the run."""
    folder = run_dir / "checkpoints"
    if folder.is_symlink() or (
        folder.exists() and folder.resolve() != run_dir.resolve() / "checkpoints"
    ):
        raise CheckpointCorruptError(
            f"{folder} is a link; checkpoints are only read and written inside the run's own "
            "folder. Replace the link with a folder"
        )
    return folder


def _run_dir(run: Any, runs_root: Any) -> tuple[str, Path]:
    if isinstance(run, NNRun):
        return run.id, run.run_dir
    return run, run_dir(resolve_runs_root(runs_root), run, "run")


def checkpoint_folder(run: Any, runs_root: Any = None) -> Path:
    """The checkpoints folder of a run (an NNRun, or an id under ``runs_root``)."""
    return _checkpoint_folder(_run_dir(run, runs_root)[1])


def write_checkpoint(
    run_dir: Path,
    types: Sequence[str],
    *,
    model_state: dict[str, torch.Tensor],
    training_state: TrainingState | dict[str, Any] | None,
    meta: dict[str, Any],
) -> list[Path]:
    """Write one or more checkpoint types (last, best, a phase) of one state atomically.

    The tensors are serialized once; a second type gets a hard link to the same bytes
    under its own name, so LAST and BEST of one epoch cost one write. The types are
    committed in the order given (each sidecar is one commit point): the policy puts
    LAST first, so a kill between leaves a LAST that names itself as BEST (docs/resume.md).
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
    digest = Digest(payload)  # hashed while the tensors file is written
    folder = _checkpoint_folder(run_dir)
    tag = f"{meta.get('step', 0):08d}-{uuid.uuid4().hex[:8]}"
    sidecars = []
    with file_lock(run_dir / ".lock"):
        kill_point("checkpoint.begin")
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
            kill_point(f"checkpoint.{type_}.tensors")
            _commit_sidecar(
                sidecar,
                _sidecar_bytes(
                    {
                        "format": FORMAT_VERSION,
                        "type": type_,
                        "tensors_file": name,
                        "sha256": digest.hexdigest(),
                        "weights_only": training_state is None,
                        "training_state": state_json,
                        **meta,
                    }
                ),
                name,
            )
            kill_point(f"checkpoint.{type_}.sidecar")
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


_FIX = "the checkpoint was not loaded. Resume from the other checkpoint type, or retrain"
# How often a reader starts over when a writer commits a newer checkpoint meanwhile.
_READ_ATTEMPTS = 5


def _read_sidecar(path: Path, type_: str, run_id: str) -> tuple[dict[str, Any], SidecarFile]:
    """Parse and verify the ``type_`` sidecar of run ``run_id``: its plain JSON (what
    ``NNCheckpoint.sidecar`` holds) and its checked shape.

    The bytes pass the strict shape first (``SidecarFile``: sizes, nesting, types,
    ranges, the tensors file a plain name of this folder, a well-formed training state).
    Then a sidecar without its own checksum or whose content does not match it, one of
    another type (BEST copied over LAST) or of another run (copied in from elsewhere) is
    refused. Every refusal is a ``CheckpointFileError`` (a CheckpointCorruptError).
    """

    def refuse(field: str, reason: str, text: str, value: Any = None) -> CheckpointFileError:
        return CheckpointFileError(path, field, reason, value=value, fix=_FIX, text=text)

    data = read_file(path, CheckpointFileError, missing_fix=_FIX)
    try:
        sidecar = parse_json(data, path)
    except SchemaError as exc:
        text = f"{path} is corrupted or truncated ({exc.reason}); {_FIX}"
        raise refuse("", exc.reason, text) from None
    if not isinstance(sidecar, dict):
        what = type(sidecar).__name__
        raise refuse("", f"a JSON {what}", f"{path} is not a checkpoint sidecar; {_FIX}")
    doc = check_shape(sidecar, SidecarFile, path, CheckpointFileError, fix=_FIX)
    if doc.sidecar_sha256 is None:
        raise refuse(
            "sidecar_sha256",
            "missing",
            f"{path} carries no checksum of its own (sidecar_sha256); {_FIX}",
        )
    if doc.sidecar_sha256 != _sidecar_digest(sidecar):
        raise refuse(
            "sidecar_sha256",
            "does not match the content",
            f"{path} is corrupted: its content does not match the SHA-256 it recorded; {_FIX}",
        )
    if doc.type != type_:
        raise refuse(
            "type",
            f"is not {type_!r}",
            f"{path} is a {doc.type.upper()} checkpoint, not {type_.upper()} (was it copied "
            f"over?); {_FIX}",
            doc.type,
        )
    if doc.run_id != run_id:
        raise refuse(
            "run_id",
            f"is not {run_id}",
            f"{path} belongs to run {doc.run_id!r}, not {run_id} (was it copied in from "
            f"another run?); {_FIX}",
            doc.run_id,
        )
    return sidecar, doc


def _read_tensors(path: Path) -> bytes | None:
    """The bytes of a plain tensors file, or None when it is gone. Opened without
    following a link and without blocking (a pipe in its place never hangs the reader)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointFileError(
            path, "", f"cannot be opened as a plain file ({exc.strerror})", fix=_FIX
        ) from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise CheckpointFileError(path, "", "is not a plain file", fix=_FIX)
        return fh.read()


def _read_committed(path: Path, type_: str, run_id: str) -> tuple[dict, SidecarFile, bytes]:
    """A sidecar and the tensors it commits, read without any lock (a reader never
    writes, so a read-only runs root loads).

    It stays consistent with a writer because the writer never changes a file in place:
    it writes a new, uniquely named tensors file, replaces the sidecar atomically, and
    only then removes the tensors file the old sidecar named. A reader that opened the
    old file keeps reading it (and its SHA-256 matches the old sidecar it read); one that
    finds it gone re-reads the sidecar, which by then names the new file.
    """
    for _ in range(_READ_ATTEMPTS):
        sidecar, doc = _read_sidecar(path, type_, run_id)
        tensors_path = path.parent / doc.tensors_file
        payload = _read_tensors(tensors_path)
        if payload is not None:
            return sidecar, doc, payload
        if _read_sidecar(path, type_, run_id)[1].tensors_file == doc.tensors_file:
            raise CheckpointCorruptError(
                f"{tensors_path} named by {path} is missing; the checkpoint cannot be loaded"
            )
    raise CheckpointCorruptError(
        f"{path} changed {_READ_ATTEMPTS} times while it was read (a writer commits "
        "checkpoints faster than they can be read); load it again"
    )


def _tensors(
    payload: bytes, path: Path, sidecar_path: Path, doc: SidecarFile
) -> dict[str, torch.Tensor]:
    """The tensors of ``payload``, once its header describes exactly its bytes and holds
    every tensor the training state refers to; nothing is decoded before that."""
    entries = check_tensors_header(payload, path, CheckpointFileError, fix=_FIX)
    if doc.training_state is not None:
        dtypes = {name: entry.dtype for name, entry in entries.items()}
        problem = state_problem(doc.training_state, "training_state", dtypes)
        if problem is not None:
            raise CheckpointFileError(
                sidecar_path, problem.field, problem.reason, value=problem.value, fix=_FIX
            )
    try:
        return st_load(payload)
    except Exception as exc:  # the safetensors parser's own refusal, whatever its class
        raise CheckpointFileError(
            path, "", f"is not a safetensors file ({exc})", fix=_FIX
        ) from None


def _recipe(kind: Any, value: dict[str, Any], field: str, path: Path) -> Any:
    """The sidecar's ``net_params`` / ``model_params`` as params, or its refusal."""
    try:
        return kind.from_json(value)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise CheckpointFileError(
            path, field, f"is not a recipe nnx_lab can build ({exc})", fix=_FIX
        ) from None


def _net_recipe(doc: Any, path: Path) -> Any:
    """The built-in network's params (``NNParams``, ``NNConvParams``, by the record's
    net); None for an own module (its recipe is the model params' ``net``: a ModelSpec,
    or a wrapped module's record)."""
    model = doc.model_params
    if isinstance(model, dict) and isinstance(model.get("net"), dict):
        return None
    kind = model.get("net") if isinstance(model, dict) else None
    cls = NET_PARAMS.get(next((n for n in Nets if n.value == kind), Nets.FEED_FWD), NNParams)
    return _recipe(cls, doc.net_params, "net_params", path)


def _check_recipe(run_dir: Path, run_id: str, sidecar: dict[str, Any], path: Path) -> None:
    """The network a sidecar would build must be the one its run recorded.

    ``run.yaml`` must hash to the run's id (so it was not edited), and the sidecar's
    ``NNParams`` / ``NNModelParams`` must equal it: a sidecar edited to build another
    network (a changed activation) is refused even with its checksums recomputed.
    """
    config_path = run_dir / "run.yaml"
    if not config_path.is_file():
        return  # a bare checkpoint folder (tests, tools); nothing to compare with
    config = read_record(config_path)
    if run_id_for(config) != run_id:
        raise CheckpointCorruptError(
            f"{config_path} does not hash to the run id {run_id} (it was edited); the "
            "checkpoint was not loaded. Restore the file, or retrain"
        )
    for key, name in (("net_params", "net"), ("model_params", "model")):
        if sidecar.get(key) != config.get(name):
            raise CheckpointCorruptError(
                f"{path} builds {key}={sidecar.get(key)!r}, but run {run_id} recorded "
                f"{config.get(name)!r} in run.yaml; the checkpoint was not loaded"
            )


def _commit_sidecar(path: Path, data: bytes, name: str) -> None:
    forget_sidecar(path)  # until the new bytes are in place, it is read as any file
    atomic_write_bytes(path, data)
    remember_sidecar(path, data, name)


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

    def check_fits(self, net: torch.nn.Module) -> None:
        """Refuse weights that do not fit ``net`` (a tensor missing, extra or of another
        shape than the network the recipe builds), naming the tensor, before any is
        copied into it."""
        path = self.path.parent / str(self.sidecar.get("tensors_file"))
        expected = net.state_dict()
        for name in sorted(set(expected) ^ set(self.model_state)):
            where = "missing from" if name in expected else "not a weight of"
            raise CheckpointFileError(
                path,
                f"header.{_MODEL}{name}",
                f"is {where} the network its recipe builds",
                fix=_FIX,
            )
        for name, tensor in expected.items():
            got = tuple(self.model_state[name].shape)
            if got != tuple(tensor.shape):
                raise CheckpointFileError(
                    path,
                    f"header.{_MODEL}{name}.shape",
                    f"the network its recipe builds holds {list(tensor.shape)}",
                    value=list(got),
                    fix=_FIX,
                )

    @classmethod
    def load(
        cls, run: Any, type: Checkpoints | str = Checkpoints.LAST, runs_root: Any = None
    ) -> NNCheckpoint:
        """Load a checkpoint of a run (an NNRun or an id): LAST, BEST or a phase (FIRST, Q1,
        Q2, Q3); verifies the checksum first."""
        type_ = coerce_enum(Checkpoints, type, "type")
        run_id, run_dir = _run_dir(run, runs_root)
        sidecar_path = _checkpoint_folder(run_dir) / f"{type_.value}.json"
        if not sidecar_path.is_file():
            raise FileNotFoundError(
                f"run {run_id} has no {type_.name} checkpoint (looked for {sidecar_path}); "
                "check the run id and runs_root, or train the run first"
            )
        sidecar, doc, payload = _read_committed(sidecar_path, type_.value, run_id)
        _check_recipe(run_dir, run_id, sidecar, sidecar_path)
        tensors_path = sidecar_path.parent / doc.tensors_file
        digest = hashlib.sha256(payload).hexdigest()
        if digest != doc.sha256:
            raise CheckpointCorruptError(
                f"{tensors_path} is corrupted or truncated: its SHA-256 {digest[:12]}... does "
                f"not match {doc.sha256[:12]}... recorded in {sidecar_path}; it was not "
                "loaded. Resume from the other checkpoint type, or retrain"
            )
        tensors = _tensors(payload, tensors_path, sidecar_path, doc)
        return cls(
            run_id=run_id,
            type=type_,
            path=sidecar_path,
            epoch=doc.epoch,
            step=doc.step,
            net_params=_net_recipe(doc, sidecar_path),
            model_params=_recipe(NNModelParams, doc.model_params, "model_params", sidecar_path),
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
