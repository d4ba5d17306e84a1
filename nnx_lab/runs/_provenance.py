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

from ..errors import ConfigError, RunRecordError
from ._format import canonical_json

__all__ = [
    "PROVENANCE_FILE",
    "Attempt",
    "Comparison",
    "Difference",
    "Digest",
    "ExperimentManifest",
    "Provenance",
    "check_manifest",
    "compare",
    "hash_bytes",
    "hash_file",
    "read_provenance",
    "record_attempt",
]

PROVENANCE_FILE = "provenance.json"
_CHUNK = 1 << 20


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
        algorithm, _, hexdigest = str(data["digest"]).partition(":")
        return cls(hexdigest, int(data["size"]), str(data["source"]), data.get("name"), algorithm)


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


def _data_ref_from_json(value: Any) -> Any:
    if isinstance(value, Mapping) and "digest" in value:
        return Digest.from_json(value)
    if isinstance(value, Mapping) and "declared" in value:
        return str(value["declared"])
    raise ValueError(f"not a data reference: {value!r}")


@dataclass(frozen=True)
class ExperimentManifest:
    """What an experiment is meant to be: the model, the training settings, the data
    (name -> ``Digest`` or declared id) and a description. ``fingerprint`` is the hash
    of all of it: the same manifest, the same fingerprint."""

    net: dict[str, Any] | None
    model: dict[str, Any] | None
    train: dict[str, Any] | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    description: str | None = None

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
        return {
            "net": self.net,
            "model": self.model,
            "train": self.train,
            "data": {k: _data_ref_json(v) for k, v in sorted(self.data.items())},
            "description": self.description,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExperimentManifest:
        return cls(
            net=data.get("net"),
            model=data.get("model"),
            train=data.get("train"),
            data={k: _data_ref_from_json(v) for k, v in (data.get("data") or {}).items()},
            description=data.get("description"),
        )


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
        return cls(
            str(data["attempt_id"]),
            str(data["run_id"]),
            float(data["started_at"]),
            str(data["host"]),
            int(data["pid"]),
        )


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
        return cls(
            ExperimentManifest.from_json(data["manifest"]),
            str(data["fingerprint"]),
            Attempt.from_json(data["attempt"]),
        )


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
        if json.loads(canonical_json(declared)) != json.loads(canonical_json(actual)):
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


def read_provenance(path: Path, run_id: str) -> Provenance | None:
    """A run directory's provenance, or None when it was trained without a manifest."""
    file = Path(path) / PROVENANCE_FILE
    if not file.is_file():
        return None
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        provenance = Provenance.from_json(data)
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise RunRecordError(
            file, f"not a provenance record ({type(exc).__name__}: {exc})"
        ) from None
    if provenance.attempt.run_id != run_id:
        raise RunRecordError(file, f"it belongs to run {provenance.attempt.run_id}, not {run_id}")
    if provenance.manifest.fingerprint != provenance.fingerprint:
        raise RunRecordError(file, "its manifest does not hash to its fingerprint (it was edited)")
    return provenance


# -- comparing two runs ----------------------------------------------------------------------
VERIFIED, DECLARED, ABSENT, VALUE = "verified", "declared", "absent", "value"


@dataclass(frozen=True)
class Difference:
    """A field that differs (or that cannot be matched): each side's value and status
    (``verified``, ``declared``, ``absent`` or ``value``)."""

    field: str
    a: Any
    b: Any
    a_status: str
    b_status: str
    note: str = ""

    def __str__(self) -> str:
        text = f"{self.field}: {self.a!r} ({self.a_status}) vs {self.b!r} ({self.b_status})"
        return text + (f"; {self.note}" if self.note else "")


@dataclass(frozen=True)
class Comparison:
    """``differences`` between two runs' provenance; ``unverified`` lists data that match
    only by a declared id (never reported as verified); ``same_plan`` is whether the
    fingerprints are equal (None when a side has no manifest)."""

    a: str
    b: str
    same_plan: bool | None
    differences: tuple[Difference, ...]
    unverified: tuple[Difference, ...]
    attempts: tuple[Attempt | None, Attempt | None]

    def __str__(self) -> str:
        lines = [f"Provenance: A = {self.a}; B = {self.b}"]
        if self.same_plan is not None:
            lines.append("  same plan (fingerprints equal)" if self.same_plan else "  other plans")
        lines += [f"  ! {d}" for d in self.differences]
        lines += [f"  ~ {d} (declared on both sides: not verified)" for d in self.unverified]
        if not self.differences and not self.unverified:
            lines.append("  no differences")
        return "\n".join(lines)


def _side(obj: Any, runs_root: Any) -> tuple[str, Provenance | ExperimentManifest | None]:
    if isinstance(obj, Provenance):
        return f"attempt {obj.attempt.attempt_id[:8]}", obj
    if isinstance(obj, ExperimentManifest):
        return "manifest", obj
    from ._drift_record import locate_run

    run_id, path = locate_run(obj, runs_root)
    if not (path / "run.yaml").is_file():
        raise FileNotFoundError(f"no run {run_id!r} at {path}; check the id, or pass runs_root=")
    return f"run {run_id[:8]}", read_provenance(path, run_id)


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}"))
        return out
    return {prefix: value}


