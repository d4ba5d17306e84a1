"""Reading a run's ``binding.json`` and reading / appending its ``bundles.json``
(shapes in ``_schemas/run_files.py``). Torch-free: the report and the server read them.

``bundles.json`` is how a run knows the bundles exported from it: ``export_bundle``
appends one entry after the bundle is renamed into place (under the run's lock file,
written atomically: a reader sees the old list or the new one), so the report of the
run, the monitor's and the runs panel's "Report" buttons included, shows the bundle's
digest and what it carries without being told where the bundle is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from ._atomic import atomic_write_json, file_lock
from ._drift_record import BINDING_FILE
from ._schemas.reading import read_json_file
from ._schemas.run_files import (
    BUNDLES_FILE,
    BUNDLES_FORMAT,
    BindingFile,
    BundleExportsFile,
    RunFileError,
)

__all__ = ["read_binding", "read_bundle_exports", "record_bundle_export"]

_FIX = "the file is damaged or was not written by nnx_lab; delete it (it is a record only)"


def read_binding(run_path: Path) -> BindingFile | None:
    """The run's binding report (a plan's fit wrote it), or None when it has none."""
    path = Path(run_path) / BINDING_FILE
    if not path.is_file():
        return None
    return read_json_file(path, BindingFile, RunFileError, fix=_FIX)


def read_bundle_exports(run_path: Path) -> BundleExportsFile | None:
    """The run's record of its exported bundles, or None when none was exported."""
    path = Path(run_path) / BUNDLES_FILE
    if not path.is_file():
        return None
    doc = read_json_file(path, BundleExportsFile, RunFileError, fix=_FIX)
    if doc.run_id != Path(run_path).name:
        raise RunFileError(
            path, "run_id", f"names another run than {Path(run_path).name}", value=doc.run_id
        )
    return doc


def record_bundle_export(run_path: Path, entry: dict[str, Any]) -> None:
    """Append ``entry`` (a ``BundleExport``'s fields) to the run's ``bundles.json``;
    the entry is checked against its shape before anything is written."""
    run_path = Path(run_path)
    with file_lock(run_path / f".{BUNDLES_FILE}.lock"):
        old = read_bundle_exports(run_path)
        bundles = [] if old is None else [msgspec.to_builtins(b) for b in old.bundles]
        doc = {
            "format": BUNDLES_FORMAT,
            "version": 1,
            "run_id": run_path.name,
            "bundles": [*bundles, entry],
        }
        msgspec.convert(doc, BundleExportsFile)  # a wrong entry fails here, unwritten
        atomic_write_json(run_path / BUNDLES_FILE, doc)
