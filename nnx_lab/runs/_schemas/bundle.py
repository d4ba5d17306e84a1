"""The shape of a run bundle's ``manifest.json`` (§2.22, docs/bundles.md).

A bundle is a folder (or a zip of one) someone else wrote: the manifest names every
other file of it, with its size and SHA-256, and says what the bundle can do. The paths
a manifest may name are a fixed, small set of plain names (no folder of the reader's
choosing, no "..", no absolute path), so a manifest cannot point outside the bundle.
The reader (``nnx_lab/bundles``) refuses any file the manifest does not name, a link,
a size that differs, and a digest that does not match, before any tensor is decoded.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import msgspec

from .._schema import NonNegativeInt
from .reading import HEX64, Problem, Refusal, Text, found, plain_problem, repeated

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_PATH",
    "MANIFEST_FILE",
    "BundleFileError",
    "BundleManifestFile",
    "BundlePayload",
]

BUNDLE_FORMAT = "nnx_lab.bundle"
MANIFEST_FILE = "manifest.json"
# Every file a bundle may hold besides its manifest, as the writer names them.
BUNDLE_PATH = re.compile(
    r"run\.yaml|metadata\.yaml|metrics\.jsonl|checkpoints/(last|best)\.json"
    r"|checkpoints/(last|best)-[0-9]{8,}-[0-9a-f]{8}\.safetensors"
    r"|calibrators/[0-9]{1,3}\.json|policies/[0-9]{1,3}\.json"
)
RunId = Annotated[str, msgspec.Meta(pattern=r"\A[0-9a-f]{32}\Z")]
FileName = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]


class BundleFileError(Refusal):
    """A bundle (its manifest or a file of it) that is not what nnx_lab wrote: names the
    file, the field, the value and the fix (a ``SchemaError``)."""


class BundlePayload(msgspec.Struct, forbid_unknown_fields=True):
    path: FileName
    sha256: HEX64
    bytes: NonNegativeInt


class BundleManifestFile(msgspec.Struct, forbid_unknown_fields=True):
    """What ``export_bundle`` writes."""

    format: Literal["nnx_lab.bundle"]
    version: Literal[1]
    capability: Literal["resumable", "inference"]
    run_id: RunId
    checkpoint: Literal["last", "best"]
    epoch: NonNegativeInt
    step: NonNegativeInt
    model: dict[str, Any]  # {"net": ..., "model": ...}: the recipe run.yaml records
    calibrators: Annotated[list[FileName], msgspec.Meta(max_length=64)]
    policies: Annotated[list[FileName], msgspec.Meta(max_length=64)]
    payloads: Annotated[list[BundlePayload], msgspec.Meta(min_length=3, max_length=192)]
    nnx_lab: Text

    def rules(self) -> Iterator[Problem]:
        paths = [p.path for p in self.payloads]
        bad = next(
            (i for i, p in enumerate(paths) if BUNDLE_PATH.fullmatch(p) is None),
            None,
        )
        listed = set(paths)
        sidecar = f"checkpoints/{self.checkpoint}.json"
        missing = next(
            (
                (field, p)
                for field, names in (
                    ("calibrators", self.calibrators),
                    ("policies", self.policies),
                    ("payloads", ["run.yaml", sidecar]),
                )
                for p in names
                if p not in listed
            ),
            None,
        )
        return found(
            [
                None
                if bad is None
                else Problem(
                    f"payloads[{bad}].path",
                    "is not a file name a bundle holds (a bundle never names a path "
                    "outside its own files)",
                    paths[bad],
                ),
                repeated(paths, "payloads", "path"),
                None
                if missing is None
                else Problem(missing[0], "names a file the payloads do not list", missing[1]),
                None
                if set(self.model) == {"net", "model"}
                else Problem("model", "holds exactly 'net' and 'model'", sorted(self.model)),
                plain_problem(self.model, "model"),
            ]
        )