def compare(a: Any, b: Any, *, runs_root: str | os.PathLike[str] | None = None) -> Comparison:
    """Compare the provenance of two runs (ids or prefixes, ``NNRun``, ``FitResult``),
    ``Provenance`` records or manifests."""
    label_a, pa = _side(a, runs_root)
    label_b, pb = _side(b, runs_root)
    attempts = tuple(p.attempt if isinstance(p, Provenance) else None for p in (pa, pb))
    if pa is None or pb is None:
        missing = [label for label, p in ((label_a, pa), (label_b, pb)) if p is None]
        note = (
            f"{' and '.join(missing)} {'was' if len(missing) == 1 else 'were'} trained without "
            "a manifest: absent, not equal"
        )
        diff = Difference(
            "provenance",
            None if pa is None else _fingerprint(pa),
            None if pb is None else _fingerprint(pb),
            ABSENT if pa is None else VALUE,
            ABSENT if pb is None else VALUE,
            note,
        )
        return Comparison(label_a, label_b, None, (diff,), (), attempts)  # type: ignore[arg-type]
    ma, mb = _manifest(pa), _manifest(pb)
    differences: list[Difference] = []
    unverified: list[Difference] = []
    for key in ("net", "model", "train", "description"):
        fa = _flat(getattr(ma, key), key)
        fb = _flat(getattr(mb, key), key)
        for path in dict.fromkeys([*fa, *fb]):
            va, vb = fa.get(path), fb.get(path)
            if va != vb:
                differences.append(
                    Difference(
                        path,
                        va,
                        vb,
                        VALUE if path in fa else ABSENT,
                        VALUE if path in fb else ABSENT,
                    )
                )
    for name in sorted(set(ma.data) | set(mb.data)):
        ra, rb = ma.data.get(name), mb.data.get(name)
        field_name = f"data.{name}"
        sa, sb = _status(ra), _status(rb)
        shown_a = str(ra) if ra is not None else None
        shown_b = str(rb) if rb is not None else None
        if ra is None or rb is None:
            differences.append(Difference(field_name, shown_a, shown_b, sa, sb))
        elif sa == sb == VERIFIED:
            if ra.hexdigest != rb.hexdigest:
                differences.append(Difference(field_name, shown_a, shown_b, sa, sb))
        elif sa == sb == DECLARED:
            target = unverified if ra == rb else differences
            note = "" if ra != rb else "equal as declared; the content was not checked"
            target.append(Difference(field_name, shown_a, shown_b, sa, sb, note))
        else:
            differences.append(
                Difference(
                    field_name,
                    shown_a,
                    shown_b,
                    sa,
                    sb,
                    "a declared id cannot be matched with a verified digest",
                )
            )
    same = ma.fingerprint == mb.fingerprint
    return Comparison(label_a, label_b, same, tuple(differences), tuple(unverified), attempts)  # type: ignore[arg-type]


def _manifest(p: Provenance | ExperimentManifest) -> ExperimentManifest:
    return p.manifest if isinstance(p, Provenance) else p


def _fingerprint(p: Provenance | ExperimentManifest) -> str:
    return p.fingerprint


def _status(ref: Any) -> str:
    if ref is None:
        return ABSENT
    return VERIFIED if isinstance(ref, Digest) else DECLARED
