"""The on-disk run format, readable without torch.

A run lives in ``<runs root>/<id>/``: ``run.yaml`` (the hashed configuration),
``metadata.yaml`` (environment, status, writer), ``metrics.jsonl`` (the event log) and
``checkpoints/``. This package reads and checks those files; it never imports torch, so
the Jupyter server extension and other processes can use it cheaply. The engine writes
runs through ``nnx_lab.engine`` and reads them through here.
"""

from ._atomic import atomic_write_bytes, atomic_write_json, atomic_write_yaml, file_lock, read_json
from ._compare import (
    ABSENT,
    ACTIONS,
    RUN_KNOBS,
    DriftReport,
    DriftRow,
    compare_many,
    compare_records,
)
from ._control import STOP_REQUEST, read_stop_request, request_stop
from ._document import DocumentFileError, DocumentType
from ._drift_record import (
    BINDING_FILE,
    ENVIRONMENT_KEYS,
    PLAN_FILE,
    Record,
    display_code,
    environment_now,
    flatten,
    locate_run,
    read_plan_file,
    run_record,
)
from ._events import (
    HOOKS,
    CheckpointWritten,
    EpochEnded,
    EpochStarted,
    Event,
    RunEnding,
    RunFinished,
    RunStarted,
    StepEnded,
    StepMetrics,
    StepRecord,
    SweepFinished,
    SweepPoints,
    SweepStarted,
    event_from_json,
)
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
from ._output import config_report_enabled, emit, set_config_report
from ._provenance import (
    PROVENANCE_FILE,
    ExperimentManifest,
    Provenance,
    ProvenanceFileError,
    check_manifest,
    read_provenance,
    record_attempt,
)
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
from ._schema import SchemaError, parse_json
from ._schemas.data import (
    SplitFileError,
    SplitManifestFile,
    StandardizerFile,
    StandardizerFileError,
)
from ._schemas.documents import CalibratorFile, PolicyFile
from ._schemas.plan import PLAN_FORMAT, PlanSchemaError, check_plan_json, read_plan_json
from ._schemas.reading import check_header, check_shape, read_file, read_json_file
from ._schemas.sidecar import TENSORS_FILE, CheckpointFileError, SidecarFile, state_problem
from ._schemas.tensors import check_tensors_header

__all__ = [
    "ABSENT",
    "ACTIONS",
    "BINDING_FILE",
    "ENVIRONMENT_KEYS",
    "FOLLOW_ENDINGS",
    "FOLLOW_HOOKS",
    "FORMAT_VERSION",
    "HEARTBEAT_S",
    "HOOKS",
    "INTERRUPTED",
    "PLAN_FILE",
    "PLAN_FORMAT",
    "PROVENANCE_FILE",
    "RUN_ID_LENGTH",
    "RUN_KNOBS",
    "STALE_AFTER_S",
    "STOP_REQUEST",
    "TENSORS_FILE",
    "CalibratorFile",
    "CheckpointFileError",
    "CheckpointWritten",
    "DocumentFileError",
    "DocumentType",
    "DriftReport",
    "DriftRow",
    "EpochEnded",
    "EpochStarted",
    "Event",
    "ExperimentManifest",
    "JsonlReader",
    "LogDamagedError",
    "LogFollower",
    "PlanSchemaError",
    "PolicyFile",
    "Provenance",
    "ProvenanceFileError",
    "Record",
    "RunEnding",
    "RunFinished",
    "RunRecordError",
    "RunStarted",
    "SchemaError",
    "SidecarFile",
    "SplitFileError",
    "SplitManifestFile",
    "StandardizerFile",
    "StandardizerFileError",
    "StepEnded",
    "StepMetrics",
    "StepRecord",
    "SweepFinished",
    "SweepPoints",
    "SweepStarted",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_yaml",
    "canonical_json",
    "check_header",
    "check_manifest",
    "check_plan_json",
    "check_shape",
    "check_tensors_header",
    "compare_many",
    "compare_records",
    "config_report_enabled",
    "damaged_row",
    "display_code",
    "effective_status",
    "emit",
    "environment_now",
    "event_from_json",
    "file_lock",
    "find_run_id",
    "flatten",
    "is_run_id",
    "list_runs",
    "locate_run",
    "metadata_row",
    "parse_json",
    "parse_record",
    "read_file",
    "read_json",
    "read_json_file",
    "read_jsonl",
    "read_plan_file",
    "read_plan_json",
    "read_provenance",
    "read_record",
    "read_stop_request",
    "record_attempt",
    "request_stop",
    "resolve_runs_root",
    "run_dir",
    "run_id_for",
    "run_record",
    "run_rows",
    "set_config_report",
    "state_problem",
    "validate_run_id",
    "writer_alive",
    "writer_identity",
]
