"""Reading back what W&B wrote offline: the records of a ``run-<id>.wandb`` file.

wandb 0.31 ships no Python reader of its own log (``wandb.sdk.internal.datastore`` and
``wandb sync --view`` were removed when the writer moved into wandb-core; the
``wandb.beta.LocalApi`` reader is an open pull request, wandb/wandb#12745). So this reads
the file as wandb-core writes it: the LevelDB log framing W&B documents for it (a 7-byte
file header ``:W&B`` + magic 0xBEE1 + version 0, then 32 KiB blocks of records, each a
CRC-32, a length and a FULL/FIRST/MIDDLE/LAST type), each record one
``wandb_internal_pb2.Record``, decoded with wandb's own protobuf classes. The checksum of
every chunk is verified, so a misread fails loudly.
"""

from __future__ import annotations

import json
import struct
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wandb.proto import wandb_internal_pb2

_BLOCK = 32768
_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def records(path: Path) -> list[Any]:
    data = Path(path).read_bytes()
    ident, magic, version = struct.unpack("<4sHB", data[:_HEADER])
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), (ident, magic, version)
    out, pos, pending = [], _HEADER, b""
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:  # the rest of a block too short for a header is padding
            pos += left
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + _HEADER])
        if (crc, length, kind) == (0, 0, 0):
            break  # zeros past the last record
        chunk = data[pos + _HEADER : pos + _HEADER + length]
        want = zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF
        assert crc == want, f"bad checksum at byte {pos}"
        pos += _HEADER + length
        if kind == _FULL:
            out.append(chunk)
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            out.append(pending + chunk)
            pending = b""
    parsed = []
    for raw in out:
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(raw)
        parsed.append(rec)
    return parsed


@dataclass
class OfflineRun:
    """What one offline run holds: its name and project, its config, every history
    row (``{key: value}``, with ``_step``) and its summary."""

    name: str = ""
    project: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    exit_code: int | None = None


def _key(item: Any) -> str:
    return "/".join(item.nested_key) if item.nested_key else item.key


def read_run(run_dir: Path, wait_s: float = 60.0) -> OfflineRun:
    """The run, once its exit record is in the file: ``run.finish()`` returns before
    wandb-core has written an offline run's records (they land a moment later), so this
    reads again until the exit record is there, for at most ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        run = _read_once(run_dir)
        if run.exit_code is not None or time.monotonic() > deadline:
            return run
        time.sleep(0.1)


def _read_once(run_dir: Path) -> OfflineRun:
    (path,) = Path(run_dir).glob("run-*.wandb")
    run = OfflineRun()
    for rec in records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            run.name, run.project = rec.run.display_name, rec.run.project
            for item in rec.run.config.update:
                run.config[_key(item)] = json.loads(item.value_json)
        elif kind == "config":
            for item in rec.config.update:
                run.config[_key(item)] = json.loads(item.value_json)
        elif kind == "history":
            run.history.append({_key(i): json.loads(i.value_json) for i in rec.history.item})
        elif kind == "summary":
            for item in rec.summary.update:
                run.summary[_key(item)] = json.loads(item.value_json)
        elif kind == "exit":
            run.exit_code = rec.exit.exit_code
    return run


def offline_runs(wandb_dir: Path) -> list[Path]:
    """The offline run folders under a ``dir=`` (W&B writes them in ``dir/wandb``)."""
    return sorted(Path(wandb_dir, "wandb").glob("offline-run-*"))
