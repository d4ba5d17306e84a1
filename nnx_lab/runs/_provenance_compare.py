"""Comparing the provenance of two runs (``nnx_lab.provenance.compare``): which fields
differ, and which data match only by a declared id (never reported as verified).

Reading a side reads its ``provenance.json`` through the strict reader
(``read_provenance``); nothing is written and nothing a file names is imported.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ._provenance import Attempt, Digest, ExperimentManifest, Provenance, read_provenance

__all__ = ["Comparison", "Difference", "compare"]

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
