"""A saved calibrator or abstention policy from someone else (issue 20, section 2): each
hostile file is one DocumentFileError, a SchemaError and the ConfigError callers always
caught, naming the file, the field and the value. Never a bare Python exception."""

from __future__ import annotations

import json

import hostile_factories as h
import pytest

from nnx_lab import ConfigError
from nnx_lab.abstention import AbstentionPolicy, select_threshold
from nnx_lab.calibration import TemperatureCalibrator
from nnx_lab.runs import DocumentFileError, SchemaError


def _calibrator(tmp_path, **changes):
    fields = {
        "temperature": 1.7,
        "kind": "categorical",
        "class_axis": -1,
        "labels": ("cat", "dog", "fox"),
        "n_outputs": 3,
        "model_id": "sha256:abc",
        "split_id": "cal",
        "train_split_id": "train",
        "test_split_id": "test",
        "rows": 400,
        "nll_before": 0.9,
        "nll_after": 0.7,
        "iterations": 12,
    }
    return TemperatureCalibrator(**{**fields, **changes}).save(tmp_path / "calibrator.json")


def _policy(tmp_path, **select):
    import numpy as np

    rng = np.random.default_rng(0)
    top = rng.uniform(0.5, 1.0, 400)
    p = np.stack([top, 1 - top], 1)
    y = (rng.uniform(size=400) > top).astype(int)  # calibrated: wrong with 1 - top
    policy = select_threshold(
        p, y, risk_ceiling=0.3, split_id="val", test_split_id="test", labels=("a", "b"), **select
    ).require()
    return policy.save(tmp_path / "policy.json")


def test_the_files_nnx_lab_writes_load(tmp_path):
    assert TemperatureCalibrator.load(_calibrator(tmp_path)).labels == ("cat", "dog", "fox")
    assert AbstentionPolicy.load(_policy(tmp_path)).labels == ("a", "b")
    assert AbstentionPolicy.load(_policy(tmp_path, guarantee=0.6)).guarantee == 0.6


# -- the calibrator ------------------------------------------------------------------------------
def _set(path: str, value):
    *parents, key = path.split(".")

    def change(d):
        for p in parents:
            d = d[p]
        d[key] = value

    return change


def _drop(path: str):
    *parents, key = path.split(".")

    def change(d):
        for p in parents:
            d = d[p]
        del d[key]

    return change


CALIBRATOR_CASES = {
    "nll_after NaN": (_set("fit.nll_after", float("nan")), "fit.nll_after", "finite"),
    "nll_before negative": (_set("fit.nll_before", -0.5), "fit.nll_before", ">= 0"),
    "rows -5": (_set("fit.rows", -5), "fit.rows", ">= 1"),
    "rows a bool": (_set("fit.rows", True), "fit.rows", "bool"),
    "rows a string": (_set("fit.rows", "400"), "fit.rows", "str"),
    "temperature Infinity": (_set("temperature", float("inf")), "temperature", "finite"),
    "temperature 0": (_set("temperature", 0), "temperature", "> 0"),
    "model_id 5": (_set("model_id", 5), "model_id", "int"),
    "model_id blank": (_set("model_id", "  "), "model_id", "regex"),
    "labels repeated": (_set("spec.labels", ["cat", "dog", "cat"]), "spec.labels[2]", "repeats"),
    "labels too few": (_set("spec.labels", ["cat", "dog"]), "n_outputs", "2 labels"),
    "labels a string": (_set("spec.labels", "abc"), "spec.labels", "str"),
    "class_axis 0": (_set("spec.class_axis", 0), "spec.class_axis", "rows"),
    "class_axis huge": (_set("spec.class_axis", 10**6), "spec.class_axis", "<= 64"),
    "kind unknown": (_set("spec.kind", "poisson"), "spec.kind", "poisson"),
    "split ids equal": (_set("splits.test", "cal"), "splits.test", "equals splits.calibration"),
    "split missing": (_drop("splits.train"), "splits.train", "missing"),
    "fit missing": (_drop("fit"), "fit", "missing"),
    "unknown field": (_set("fit.command", "rm -rf /"), "fit.command", "not a field"),
    "n_outputs a float": (_set("n_outputs", 3.0), "n_outputs", "float"),
    "categorical one output": (
        lambda d: (d.update(n_outputs=1), d["spec"].update(labels=None)),
        "n_outputs",
        "at least 2",
    ),
}


@pytest.mark.parametrize("case", CALIBRATOR_CASES, ids=list(CALIBRATOR_CASES))
def test_a_hostile_calibrator_field_is_named(tmp_path, case):
    change, field, says = CALIBRATOR_CASES[case]
    path = h.edited(_calibrator(tmp_path), change)
    err = h.refused(TemperatureCalibrator.load, path, ConfigError, field)
    assert isinstance(err, DocumentFileError)
    assert says in str(err)
    assert "again" in err.fix


def test_numbers_that_are_not_data_are_refused_by_field(tmp_path):
    path = _calibrator(tmp_path)
    text = path.read_text()
    for literal, says in (("1e400", "finite"), ("7" * 5000, "not JSON")):
        path.write_text(text.replace('"temperature": 1.7', f'"temperature": {literal}'))
        err = h.refused(TemperatureCalibrator.load, path, ConfigError)
        assert says in str(err)
    path.write_text(text.replace('"temperature": 1.7', '"temperature": ' + "9" * 4000))
    h.refused(TemperatureCalibrator.load, path, ConfigError, "temperature")


