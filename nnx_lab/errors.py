"""One error family for the whole package: every error nnx-lab raises derives from
``NNxError``, and each class also keeps the builtin base it always had (``ValueError``,
``RuntimeError``), so ``except ValueError`` in a user's code keeps working.

This module sits on the bottom floor: it imports nothing of the package and no torch,
so every layer (runs, data, engine, tools, widgets, server) can raise from it.

Two shapes recur and are written once here:

- a refused value: ``field``, ``value`` and ``fix`` (``FieldError`` and its children);
- a damaged file: ``path``, ``reason`` and, where it has one, ``line`` (``FileError``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = [
    "AbstentionError",
    "AbstentionSchemaError",
    "AdapterFileError",
    "AdapterMismatchError",
    "CalibrationError",
    "CalibrationFitError",
    "CalibrationMismatchError",
    "CheckpointCorruptError",
    "ComponentRestoreError",
    "ConfigError",
    "DataError",
    "FieldError",
    "FileError",
    "InputTypeError",
    "LogDamagedError",
    "MetricMergeError",
    "MissingModelFactoryError",
    "ModelFingerprintError",
    "MonitorUnavailableError",
    "NNxError",
    "NonFiniteLossError",
    "PrecisionUnsupportedError",
    "PredictionValidationError",
    "PreprocessingError",
    "ResumeError",
    "ResumeNotFoundError",
    "ResumePointError",
    "RunDirectoryError",
    "RunRecordError",
    "SplitError",
    "StandardizerError",
    "StreamClosedError",
    "TaskValidationError",
    "TrainingStateError",
]

# Where nnx-lab deliberately differs from NNx 0.4.1; errors that exist because of such a
# difference name it, so a user porting NNx code finds the reason.
DIFFERENCES_DOC = "docs/nnx_differences.md"

_FILE_FIX = "Restore the file, or delete the run and train it again"


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class NNxError(Exception):
    """The root of every error nnx-lab raises."""


class FieldError(NNxError):
    """The shape of a refused value: which field, what value, and how to fix it."""

    field: str
    value: object
    fix: str


class FileError(NNxError):
    """The shape of a file that cannot be read as what it claims to be: its ``path``,
    the ``reason``, the ``line`` where that applies (else ``None``) and the ``fix``."""

    def __init__(
        self, path: str | Path, reason: str, *, line: int | None = None, fix: str = _FILE_FIX
    ) -> None:
        self.path, self.reason, self.line, self.fix = Path(path), reason, line, fix
        where = f"{path}, line {line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {reason}; {fix}")


# --- refused values ---------------------------------------------------------------------


class ConfigError(FieldError, ValueError):
    """A configuration value was refused. Raised before any side effect."""

    def __init__(self, field: str, value: object, fix: str) -> None:
        self.field, self.value, self.fix = field, value, fix
        super().__init__(f"{field}={_show(value)} is invalid: {fix}")


class DataError(FieldError, ValueError):
    """The training or validation data was refused. Raised before the run is reserved."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        self.field, self.problem, self.fix = field, problem, fix
        self.value = problem
        super().__init__(f"{field}: {problem}; {fix}")


class InputTypeError(DataError, TypeError):
    """Prediction input of a type nnx-lab cannot read (NNx raises ``TypeError`` there)."""


class TaskValidationError(ConfigError):
    """A ``TaskSpec`` that cannot be built or does not fit the loss or the network."""


class MetricMergeError(ConfigError):
    """``StreamingMetrics.merge`` of accumulators with different declarations."""


class PredictionValidationError(FieldError, ValueError):
    """Logits, a ``ProbabilitySpec`` or a prediction's use was refused (§2.13): a label
    count that does not match the class axis, an invalid axis, non-finite logits, or
    class indices asked of 0/1 indicators."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        self.field, self.problem, self.fix = field, problem, fix
        self.value = problem
        super().__init__(f"{field}: {problem}; {fix}")


class MissingModelFactoryError(ConfigError, LookupError):
    """A ``ModelSpec`` names a factory this process has not registered (§2.14);
    ``registered`` lists the ``(id, version)`` pairs that are."""

    def __init__(self, field: str, value: object, registered: list[tuple[str, int]]) -> None:
        self.registered = list(registered)
        listed = ", ".join(f"{i!r} v{v}" for i, v in self.registered) or "none"
        super().__init__(
            field,
            value,
            f"register it first: register_model_factory(id, version, factory) in code the "
            f"process imports (registered now: {listed})",
        )


class PrecisionUnsupportedError(NNxError, RuntimeError, ValueError):
    """The requested precision cannot run on the model's device (and no fallback was
    named). A ``ValueError`` too, as NNx's is."""


