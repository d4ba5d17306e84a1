"""The shape of ``provenance.json``: a manifest, its fingerprint and one attempt.

The shape checks types, ranges and lengths; the reader (``runs/_provenance.py``) then
checks what ties the file to its run: the attempt names this run, the manifest hashes
to the fingerprint, and the manifest describes the configuration the run's ``run.yaml``
holds (a provenance copied from another run is refused even when its run id was edited
to match).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

import msgspec

from ...errors import RunRecordError
from .._schema import NonNegativeInt, PositiveInt
from .reading import (
    HEX64,
    Label,
    Problem,
    Refusal,
    Text,
    each_problem,
    found,
    join,
    plain_problem,
)

__all__ = [
    "AttemptFile",
    "DataRefFile",
    "ManifestFile",
    "ProvenanceFile",
    "ProvenanceFileError",
]

_MAX = 1.7976931348623157e308
RunId = Annotated[str, msgspec.Meta(pattern=r"\A[0-9a-f]{32}\Z")]
Description = Annotated[str, msgspec.Meta(max_length=1 << 16)]


class ProvenanceFileError(Refusal, RunRecordError):
    """A ``provenance.json`` that is not its run's (a ``SchemaError`` and a
    ``RunRecordError``, as it always was)."""


class DataRefFile(msgspec.Struct, forbid_unknown_fields=True):
    """One data entry: ``{"digest": "sha256:...", "size", "source", "name"}`` (content
    nnx_lab hashed) or ``{"declared": "animals-v2"}`` (an id, never verified)."""

    digest: Annotated[str, msgspec.Meta(pattern=r"\Asha256:[0-9a-f]{64}\Z")] | None = None
    size: NonNegativeInt | None = None
    source: Literal["file", "bytes"] | None = None
    name: Label | None = None
    declared: Text | None = None

    def rules(self) -> Iterator[Problem]:
        if self.declared is not None:
            if self.digest is not None or self.size is not None or self.source is not None:
                yield Problem("declared", "an entry is a digest or a declared id, not both")
            return
        for key in ("digest", "size", "source"):
            if getattr(self, key) is None:
                yield Problem(
                    key, 'missing: an entry is {"digest", "size", "source"} or {"declared"}'
                )
                return


class ManifestFile(msgspec.Struct, forbid_unknown_fields=True):
    """``ExperimentManifest.to_json()``."""

    net: dict[str, Any] | None
    model: dict[str, Any] | None
    train: dict[str, Any] | None
    data: dict[Text, Any]  # each entry a DataRefFile, checked by rules() to name its key
    description: Description | None
    task: dict[str, Any] | None = None  # NNx's declarations, written only when set
    objective: dict[str, Any] | None = None
    labels: list[Text] | None = None
    splits: dict[Text, Text | None] | None = None
    config: dict[str, Any] | None = None

    def rules(self) -> Iterator[Problem]:
        yield from found(
            plain_problem(getattr(self, k), k)
            for k in ("net", "model", "train", "task", "objective", "config")
        )
        yield from found([each_problem(self.data, DataRefFile, "data")])

    def refs(self) -> dict[str, DataRefFile]:
        """The data entries as their shape (after ``rules()`` accepted them)."""
        return {k: msgspec.convert(v, DataRefFile, strict=True) for k, v in self.data.items()}


class AttemptFile(msgspec.Struct, forbid_unknown_fields=True):
    attempt_id: Annotated[str, msgspec.Meta(pattern=r"\A[0-9a-f]{32}\Z")]
    run_id: RunId
    started_at: Annotated[float, msgspec.Meta(ge=0.0, le=_MAX)]
    host: Label
    pid: PositiveInt


class ProvenanceFile(msgspec.Struct, forbid_unknown_fields=True):
    """``Provenance.to_json()``."""

    format: Literal[1]
    manifest: ManifestFile
    fingerprint: HEX64
    attempt: AttemptFile

    def rules(self) -> Iterator[Problem]:
        for problem in self.manifest.rules():
            yield problem._replace(field=join("manifest", problem.field))
