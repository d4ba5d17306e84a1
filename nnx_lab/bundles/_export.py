"""Writing a bundle: a run's checkpoint, record and documents, with a manifest of digests.

Everything is checked before a byte is written: the run and its checkpoint load (their
own checksums, the recipe against ``run.yaml``), each calibrator and policy names the
checkpoint's weights (its ``model_id`` is their fingerprint), and the target does not
exist. The files are then written into a temporary folder (or zip) beside the target,
the manifest last, and renamed onto the target in one step: a refusal, a failure or a
killed writer never leaves anything at ``path`` (docs/bundles.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
import zipfile
from pathlib import Path
from typing import Any

import yaml

from .._version import __version__
from ..abstention import AbstentionPolicy
from ..calibration import TemperatureCalibrator, model_fingerprint
from ..engine.checkpoint import NNCheckpoint
from ..engine.enums import Checkpoints, coerce_enum
from ..engine.model import NNModel
from ..engine.write_faults import kill_point
from ..errors import ConfigError
from ..runs import (
    BUNDLE_FORMAT,
    MANIFEST_FILE,
    max_bundle_bytes,
    read_file,
    read_record,
    resolve_runs_root,
    run_dir,
)
from ..runs._schemas.bundle import BundleFileError
from ._export_record import export_entry, record_export

__all__ = ["export_bundle"]


def _documents(values: Any, cls: type, field: str) -> list[Any]:
    if values is None:
        return []
    if isinstance(values, cls):
        values = [values]
    values = list(values)
    for i, value in enumerate(values):
        if not isinstance(value, cls):
            raise ConfigError(
                f"{field}[{i}]", value, f"pass {cls.__name__} objects (load a saved one first)"
            )
    return values


def _check_model_ids(docs: list[Any], field: str, fingerprint: str, run_id: str) -> None:
    for i, doc in enumerate(docs):
        if doc.model_id is not None and doc.model_id != fingerprint:
            raise ConfigError(
                f"{field}[{i}].model_id",
                doc.model_id,
                f"it was fitted on other weights than run {run_id}'s checkpoint "
                f"({fingerprint}); fit it on this checkpoint's model, or export that "
                "checkpoint instead",
            )


def _source_files(run_path: Path, ckpt: NNCheckpoint, resumable: bool) -> dict[str, bytes]:
    """The run's files a bundle carries, read once (their bytes are what is hashed)."""

    def read(rel: str) -> bytes:
        return read_file(run_path / rel, BundleFileError, record=True)

    files = {"run.yaml": read("run.yaml")}
    if (run_path / "metadata.yaml").is_file():
        files["metadata.yaml"] = _shared_metadata(read_record(run_path / "metadata.yaml"))
    types = [ckpt.type.value]
    if resumable:
        # a stateful resume carries the source's BEST and inherits its log (docs/resume.md)
        if (run_path / "metrics.jsonl").is_file():
            files["metrics.jsonl"] = _read_big(run_path / "metrics.jsonl")
        other = "best" if ckpt.type is Checkpoints.LAST else "last"
        if (run_path / "checkpoints" / f"{other}.json").is_file():
            types.append(other)
    for type_ in types:
        loaded = (
            ckpt
            if type_ == ckpt.type.value
            else NNCheckpoint.load(ckpt.run_id, type_, run_path.parent)
        )
        sidecar = f"checkpoints/{type_}.json"
        files[sidecar] = read(sidecar)
        if json.loads(files[sidecar]) != loaded.sidecar:
            raise ConfigError(
                "run_id",
                ckpt.run_id,
                f"its {type_} checkpoint changed while it was read; export again",
            )
        name = f"checkpoints/{loaded.sidecar['tensors_file']}"
        data = _read_big(run_path / name)
        if hashlib.sha256(data).hexdigest() != loaded.sidecar["sha256"]:
            raise ConfigError(
                "run_id",
                ckpt.run_id,
                f"its {type_} checkpoint changed while it was read; export again",
            )
        files[name] = data
    return files


# what a bundle leaves out of metadata.yaml: who wrote the run (host, process, boot id)
_PRIVATE = ("writer", "heartbeat")


def _shared_metadata(meta: dict[str, Any]) -> bytes:
    shared = {k: v for k, v in meta.items() if k not in _PRIVATE}
    return yaml.safe_dump(shared, sort_keys=False, allow_unicode=True).encode()


def _read_big(path: Path) -> bytes:
    """A file of the exporter's own run, whatever its size (a long run's log, a large
    model's tensors, whose digest the caller checks); the bundle's cap applies after."""
    with open(path, "rb") as fh:
        return fh.read()


