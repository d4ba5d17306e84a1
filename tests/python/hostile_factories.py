"""Hostile files for the strict readers (issue 20, section 2): bytes no reader may turn
into a bare Python exception, a hang or an allocation of the file's size.

``refused(load, path, family)`` runs a loader on a hostile file and returns its error
after checking the promise every reader makes: one error of the family (and of
``SchemaError``) that names the file.
"""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from nnx_lab.runs import SchemaError

# Bytes that are not a document, whatever the document: each is refused before any
# field is looked at.
HOSTILE_BYTES = {
    "not-json": b"{this is not json",
    "not-utf8": b"\x80\x04\x95 a pickle",
    "5000-digits": b'{"a": ' + b"7" * 5000 + b"}",
    "deep-1e5": b"[" * 100_000 + b"]" * 100_000,
    "deep-100": b'{"a": ' + b"[" * 100 + b"]" * 100 + b"}",
    "empty": b"",
}


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, allow_nan=True))
    return path


def edited(path: Path, change) -> Path:
    """Rewrite the JSON at ``path`` through ``change(data)`` (which edits in place)."""
    data = json.loads(path.read_text())
    change(data)
    return write_json(path, data)


def refused(load, path: Path, family: type[Exception], field: str | None = None) -> SchemaError:
    """The error ``load(path)`` raises: of ``family`` and ``SchemaError``, naming the
    file (and ``field``, when given)."""
    with pytest.raises(family) as info:
        load(path)
    err = info.value
    assert isinstance(err, SchemaError), f"{type(err).__name__} is not a SchemaError: {err}"
    assert str(path) in str(err)
    if field is not None:
        assert err.field == field, f"named {err.field!r}, not {field!r}: {err}"
    return err


def a_100_mb_file(path: Path) -> Path:
    """A sparse 100 MB file that starts like JSON: costs no disk, and reading it would
    cost 100 MB of memory."""
    with open(path, "wb") as fh:
        fh.write(b'{"a": "')
        fh.truncate(100 << 20)
    return path


def refused_without_reading(load, path: Path, family: type[Exception]) -> SchemaError:
    """``load`` refuses the 100 MB file at ``path`` by its size, allocating a small
    fraction of it."""
    tracemalloc.start()
    try:
        err = refused(load, path, family, "")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "bytes, more than" in str(err)
    assert "NNX_MAX_FILE_BYTES" in str(err)
    # what the loader itself needs (a run's other records, first imports) stays far
    # below the 100 MB reading the file would cost
    assert peak < 8 << 20, f"the refusal allocated {peak:,} bytes"
    return err


def a_pipe(path: Path) -> Path:
    """A named pipe where a file should be: opening it for reading would block."""
    os.mkfifo(path)
    return path
