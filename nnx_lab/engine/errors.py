"""Errors that name the field, the value and the fix."""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DataError",
    "PrecisionUnsupportedError",
    "PredictionValidationError",
    "ResumeError",
    "RunDirectoryError",
    "TrainingStateError",
]


class ConfigError(ValueError):
    """A configuration value was refused. Raised before any side effect."""

    def __init__(self, field: str, value: object, fix: str) -> None:
        self.field, self.value, self.fix = field, value, fix
        super().__init__(f"{field}={_show(value)} is invalid: {fix}")


class DataError(ValueError):
    """The training or validation data was refused. Raised before the run is reserved."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(f"{field}: {problem}; {fix}")


class PredictionValidationError(ValueError):
    """Logits, a ``ProbabilitySpec`` or a prediction's use was refused (§2.13): a label
    count that does not match the class axis, an invalid axis, non-finite logits, or
    class indices asked of 0/1 indicators."""

    def __init__(self, field: str, problem: str, fix: str) -> None:
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(f"{field}: {problem}; {fix}")


class PrecisionUnsupportedError(RuntimeError):
    """The requested precision cannot run on the model's device (and no fallback was named)."""


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class ResumeError(ValueError):
    """A resume request was refused before the model or any run was touched."""


class TrainingStateError(ResumeError):
    """A checkpoint's training state is not one this nnx_lab can restore."""


class RunDirectoryError(RuntimeError):
    """A run's directory was deleted or replaced under the process writing it."""
