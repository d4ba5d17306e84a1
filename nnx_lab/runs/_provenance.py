"""Provenance (§2.15): the declared intent of an experiment, and each execution of it.

``run.id`` names the configuration and ``metadata.yaml`` the environment. A manifest adds
what the experiment was meant to be (the model, the training settings, the data by
digest or by declared id, a description) and is opt-in:
``model.train(params, provenance=ExperimentManifest.for_model(...))`` writes it with an
*attempt* (this execution: a fresh id on every ``train()`` call) into the run directory
as ``provenance.json``. The manifest never changes the run id.

Only ``hash_file`` / ``hash_bytes`` digests are verified content; a plain string such as
``"animals-v2"`` is recorded as *declared* and never reported as verified. A run trained
without a manifest has ``run.provenance is None``: absent, which is not equal to anything.
Nothing here imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ._format import canonical_json
from ._records import read_record
from ._schemas.provenance import (
    AttemptFile,
    DataRefFile,
    ManifestFile,
    ProvenanceFile,
    ProvenanceFileError,
)
from ._schemas.reading import check_shape, read_json_file

__all__ = [
    "PROVENANCE_FILE",
    "Attempt",
    "Digest",
    "ExperimentManifest",
    "Provenance",
    "ProvenanceFileError",
    "check_manifest",
    "hash_bytes",
    "hash_file",
    "read_provenance",
    "record_attempt",
]

PROVENANCE_FILE = "provenance.json"
_CHUNK = 1 << 20
_FIX = (
    "the run's provenance record is damaged or is not this run's; restore the file, or "
    "delete the run and train it again"
)


def _checked(data: Any, shape: type, what: str) -> Any:
    """In-memory JSON (``from_json``) as strictly as a file; ``what`` names it."""
    fix = f"pass what {what.replace('from_json', 'to_json()')} returns"
    return check_shape(data, shape, what, ProvenanceFileError, fix=fix)


@dataclass(frozen=True)
class Digest:
    """A content digest computed by nnx_lab: the only kind of data reference that is
    reported as verified. ``str(d)`` is ``"sha256:<hex>"``."""

    hexdigest: str
    size: int
    source: str  # "file" | "bytes"
    name: str | None = None
    algorithm: str = "sha256"

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.hexdigest}"

    def to_json(self) -> dict[str, Any]:
        return {
            "digest": str(self),
            "size": self.size,
            "source": self.source,
            "name": self.name,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Digest:
        ref = _checked(data, DataRefFile, "Digest.from_json")
        if ref.declared is not None:
            raise ProvenanceFileError(
                "Digest.from_json", "declared", "is a declared id, not a digest", value=ref.declared
            )
        return _digest(ref)


def _digest(ref: DataRefFile) -> Digest:
    # the shape's rules: an entry without "declared" has all three
    assert ref.digest is not None
    assert ref.size is not None
    assert ref.source is not None
    algorithm, _, hexdigest = ref.digest.partition(":")
    return Digest(hexdigest, ref.size, ref.source, ref.name, algorithm)


def hash_file(path: str | os.PathLike[str]) -> Digest:
    """The SHA-256 of a file's bytes (read in chunks: any size)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(
            f"hash_file({os.fspath(path)!r}): no such file"
            + (" (it is a folder: hash its files one by one)" if p.is_dir() else "")
        )
    h = hashlib.sha256()
    size = 0
    with p.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return Digest(h.hexdigest(), size, "file", p.name)