class ResumeError(NNxError, ValueError):
    """A resume request was refused before the model or any run was touched."""


class ResumeNotFoundError(ResumeError, FileNotFoundError):
    """``resume_from_run_id`` names no run under the runs root: a ``ValueError`` as in
    NNx, and the ``FileNotFoundError`` nnx-lab raised before."""


class ResumePointError(ResumeError):
    """A checkpoint's resume point cannot be used for the resume asked of it."""


class TrainingStateError(ResumeError):
    """A checkpoint's training state is not one this nnx_lab can restore."""


class MonitorUnavailableError(NNxError, ValueError):
    """A ``MonitorSpec(on_missing="error")`` / ``(on_nonfinite="error")`` found no
    usable value at an epoch (NNx's class, a ValueError)."""


class ComponentRestoreError(ResumeError):
    """A resume found the run's components' saved states unfit: every problem at once,
    before any state was loaded. ``.problems`` lists them."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(
            f"cannot restore the run's components ({len(self.problems)} problem(s)):\n{lines}"
        )


class NonFiniteLossError(NNxError, FloatingPointError):
    """An fp32 training loss was NaN or infinite; raised before its backward pass, so
    the weights are those before that step (as in NNx). ``.loss`` is the value."""

    def __init__(self, message: str, loss: float) -> None:
        self.loss = loss
        super().__init__(message)


class RunDirectoryError(NNxError, RuntimeError):
    """A run's directory was deleted or replaced under the process writing it."""


class SplitError(NNxError, ValueError):
    """A split that cannot be planned or replayed; raised before any loader is built."""


class PreprocessingError(NNxError, ValueError):
    """A preprocessing step (the standardizer) refused its input, rows or state."""


class StandardizerError(PreprocessingError):
    """Rows the standardizer cannot transform, or a file it cannot load."""


class CalibrationError(ConfigError):
    """Temperature calibration refused an input, a split or a calibrator's fields."""


class CalibrationMismatchError(CalibrationError):
    """A calibrator applied to another model or another label order (no ``override=``)."""


class ModelFingerprintError(CalibrationError, TypeError):
    """A model whose state cannot be fingerprinted (a sparse, meta or uninitialized
    tensor, a non-data extra state): a ``TypeError`` too, as NNx's is."""


class CalibrationFitError(CalibrationError):
    """``fit.require()`` on a fit that found no temperature; ``.reason`` says why."""

    def __init__(self, reason: str, fit: Any) -> None:
        self.reason, self.fit = reason, fit
        self.field, self.value, self.fix = "fit", reason, "see fit.reason"
        NNxError.__init__(self, f"temperature fit failed: {reason}")


class AbstentionError(NNxError, ValueError):
    """``selection.require()`` when no threshold meets the risk ceiling; ``.reason``."""

    def __init__(self, reason: str, selection: Any) -> None:
        self.reason, self.selection = reason, selection
        super().__init__(f"no abstention threshold: {reason}")


class AbstentionSchemaError(AbstentionError, ConfigError):
    """An abstention policy applied to predictions of another schema: other labels,
    another model, another input field or calibrator."""

    def __init__(self, field: str, value: object, fix: str) -> None:
        self.reason, self.selection = fix, None
        ConfigError.__init__(self, field, value, fix)


class StreamClosedError(NNxError, RuntimeError):
    """A prediction stream read outside its ``with`` block, or a second time."""


# --- damaged files ----------------------------------------------------------------------


class RunRecordError(FileError, ValueError):
    """A run's YAML record is unreadable (damaged, truncated, not a mapping)."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(path, reason, fix="the run's record is damaged. " + _FILE_FIX)


class LogDamagedError(FileError, ValueError):
    """A line of a run's log is not a JSON object (and is not a torn last line)."""

    def __init__(self, path: str | Path, line: int, reason: str) -> None:
        super().__init__(path, reason, line=line, fix="the log is damaged. " + _FILE_FIX)


class CheckpointCorruptError(NNxError, RuntimeError):
    """A checkpoint does not check out: a checksum, its type or its run does not match."""


# --- parameter-efficient fine-tuning (nnx_lab.peft) --------------------------------------


class AdapterFileError(FileError, ValueError):
    """A saved adapter file is not one: unreadable, not nnx-lab's format, or its tensors
    do not match the digest it was written with (edited or damaged)."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(path, reason, fix="save the adapters again (save_lora_weights)")


class AdapterMismatchError(ConfigError):
    """A saved adapter file does not fit the model it is loaded into: other adapters, or
    another base model (its fingerprint differs). Raised before any weight is copied."""
