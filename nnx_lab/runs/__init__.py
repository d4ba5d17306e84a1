"""The on-disk run format, readable without torch.

A run lives in ``<runs root>/<id>/``: ``run.yaml`` (the hashed configuration),
``metadata.yaml`` (environment, status, writer), ``metrics.jsonl`` (the event log) and
``checkpoints/``. This package reads and checks those files; it never imports torch, so
the Jupyter server extension and other processes can use it cheaply. The engine writes
runs through ``nnx_lab.engine`` and reads them through here.
"""

from ._control import STOP_REQUEST, read_stop_request, request_stop
from ._follow import FOLLOW_ENDINGS, FOLLOW_HOOKS, LogFollower
from ._format import FORMAT_VERSION, canonical_json, run_id_for
from ._ids import (
    RUN_ID_LENGTH,
    find_run_id,
    is_run_id,
    resolve_runs_root,
    run_dir,
    validate_run_id,
)
from ._jsonl import JsonlReader, LogDamagedError, read_jsonl
from ._listing import damaged_row, list_runs, metadata_row, run_rows
from ._records import (
    HEARTBEAT_S,
    INTERRUPTED,
    STALE_AFTER_S,
    RunRecordError,
    effective_status,
    parse_record,
    read_record,
    writer_alive,
    writer_identity,
)

__all__ = [
    "FOLLOW_ENDINGS",
    "FOLLOW_HOOKS",
    "FORMAT_VERSION",
    "HEARTBEAT_S",
    "INTERRUPTED",
    "RUN_ID_LENGTH",
    "STALE_AFTER_S",
    "STOP_REQUEST",
    "JsonlReader",
    "LogDamagedError",
    "LogFollower",
    "RunRecordError",
    "canonical_json",
    "damaged_row",
    "effective_status",
    "find_run_id",
    "is_run_id",
    "list_runs",
    "metadata_row",
    "parse_record",
    "read_jsonl",
    "read_record",
    "read_stop_request",
    "request_stop",
    "resolve_runs_root",
    "run_dir",
    "run_id_for",
    "run_rows",
    "validate_run_id",
    "writer_alive",
    "writer_identity",
]