def hash_bytes(data: bytes | bytearray | memoryview, name: str | None = None) -> Digest:
    """The SHA-256 of bytes you hold (a downloaded blob, a serialized table)."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ConfigError(
            "hash_bytes(data)",
            type(data).__name__,
            "pass bytes (e.g. path.read_bytes(), or df.to_csv().encode())",
        )
    view = memoryview(data)
    return Digest(hashlib.sha256(view).hexdigest(), view.nbytes, "bytes", name)


def _data_ref_json(value: Any) -> Any:
    return value.to_json() if isinstance(value, Digest) else {"declared": value}


def _data_ref(ref: DataRefFile) -> Digest | str:
    return ref.declared if ref.declared is not None else _digest(ref)


@dataclass(frozen=True)
class ExperimentManifest:
    """What an experiment is meant to be: the model, the training settings, the data
    (name -> ``Digest`` or declared id) and a description. ``fingerprint`` is the hash
    of all of it: the same manifest, the same fingerprint."""

    net: dict[str, Any] | None = None
    model: dict[str, Any] | None = None
    train: dict[str, Any] | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    description: str | None = None
    # NNx's declarations: the task (a ``TaskSpec`` or its ``state()``) and the objective's
    # identity (``{"id": "kd", "version": 1}``); each enters the fingerprint only when set,
    # so a manifest without them keeps the fingerprint it had
    task: Mapping[str, Any] | None = None
    objective: Mapping[str, Any] | None = None
    labels: tuple[str, ...] | None = None  # the ordered output labels
    splits: Mapping[str, Any] | None = None  # name -> a SplitManifest's digest, an id, None
    config: Mapping[str, Any] | None = None  # any other JSON configuration

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", _labels(self.labels))
        object.__setattr__(self, "splits", _splits(self.splits))
        if self.config is not None:
            object.__setattr__(self, "config", _plain_mapping(self.config, "config") or None)
        for name in ("task", "objective"):
            value = getattr(self, name)
            if value is None:
                continue
            state = getattr(value, "state", None) or getattr(value, "to_json", None)
            if callable(state) and not isinstance(value, Mapping):
                value = state()  # a TaskSpec: its JSON form
            object.__setattr__(self, name, _plain_mapping(value, name))

    @classmethod
    def for_model(
        cls,
        model: Any,
        train: Any = None,
        data: Mapping[str, Any] | None = None,
        description: str | None = None,
    ) -> ExperimentManifest:
        """The manifest of ``model`` (as it was built) trained with ``train``
        (``NNTrainParams``; its loaders are not part of it: name the data in ``data``)."""
        fixed = getattr(model, "fixed", None)
        if fixed is None:
            raise ConfigError(
                "model", model, "pass the NNModel you will train: for_model(model, train=...)"
            )
        train_json = None
        if train is not None:
            identity = getattr(train, "identity", None)
            if not callable(identity):
                raise ConfigError("train", train, "pass the NNTrainParams you will train with")
            train_json = identity()
        if description is not None and not isinstance(description, str):
            raise ConfigError("description", description, "pass a string, or None")
        return cls(
            net=dict(fixed["net"]),
            model=model.trained_params().to_json(),
            train=train_json,
            data=_checked_data(data),
            description=description,
        )

    @classmethod
    def for_plan(
        cls,
        plan: Any,
        data: Mapping[str, Any] | None = None,
        description: str | None = None,
    ) -> ExperimentManifest:
        """The manifest of what ``plan.fit()`` trains (pass it as
        ``plan.fit(provenance=...)``); the plan must be valid."""
        resolve = getattr(plan, "_resolve", None)
        if not callable(resolve):
            raise ConfigError("plan", plan, "pass an ExperimentPlan")
        plan.validate().raise_for_errors()
        r = plan.resolve()._resolve()  # a plan read from JSON: its code, by its references
        if description is not None and not isinstance(description, str):
            raise ConfigError("description", description, "pass a string, or None")
        return cls(
            net=r.net.to_json(),
            model=r.model.to_json(),
            train=r.train.identity(),
            data=_checked_data(data),
            description=description,
        )

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(canonical_json(self.to_json()).encode()).hexdigest()

    @property
    def verified(self) -> dict[str, bool]:
        """For each data entry: True for a digest nnx_lab computed, False for a declared
        id (recorded as given, never verified)."""
        return {name: isinstance(ref, Digest) for name, ref in self.data.items()}

    def to_json(self) -> dict[str, Any]:
        out = {
            "net": self.net,
            "model": self.model,
            "train": self.train,
            "data": {k: _data_ref_json(v) for k, v in sorted(self.data.items())},
            "description": self.description,
        }
        for name in ("task", "objective", "splits", "config"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.labels is not None:
            out["labels"] = list(self.labels)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExperimentManifest:
        return _manifest(_checked(data, ManifestFile, "ExperimentManifest.from_json"))


def _manifest(doc: ManifestFile) -> ExperimentManifest:
    return ExperimentManifest(
        net=doc.net,
        model=doc.model,
        train=doc.train,
        data={k: _data_ref(v) for k, v in doc.refs().items()},
        description=doc.description,
        task=doc.task,
        objective=doc.objective,
        labels=doc.labels,
        splits=doc.splits,
        config=doc.config,
    )


def _labels(labels: Any) -> tuple[str, ...] | None:
    if labels is None:
        return None
    fix = "pass the output labels in order, each a non-empty string, each once"
    if isinstance(labels, str) or not isinstance(labels, list | tuple):
        raise ConfigError("labels", labels, fix)
    if not all(isinstance(x, str) and x for x in labels) or len(set(labels)) != len(labels):
        raise ConfigError("labels", list(labels), fix)
    return tuple(labels)


def _splits(splits: Any) -> dict[str, Any] | None:
    """Named split identities: a ``SplitManifest`` is recorded as its digest."""
    if splits is None:
        return None
    fix = 'pass a mapping such as {"train": manifest} (a SplitManifest, an id, or None)'
    if not isinstance(splits, Mapping):
        raise ConfigError("splits", splits, fix)
    out: dict[str, Any] = {}
    for name, ref in splits.items():
        digest = getattr(ref, "digest", None)
        ref = digest() if callable(digest) else ref
        if (
            not isinstance(name, str)
            or not name
            or not (ref is None or (isinstance(ref, str) and ref))
        ):
            raise ConfigError(f"splits[{name!r}]", ref, fix)
        out[name] = ref
    return out or None


def _plain_mapping(value: Any, name: str) -> dict[str, Any]:
    """A JSON copy of a str-keyed mapping of finite JSON values (later edits of what was
    passed never change the manifest); anything else is refused, naming the field."""
    example = {"objective": '{"id": "kd", "version": 1}', "task": "TaskSpec.state()"}
    fix = f"pass {name} as a mapping of JSON values with string keys, e.g. " + example.get(
        name, '{"augment": True}'
    )
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ConfigError(name, value, fix)
    try:
        return json.loads(json.dumps(dict(value), allow_nan=False, sort_keys=True))
    except (TypeError, ValueError):
        raise ConfigError(name, value, fix) from None


def _checked_data(data: Mapping[str, Any] | None) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError("data", data, 'pass a mapping such as {"train": hash_file("train.csv")}')
    out = {}
    for key, value in data.items():
        if not isinstance(key, str) or not key:
            raise ConfigError("data", key, "name each data entry with a non-empty string")
        if isinstance(value, Digest) or (isinstance(value, str) and value):
            out[key] = value
            continue
        raise ConfigError(
            f"data[{key!r}]",
            value,
            "pass hash_file(path) or hash_bytes(data) for verified content, or a "
            "non-empty string id (recorded as declared)",
        )
    return out


@dataclass(frozen=True)
class Attempt:
    """One execution of a manifest: ``attempt_id`` is fresh on every ``train()`` call."""

    attempt_id: str
    run_id: str
    started_at: float
    host: str
    pid: int

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt_id": self.attempt_id,
            "run_id": self.run_id,
            "started_at": self.started_at,
            "host": self.host,
            "pid": self.pid,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Attempt:
        return _attempt(_checked(data, AttemptFile, "Attempt.from_json"))


def _attempt(doc: AttemptFile) -> Attempt:
    return Attempt(doc.attempt_id, doc.run_id, doc.started_at, doc.host, doc.pid)


@dataclass(frozen=True)
class Provenance:
    """``run.provenance``: the manifest, its ``fingerprint`` and this ``attempt``."""

    manifest: ExperimentManifest
    fingerprint: str
    attempt: Attempt

    def to_json(self) -> dict[str, Any]:
        return {
            "format": 1,
            "manifest": self.manifest.to_json(),
            "fingerprint": self.fingerprint,
            "attempt": self.attempt.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Provenance:
        return _provenance(_checked(data, ProvenanceFile, "Provenance.from_json"))


def _provenance(doc: ProvenanceFile) -> Provenance:
    return Provenance(_manifest(doc.manifest), doc.fingerprint, _attempt(doc.attempt))


def check_manifest(manifest: Any, config: Mapping[str, Any]) -> None:
    """Refuse, before any side effect, a manifest that is not one or that describes
    another configuration than the run's."""
    if not isinstance(manifest, ExperimentManifest):
        raise ConfigError(
            "provenance",
            manifest,
            "pass ExperimentManifest.for_model(model, train=params, data={...}), or None",
        )
    for key in ("net", "model", "train"):
        declared = getattr(manifest, key)
        if declared is None:
            continue
        actual = config.get(key)
        if _differs(declared, actual):
            diff = _first_difference(declared, actual, key)
            raise ConfigError(
                "provenance",
                f"a manifest of another {key} configuration",
                f"{diff}; make the manifest from the model and params you train: "
                "ExperimentManifest.for_model(model, train=params, data=...)",
            )


