"""The shapes of two run-folder files a report reads: ``binding.json`` (what each field
of a plan's fit resolved to, written by ``plan.fit``) and ``bundles.json`` (the bundles
``export_bundle`` wrote from the run: each one's manifest digest, its checkpoint, the
weights fingerprint of that checkpoint and the documents it carries).

Both are written by nnx_lab (atomically); read back strictly: no unknown field, no
missing one, ids of their shape. Values a binding row holds are plain JSON (whatever the
field holds); they are shown, never called.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

import msgspec

from ...errors import ConfigError
from .._schema import NonNegativeInt
from .reading import HEX64, Problem, Refusal, Text, found, plain_problem

__all__ = [
    "BUNDLES_FILE",
    "BUNDLES_FORMAT",
    "BindingFile",
    "BundleExport",
    "BundleExportsFile",
    "RunFileError",
]

BUNDLES_FILE = "bundles.json"
BUNDLES_FORMAT = "nnx_lab.run_bundles"
RunId = Annotated[str, msgspec.Meta(pattern=r"\A[0-9a-f]{32}\Z")]
Note = Annotated[str, msgspec.Meta(max_length=65536)]
Fingerprint = Annotated[str, msgspec.Meta(pattern=r"\Asha256:[0-9a-f]{64}\Z")]


class RunFileError(Refusal, ConfigError):
    """A run folder's ``binding.json`` or ``bundles.json`` that is not what nnx_lab
    wrote: a ``SchemaError`` naming the file and the field, and a ``ConfigError``."""


# -- binding.json ---------------------------------------------------------------------------------
class BindingRow(msgspec.Struct, forbid_unknown_fields=True):
    path: Text
    value: Any
    source: Literal["default", "plan", "call"]
    via: Text
    default: Any
    plan: Any
    plan_set: bool
    call: Any
    call_set: bool
    in_run_id: bool


class BindingObject(msgspec.Struct, forbid_unknown_fields=True):
    what: Text
    description: Note
    via: Note


class BindingFile(msgspec.Struct, forbid_unknown_fields=True):
    """``{"run_id", "attempt_id", **BindingReport.to_json()}`` (plans/_execution.py)."""

    run_id: RunId
    attempt_id: Text
    rows: list[BindingRow]
    objects: list[BindingObject]
    text: Note

    def rules(self) -> Iterator[Problem]:
        return found(
            [
                plain_problem(
                    [[r.value, r.default, r.plan, r.call] for r in self.rows], "rows", finite=False
                )
            ]
        )


# -- bundles.json -------------------------------------------------------------------------------
class CheckpointWeights(msgspec.Struct, forbid_unknown_fields=True):
    """A checkpoint's weights when the bundle was exported: the tensors file's SHA-256
    (from its sidecar; it tells whether the checkpoint was overwritten since) and the
    ``model_fingerprint`` a calibrator or policy fitted on those weights records."""

    type: Literal["last", "best"]
    tensors_sha256: HEX64
    fingerprint: Fingerprint


class BundleExport(msgspec.Struct, forbid_unknown_fields=True):
    path: Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]
    archive: bool
    manifest_sha256: HEX64
    capability: Literal["resumable", "inference"]
    checkpoint: Literal["last", "best"]
    epoch: NonNegativeInt
    step: NonNegativeInt
    written_at: Annotated[str, msgspec.Meta(max_length=64)]
    weights: list[CheckpointWeights]
    calibrators: list[dict[str, Any]]  # each a CalibratorFile, checked when it is shown
    policies: list[dict[str, Any]]  # each a PolicyFile


class BundleExportsFile(msgspec.Struct, forbid_unknown_fields=True):
    format: Literal["nnx_lab.run_bundles"]
    version: Literal[1]
    run_id: RunId
    bundles: Annotated[list[BundleExport], msgspec.Meta(max_length=10_000)]

    def rules(self) -> Iterator[Problem]:
        return found(
            [
                plain_problem([b.calibrators for b in self.bundles], "bundles.calibrators"),
                plain_problem([b.policies for b in self.bundles], "bundles.policies"),
            ]
        )
