"""A run's name: the label a person reads first ("high lr"), recorded in ``metadata.yaml``.

A name comes from ``NNTrainParams(name=...)`` (a plan's ``train.name``, a branch's name
in a race) and can be changed later, by the runs panel's rename or ``rename_run``. It is
never part of the run id: two runs of the same configuration under different names are
the same run, and a rename changes nothing but the name.

Two processes write ``metadata.yaml`` while a run trains: its writer (the heartbeat, the
progress, the end) and whoever renames it (the Jupyter server). Both rewrite the whole
file, atomically, under one lock: an exclusive ``flock`` on the run's folder itself (its
inode outlives every atomic replace of the files in it, and taking it creates no file).
Under that lock the writer takes the name from the file on disk before it writes
(``write_run_metadata``), and a rename reads the file, changes the name and writes it
back (``rename_run``): neither can lose the other's change.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ._atomic import atomic_write_yaml
from ._records import parse_record, read_plain
from ._schema import LIMITS
from ._schemas.records import RUN_NAME_MAX

__all__ = [
    "RUN_NAME_MAX",
    "check_run_name",
    "metadata_lock",
    "remember_metadata",
    "rename_run",
    "write_run_metadata",
]

# Characters that would make a name lie about itself on screen: line breaks and
# separators, and the bidirectional overrides that show text in another order.
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_METADATA = "metadata.yaml"


def check_run_name(
    value: Any, field: str = "NNTrainParams.name", *, clearing: bool = False
) -> str | None:
    """``value`` as a run name (stripped of surrounding spaces), or None for no name.

    A name is text of 1 to ``RUN_NAME_MAX`` characters with no control character, line
    break or direction override. ``clearing`` lets an empty text mean "no name" (the
    panel's rename); otherwise an empty name is refused (pass None). A refusal is a
    ``ConfigError`` naming ``field``, the value and the fix.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(field, value, "pass the run's name as text, e.g. 'high lr', or None")
    name = value.strip()
    if not name:
        if clearing:
            return None
        raise ConfigError(field, value, "pass a name with at least one visible character, or None")
    if len(name) > RUN_NAME_MAX:
        raise ConfigError(
            field,
            f"{name[:40]}… ({len(name)} characters)",
            f"use at most {RUN_NAME_MAX} characters: the name is a label; keep notes elsewhere",
        )
    for ch in name:
        if ch in _BIDI or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp"):
            raise ConfigError(
                field,
                name,
                f"the name holds {ch!r} (a line break, a control or a direction character): "
                "use plain text on one line",
            )
    return name


@contextlib.contextmanager
def metadata_lock(run_dir: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the lock under which ``metadata.yaml`` of the run in ``run_dir`` is rewritten."""
    fd = os.open(run_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _name_on_disk(
    path: Path, last: tuple[bytes, str | None] | None = None
) -> tuple[bool, str | None]:
    """(known, name) of the record at ``path``: known is False when there is no
    readable record to take it from (the writer's own name then stands). ``last``: the
    bytes this process last wrote there and their name, taken when the file holds them."""
    try:
        raw = read_plain(path, LIMITS.record_bytes)
        if last is not None and raw == last[0]:
            return True, last[1]
        record = parse_record(raw, path)
    except (OSError, ValueError):  # missing, damaged, a link: the writer's view stands
        return False, None
    name = record.get("name")
    return True, name if isinstance(name, str) else None


# The bytes of the metadata.yaml this process last wrote per run, with the name they
# hold: a file that still holds those bytes needs no parse to know its name (a rename
# or an edit changes them), so a run's several writes parse the record once.
_WRITTEN: dict[str, tuple[bytes, str | None]] = {}
_WRITTEN_MAX = 256


def remember_metadata(
    run_dir: str | os.PathLike[str], raw: bytes, metadata: dict[str, Any]
) -> None:
    """Note that ``run_dir/metadata.yaml`` holds ``raw``, written from ``metadata`` (a
    reservation writes it in a staging folder then renames the folder into place)."""
    key = os.path.abspath(Path(run_dir) / _METADATA)
    held = metadata.get("name")
    _WRITTEN.pop(key, None)
    _WRITTEN[key] = (raw, held if isinstance(held, str) else None)
    if len(_WRITTEN) > _WRITTEN_MAX:
        del _WRITTEN[next(iter(_WRITTEN))]


def write_run_metadata(run_dir: str | os.PathLike[str], metadata: dict[str, Any]) -> None:
    """Write a run's ``metadata.yaml`` from its writer's ``metadata``, keeping the name
    the file holds (a rename since the last write): ``metadata["name"]`` is updated to it
    first, so the writer's record and the file agree."""
    run_dir = Path(run_dir)
    path = run_dir / _METADATA
    key = os.path.abspath(path)
    with metadata_lock(run_dir):
        known, name = _name_on_disk(path, _WRITTEN.get(key))
        if known:
            if name is None:
                metadata.pop("name", None)
            else:
                metadata["name"] = name
        _WRITTEN.pop(key, None)
        remember_metadata(run_dir, atomic_write_yaml(path, metadata), metadata)


def rename_run(
    run_dir: str | os.PathLike[str], name: Any, *, max_bytes: int | None = None
) -> dict[str, Any]:
    """Give the run in ``run_dir`` the name ``name`` (an empty text or None removes it):
    ``metadata.yaml`` is read through its schema, its ``name`` set, and written back
    atomically under the writer's lock; nothing else in the run changes. Returns the
    record as written. A bad name is a ``ConfigError``; a missing record
    ``FileNotFoundError``; a damaged one a ``RecordSchemaError``."""
    checked = check_run_name(name, "name", clearing=True)
    run_dir = Path(run_dir)
    path = run_dir / _METADATA
    with metadata_lock(run_dir):
        raw = read_plain(path, LIMITS.record_bytes if max_bytes is None else max_bytes)
        record = parse_record(raw, path)
        if checked is None:
            record.pop("name", None)
        else:
            record["name"] = checked
        atomic_write_yaml(path, record)
    return record