def _first_difference(a: Any, b: Any, path: str) -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{path}.{key}")
    return f"{path} is {a!r} in the manifest but {b!r} in this run"


def record_attempt(manifest: ExperimentManifest, run_id: str, started_at: float) -> Provenance:
    attempt = Attempt(uuid.uuid4().hex, run_id, started_at, socket.gethostname(), os.getpid())
    return Provenance(manifest, manifest.fingerprint, attempt)


def read_provenance(
    path: Path, run_id: str, config: Mapping[str, Any] | None = None
) -> Provenance | None:
    """A run directory's provenance, or None when it was trained without a manifest.

    The file passes its strict shape (``ProvenanceFile``), then what ties it to the run:
    the attempt names ``run_id``, the manifest hashes to its fingerprint, and the
    manifest's configuration is the one the run recorded (``config``, else the run's
    ``run.yaml``). Any failure is one ``ProvenanceFileError`` (a ``RunRecordError``)."""
    file = Path(path) / PROVENANCE_FILE
    if not os.path.lexists(file):
        return None  # a folder, a pipe or a dangling link in its place is refused below
    doc = read_json_file(file, ProvenanceFile, ProvenanceFileError, fix=_FIX)
    provenance = _provenance(doc)
    if doc.attempt.run_id != run_id:
        raise ProvenanceFileError(
            file,
            "attempt.run_id",
            f"it belongs to run {doc.attempt.run_id}, not {run_id}",
            value=doc.attempt.run_id,
            fix=_FIX,
        )
    if provenance.manifest.fingerprint != doc.fingerprint:
        raise ProvenanceFileError(
            file,
            "fingerprint",
            "its manifest does not hash to its fingerprint (it was edited)",
            value=doc.fingerprint,
            fix=_FIX,
        )
    if config is None and (Path(path) / "run.yaml").is_file():
        config = read_record(Path(path) / "run.yaml")
    if config is not None:
        for key in ("net", "model", "train"):
            declared = getattr(provenance.manifest, key)
            if declared is not None and _differs(declared, config.get(key)):
                raise ProvenanceFileError(
                    file,
                    f"manifest.{key}",
                    f"describes another configuration than run {run_id} recorded in run.yaml "
                    f"({_first_difference(declared, config.get(key), key)}): it was copied "
                    "from another run or edited",
                    fix=_FIX,
                )
    return provenance


def _differs(a: Any, b: Any) -> bool:
    return json.loads(canonical_json(a)) != json.loads(canonical_json(b))
