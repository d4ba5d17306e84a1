"""Issue 29: abstention and calibration as NNx spells them: the selection's status words,
and policies and calibrators built directly with NNx's arguments."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from nnx_lab import ConfigError, ProbabilitySpec, prediction_from_logits
from nnx_lab.abstention import (
    AbstentionPolicy,
    AbstentionSchemaError,
    SelectionStatus,
    select_threshold,
)
from nnx_lab.calibration import CalibrationError, CalibrationMismatchError, TemperatureCalibrator
from nnx_lab.runs import DocumentFileError

TOP = np.array([0.9, 0.9, 0.8, 0.8, 0.8, 0.6])
P = np.stack([TOP, 1 - TOP], 1)
Y = np.array([0, 0, 1, 1, 0, 1])


def test_a_selection_status_reads_as_nnx_words_and_ours():
    found = select_threshold(P, Y, risk_ceiling=0.4, split_id="val")
    none = select_threshold(P, np.array([1, 1, 0, 0, 0, 0]), risk_ceiling=0.0, split_id="val")
    assert found.status == "ok"
    assert found.status == "selected"
    assert found.status != "no_feasible_policy"
    assert found.status != "no_threshold"
    assert none.status == "no_feasible_policy"
    assert none.status == "no_threshold"
    assert none.status != "ok"
    assert (found.status.nnx, none.status.nnx) == ("ok", "no_feasible_policy")
    assert found.ok
    assert not none.ok
    # what the widget and saved states carry stays nnx-lab's word
    assert json.dumps({"status": found.status}) == '{"status": "selected"}'
    assert str(none.status) == "no_threshold"
    assert SelectionStatus("ok") == "selected"
    with pytest.raises(ValueError, match="'ok'"):
        SelectionStatus("fine")


# -- TemperatureCalibrator(temperature, labels, model_id, split_id, ...) ------------------------
def _prediction(labels=("cat", "dog")):
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 3.0]])
    return prediction_from_logits(logits, ProbabilitySpec("categorical", labels=labels))


def test_a_calibrator_built_from_a_temperature_applies_saves_and_round_trips(tmp_path):
    c = TemperatureCalibrator(
        2.0,
        ("cat", "dog"),
        "m1",
        "cal",
        test_split_id="test",
        fit_config={"optimizer": "bounded", "max_iterations": 200},
        fit_result={"nll_after": 0.4},
    )
    assert (c.kind, c.n_outputs, c.labels, c.rows, c.nll_after) == (
        "categorical",
        2,
        ("cat", "dog"),
        None,
        None,
    )
    out = c.transform(_prediction(), model_id="m1")
    expected = torch.softmax(torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 3.0]]) / 2.0, 1)
    assert torch.allclose(out.calibrated_probabilities, expected)
    state = c.state()
    json.dumps(state)  # plain JSON
    assert TemperatureCalibrator.from_state(state) == c
    assert hash(TemperatureCalibrator.from_state(state)) == hash(c)
    assert TemperatureCalibrator.load(c.save(tmp_path / "c.json")) == c
    assert TemperatureCalibrator.load(tmp_path / "c.json").fit_config["max_iterations"] == 200
    with pytest.raises(CalibrationMismatchError, match="model_id"):
        c.transform(_prediction(), model_id="m2")
    with pytest.raises(DocumentFileError, match="format"):
        TemperatureCalibrator.from_state({**state, "format": "nnx.calibration/1"})
    with pytest.raises(DocumentFileError, match="temperature"):
        TemperatureCalibrator.from_state({**state, "temperature": -1.0})


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"temperature": 0}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": True}, "temperature"),
        ({"labels": ("cat",)}, "n_outputs"),
        ({"labels": ("cat", "cat")}, "labels"),
        ({"labels": ("cat", "")}, "labels"),
        ({"labels": "cat,dog"}, "labels"),
        ({"model_id": ""}, "model_id"),
        ({"split_id": 3}, "split_id"),
        ({"train_split_id": "cal"}, "train_split_id"),
        ({"test_split_id": "cal"}, "test_split_id"),
        ({"fit_config": {"x": object()}}, "fit_config"),
        ({"fit_result": [1]}, "fit_result"),
        ({"fit_result": {"nll": float("inf")}}, "fit_result"),
        ({"kind": "softmax"}, "kind"),
        ({"rows": 0}, "rows"),
        ({"iterations": -1}, "iterations"),
    ],
)
def test_a_calibrators_arguments_are_checked_as_it_is_built(change, field):
    args = {"temperature": 1.5, "labels": ("cat", "dog"), "model_id": "m1", "split_id": "cal"}
    with pytest.raises(CalibrationError, match=field):
        TemperatureCalibrator(**{**args, **change})


# -- AbstentionPolicy(kind, threshold, labels, model_id, tuning_split_id, ...) -----------------
def test_a_policy_built_with_nnx_arguments_applies_saves_and_round_trips(tmp_path):
    policy = AbstentionPolicy("max_probability", 0.8, ("a", "b"), "m1", "val")
    assert (policy.split_id, policy.tuning_split_id, policy.input_field) == (
        "val",
        "val",
        "probabilities",
    )
    assert (policy.n_classes, policy.risk_ceiling, policy.validation) == (2, None, None)
    result = policy.apply(P, labels=("a", "b"), model_id="m1")
    assert result.accepted.tolist() == [True, True, True, True, True, False]
    report = result.report(Y)
    assert (report.accepted, report.errors, report.within_ceiling) == (5, 2, None)
    assert AbstentionPolicy.from_state(policy.state()) == policy
    assert AbstentionPolicy.load(policy.save(tmp_path / "p.json")) == policy
    with pytest.raises(AbstentionSchemaError, match="model_id"):
        policy.apply(P, labels=("a", "b"), model_id="m2")
    # a calibrated policy names its calibrator and, for nnx-lab's check, its temperature
    calibrated = AbstentionPolicy(
        "margin",
        0.1,
        ("a", "b"),
        "m1",
        "val",
        input_field="calibrated_probabilities",
        calibrator_id="sha256:abc",
        temperature=2.0,
    )
    assert calibrated.calibrated
    assert calibrated.input_field == "calibrated_probabilities"
    again = AbstentionPolicy.load(calibrated.save(tmp_path / "c.json"))
    assert again == calibrated
    assert again.calibrator_id == "sha256:abc"
    with pytest.raises(AbstentionSchemaError, match="uncalibrated"):
        calibrated.apply(P, labels=("a", "b"), model_id="m1")
    # what select_threshold chose still builds as before
    chosen = select_threshold(P, Y, risk_ceiling=0.4, split_id="val", labels=("a", "b"))
    policy = chosen.require()
    assert AbstentionPolicy.from_state(policy.state()) == policy
    assert policy.risk_ceiling == 0.4


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"kind": "entropy"}, "kind"),
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": float("nan")}, "threshold"),
        ({"labels": ("a",)}, "n_classes"),
        ({"labels": ("a", "a")}, "labels"),
        ({"labels": "ab"}, "labels"),
        ({"model_id": ""}, "model_id"),
        ({"tuning_split_id": None}, "split_id"),
        ({"input_field": "logits"}, "input_field"),
        ({"input_field": "calibrated_probabilities"}, "temperature"),
        ({"calibrator_id": "sha256:abc"}, "calibrator_id"),
        ({"test_split_id": "val"}, "test_split_id"),
        ({"risk_ceiling": 2}, "risk_ceiling"),
        ({"guarantee": 0.9}, "guarantee"),
        ({"treshold": 0.5}, "spelling"),
    ],
)
def test_a_policys_arguments_are_checked_as_it_is_built(change, field):
    args = {
        "kind": "max_probability",
        "threshold": 0.8,
        "labels": ("a", "b"),
        "model_id": "m1",
        "tuning_split_id": "val",
    }
    with pytest.raises(ConfigError, match=field):
        AbstentionPolicy(**{**args, **change})
