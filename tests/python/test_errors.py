"""One error family: every error class in the package derives from NNxError and keeps
its builtin base, so both ``except NNxError`` and ``except ValueError`` catch it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import nnx_lab
from nnx_lab import errors


def _package_error_classes() -> dict[str, type[Exception]]:
    found: dict[str, type[Exception]] = {}
    for info in pkgutil.walk_packages(nnx_lab.__path__, "nnx_lab."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, Exception)  # not SystemExit-style control flow
                and obj.__module__.startswith("nnx_lab.")
            ):
                found[f"{obj.__module__}.{name}"] = obj
    return found


def test_every_error_class_in_the_package_derives_from_nnx_error():
    classes = _package_error_classes()
    assert len(classes) >= 20  # the walk really found the family
    outside = sorted(n for n, c in classes.items() if not issubclass(c, errors.NNxError))
    assert outside == []


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("ConfigError", ValueError),
        ("DataError", ValueError),
        ("PredictionValidationError", ValueError),
        ("ResumeError", ValueError),
        ("TrainingStateError", ValueError),
        ("ComponentRestoreError", ValueError),
        ("SplitError", ValueError),
        ("StandardizerError", ValueError),
        ("CalibrationFitError", ValueError),
        ("AbstentionError", ValueError),
        ("RunRecordError", ValueError),
        ("LogDamagedError", ValueError),
        ("PlanError", ValueError),
        ("PrecisionUnsupportedError", RuntimeError),
        ("RunDirectoryError", RuntimeError),
        ("CheckpointCorruptError", RuntimeError),
    ],
)
def test_each_exported_error_keeps_its_builtin_base(name, builtin):
    cls = getattr(nnx_lab, name)
    assert issubclass(cls, errors.NNxError)
    assert issubclass(cls, builtin)


def test_a_refused_value_names_the_field_the_value_and_the_fix():
    err = nnx_lab.ConfigError("train.n_epochs", -1, "pass a positive integer")
    assert isinstance(err, errors.FieldError)
    assert (err.field, err.value, err.fix) == ("train.n_epochs", -1, "pass a positive integer")
    assert str(err) == "train.n_epochs=-1 is invalid: pass a positive integer"


def test_a_damaged_file_names_the_file_the_line_and_the_reason(tmp_path):
    err = nnx_lab.LogDamagedError(tmp_path / "metrics.jsonl", 7, "not JSON")
    assert isinstance(err, errors.FileError)
    assert (err.path.name, err.line, err.reason) == ("metrics.jsonl", 7, "not JSON")
    assert str(err).startswith(f"{tmp_path / 'metrics.jsonl'}, line 7: not JSON; ")
    record = nnx_lab.RunRecordError(tmp_path / "run.yaml", "not a mapping")
    assert record.line is None
    assert "run.yaml: not a mapping; the run's record is damaged" in str(record)


def test_the_same_classes_are_reachable_where_they_always_were():
    from nnx_lab.calibration import CalibrationFitError
    from nnx_lab.data_splits import SplitError
    from nnx_lab.engine.checkpoint import CheckpointCorruptError
    from nnx_lab.runs import LogDamagedError, RunRecordError

    assert CalibrationFitError is errors.CalibrationFitError
    assert SplitError is errors.SplitError
    assert CheckpointCorruptError is errors.CheckpointCorruptError
    assert (LogDamagedError, RunRecordError) == (errors.LogDamagedError, errors.RunRecordError)