def _manifest(
    ckpt: NNCheckpoint,
    config: dict[str, Any],
    files: dict[str, bytes],
    resumable: bool,
    n_cal: int,
    n_pol: int,
) -> dict[str, Any]:
    return {
        "format": BUNDLE_FORMAT,
        "version": 1,
        "capability": "resumable" if resumable else "inference",
        "run_id": ckpt.run_id,
        "checkpoint": ckpt.type.value,
        "epoch": int(ckpt.epoch),
        "step": int(ckpt.step),
        "model": {"net": config["net"], "model": config["model"]},
        "calibrators": [f"calibrators/{i}.json" for i in range(n_cal)],
        "policies": [f"policies/{i}.json" for i in range(n_pol)],
        "payloads": [
            {"path": name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
            for name, data in files.items()
        ],
        "nnx_lab": __version__,
    }


def _target(path: Any) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise ConfigError("path", path, "pass the folder (or zip file) to write, as a str or Path")
    target = Path(path)
    if os.path.lexists(target):
        raise ConfigError(
            "path",
            str(target),
            "exists already; a bundle is never written over a file, "
            "choose a new path or remove it first",
        )
    if not target.parent.is_dir():
        raise ConfigError(
            "path", str(target), f"its folder {target.parent} does not exist; create it first"
        )
    return target


def _write_folder(tmp: Path, files: dict[str, bytes]) -> None:
    tmp.mkdir()
    for name, data in files.items():
        dest = tmp / name
        dest.parent.mkdir(exist_ok=True)
        with open(dest, "xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        kill_point("bundle.payload")


def _write_zip(tmp: Path, files: dict[str, bytes]) -> None:
    with open(tmp, "xb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o100644 << 16  # a plain file
            zf.writestr(info, data)
            kill_point("bundle.payload")
        zf.close()
        raw.flush()
        os.fsync(raw.fileno())


def export_bundle(
    run_id: str,
    path: str | os.PathLike[str],
    calibrators: Any = None,
    policies: Any = None,
    *,
    checkpoint: Checkpoints | str = "last",
    archive: bool = False,
    runs_root: str | os.PathLike[str] | None = None,
    record: bool = True,
) -> Path:
    """Write run ``run_id``'s ``checkpoint`` (LAST or BEST) and the given calibrators and
    abstention policies as a bundle at ``path``: a folder, or one zip file with
    ``archive=True``. A checkpoint with training state gives a "resumable" bundle, a
    weights-only one an "inference" bundle. Returns ``path``. With ``record=True`` the
    export is also recorded in the run folder's ``bundles.json`` (the report reads it);
    ``record=False`` writes nothing in the run folder (the runs panel's download, whose
    bundle lives only in a temporary folder, uses it)."""
    if not isinstance(archive, bool):
        raise ConfigError("archive", archive, "pass True (one zip file) or False (a folder)")
    if not isinstance(record, bool):
        raise ConfigError("record", record, "pass True (record it in bundles.json) or False")
    type_ = coerce_enum(Checkpoints, checkpoint, "checkpoint")
    cals = _documents(calibrators, TemperatureCalibrator, "calibrators")
    pols = _documents(policies, AbstentionPolicy, "policies")
    target = _target(path)
    root = resolve_runs_root(runs_root)
    run_path = run_dir(root, run_id, "run_id")
    if not (run_path / "run.yaml").is_file():
        raise ConfigError(
            "run_id",
            run_id,
            f"no such run under {root.resolve()}; check the id, or pass runs_root=",
        )
    ckpt = NNCheckpoint.load(run_id, type_, root)
    if cals or pols:
        fingerprint = model_fingerprint(NNModel.from_checkpoint(ckpt))
        _check_model_ids(cals, "calibrators", fingerprint, run_id)
        _check_model_ids(pols, "policies", fingerprint, run_id)
    resumable = not ckpt.weights_only
    files = _source_files(run_path, ckpt, resumable)
    for i, cal in enumerate(cals):
        files[f"calibrators/{i}.json"] = _json_bytes(cal.to_json())
    for i, pol in enumerate(pols):
        files[f"policies/{i}.json"] = _json_bytes(pol.to_json())
    recipe = {"net": ckpt.sidecar["net_params"], "model": ckpt.sidecar["model_params"]}
    manifest = _manifest(ckpt, recipe, files, resumable, len(cals), len(pols))
    total = sum(len(d) for d in files.values())
    if total > max_bundle_bytes():
        raise ConfigError(
            "run_id",
            run_id,
            f"its bundle would hold {total:,} bytes, more than a reader takes "
            "(NNX_MAX_BUNDLE_BYTES)",
        )
    files[MANIFEST_FILE] = _json_bytes(manifest)  # written last: the bundle is whole
    # for bundles.json
    entry = export_entry(ckpt, root, files, manifest, target, archive) if record else None
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        (_write_zip if archive else _write_folder)(tmp, files)
        kill_point("bundle.rename")
        if os.path.lexists(target):
            raise ConfigError("path", str(target), "was created meanwhile; choose a new path")
        os.rename(tmp, target)
    finally:
        if os.path.lexists(tmp):
            with contextlib.suppress(OSError):
                shutil.rmtree(tmp) if tmp.is_dir() else os.unlink(tmp)
    if entry is not None:
        record_export(run_path, entry)  # the run knows its bundle (its report shows it)
    return target


def _json_bytes(value: Any) -> bytes:
    return (json.dumps(value, indent=1, allow_nan=False) + "\n").encode()