# -- the policy ----------------------------------------------------------------------------------
POLICY_CASES = {
    "threshold NaN": (_set("threshold", float("nan")), "threshold", "finite"),
    "threshold above 1": (_set("threshold", 1.5), "threshold", "<= 1"),
    "risk_ceiling missing": (_drop("risk_ceiling"), "risk_ceiling", "missing"),
    "labels repeated": (_set("labels", ["a", "a"]), "labels[1]", "repeats"),
    "labels too few": (_set("labels", ["a"]), "n_classes", "1 labels"),
    "calibrated a string": (
        _set("calibration.calibrated", "yes"),
        "calibration.calibrated",
        "str",
    ),
    "calibrated without temperature": (
        _set("calibration.calibrated", True),
        "calibration.temperature",
        "records its calibrator",
    ),
    "temperature Infinity": (
        _set("calibration.temperature", float("inf")),
        "calibration.temperature",
        "finite",
    ),
    "accepted beyond total": (_set("validation.accepted", 10**6), "validation.accepted", "more"),
    "errors negative": (_set("validation.errors", -1), "validation.errors", ">= 0"),
    "test split equals validation": (
        _set("splits.test", "val"),
        "splits.test",
        "equals splits.validation",
    ),
    "model_id 5": (_set("model_id", 5), "model_id", "int"),
    "kind unknown": (_set("kind", "entropy"), "kind", "entropy"),
    "guarantee a number": (_set("guarantee", 0.9), "guarantee", "float"),
}


@pytest.mark.parametrize("case", POLICY_CASES, ids=list(POLICY_CASES))
def test_a_hostile_policy_field_is_named(tmp_path, case):
    change, field, says = POLICY_CASES[case]
    path = h.edited(_policy(tmp_path), change)
    err = h.refused(AbstentionPolicy.load, path, ConfigError, field)
    assert says in str(err)


def test_a_guarantee_whose_bound_exceeds_the_ceiling_is_refused(tmp_path):
    path = h.edited(
        _policy(tmp_path, guarantee=0.6), _set("guarantee.risk_bound", 0.99)
    )  # a ceiling of 0.3
    h.refused(AbstentionPolicy.load, path, ConfigError, "guarantee.risk_bound")


# -- bytes that are not a document, for both ------------------------------------------------------
LOADERS = {"calibrator": TemperatureCalibrator.load, "policy": AbstentionPolicy.load}


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("data", h.HOSTILE_BYTES, ids=list(h.HOSTILE_BYTES))
def test_hostile_bytes_are_one_document_error(tmp_path, loader, data):
    path = tmp_path / "doc.json"
    path.write_bytes(h.HOSTILE_BYTES[data])
    h.refused(LOADERS[loader], path, ConfigError, "")


@pytest.mark.parametrize("loader", LOADERS)
def test_wrong_types_at_the_top_are_refused(tmp_path, loader):
    path = tmp_path / "doc.json"
    for value in ([1, 2], "a string", 5, None):
        h.write_json(path, value)
        err = h.refused(LOADERS[loader], path, ConfigError, "")
        assert "not an object" in str(err)
    h.write_json(path, {"format": ["nnx_lab.abstention_policy"]})
    h.refused(LOADERS[loader], path, ConfigError, "format")


@pytest.mark.parametrize("loader", LOADERS)
def test_a_100_mb_document_is_refused_without_reading_it(tmp_path, loader):
    path = h.a_100_mb_file(tmp_path / "doc.json")
    h.refused_without_reading(LOADERS[loader], path, ConfigError)


@pytest.mark.parametrize("loader", LOADERS)
def test_a_pipe_or_a_folder_is_refused_without_opening_it(tmp_path, loader):
    h.refused(LOADERS[loader], h.a_pipe(tmp_path / "pipe.json"), ConfigError, "")
    (tmp_path / "folder.json").mkdir()
    h.refused(LOADERS[loader], tmp_path / "folder.json", ConfigError, "")


def test_the_limit_can_be_raised(tmp_path, monkeypatch):
    from nnx_lab.runs import _schema

    path = _calibrator(tmp_path)
    monkeypatch.setattr(_schema, "LIMITS", _schema.Limits(file_bytes=100))
    err = h.refused(TemperatureCalibrator.load, path, ConfigError, "")
    assert "NNX_MAX_FILE_BYTES" in err.fix
    monkeypatch.setattr(_schema, "LIMITS", _schema.Limits())
    assert TemperatureCalibrator.load(path).temperature == 1.7


def test_a_refusal_is_a_schema_error_with_the_value(tmp_path):
    path = h.edited(_calibrator(tmp_path), _set("fit.rows", -5))
    with pytest.raises(SchemaError) as info:
        TemperatureCalibrator.load(path)
    assert (info.value.field, info.value.value) == ("fit.rows", -5)
    assert json.loads(path.read_text())["fit"]["rows"] == -5  # the reader wrote nothing
