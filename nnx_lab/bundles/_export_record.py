"""What ``export_bundle`` records in the run's own folder (``bundles.json``): the
bundle's path and manifest digest, its checkpoint, the weights fingerprint of each of
the run's checkpoints (LAST, BEST) and the calibrators and policies it carries.

This is how the run's report (``nnx_lab.report`` and the "Report" buttons of the monitor
and the runs panel) shows the bundle without being given it, and how a calibrator or
policy passed to the report is checked against the run's weights without torch (the
report is built by the torch-free server too): a fingerprint needs the weights, so it
is computed here, where the checkpoint is loaded anyway.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..calibration import model_fingerprint
from ..engine.checkpoint import NNCheckpoint
from ..engine.model import NNModel
from ..runs import MANIFEST_FILE, record_bundle_export

__all__ = ["export_entry", "record_export"]


def _weights(ckpt: NNCheckpoint, root: Path) -> list[dict[str, Any]]:
    out = []
    for type_ in ("last", "best"):
        if type_ == ckpt.type.value:
            loaded = ckpt
        elif (root / ckpt.run_id / "checkpoints" / f"{type_}.json").is_file():
            loaded = NNCheckpoint.load(ckpt.run_id, type_, root)
        else:
            continue
        out.append(
            {
                "type": type_,
                "tensors_sha256": loaded.sidecar["sha256"],
                "fingerprint": model_fingerprint(NNModel.from_checkpoint(loaded)),
            }
        )
    return out


def export_entry(
    ckpt: NNCheckpoint,
    root: Path,
    files: dict[str, bytes],
    manifest: dict[str, Any],
    target: Path,
    archive: bool,
) -> dict[str, Any]:
    """The entry ``record_export`` appends, computed before the bundle is written (a
    checkpoint that cannot be read fails the export before anything exists)."""
    return {
        "path": str(target.resolve()),
        "archive": archive,
        "manifest_sha256": hashlib.sha256(files[MANIFEST_FILE]).hexdigest(),
        "capability": manifest["capability"],
        "checkpoint": manifest["checkpoint"],
        "epoch": manifest["epoch"],
        "step": manifest["step"],
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "weights": _weights(ckpt, root),
        "calibrators": [json.loads(files[name]) for name in manifest["calibrators"]],
        "policies": [json.loads(files[name]) for name in manifest["policies"]],
    }


def record_export(run_path: Path, entry: dict[str, Any]) -> None:
    """Append the entry to the run's ``bundles.json``. The bundle exists already: a run
    folder that cannot be written (read-only, shared) is warned about, not an error."""
    try:
        record_bundle_export(run_path, entry)
    except OSError as exc:
        warnings.warn(
            f"the bundle {entry['path']} was written, but run {run_path.name}'s folder "
            f"could not record it ({exc}); its report will not show the bundle unless "
            "given bundle=",
            stacklevel=3,
        )
