"""§2.18: temperature calibration: known temperatures recovered, the fit's failures, the
calibrator's refusals, its JSON file, and the held-out report."""

from __future__ import annotations

import json
import math
import os

import engine_factories as f
import pytest
import torch

from nnx_lab import ConfigError, DataError, ProbabilitySpec, prediction_from_logits
from nnx_lab.calibration import (
    CalibrationFitError,
    TemperatureCalibrator,
    calibration_metrics,
    fit_temperature,
    model_fingerprint,
    reliability_diagram,
)

LABELS = tuple("abcdefghij")
SPEC = ProbabilitySpec("categorical", labels=LABELS)
IDS = {
    "model_id": "m1",
    "split_id": "calibration",
    "train_split_id": "train",
    "test_split_id": "test",
}


def _tempered(temperature, n=20_000, k=10, seed=0, scale=3.0):
    """Logits whose labels were drawn from softmax(logits / temperature): the right
    temperature is ``temperature``."""
    g = torch.Generator().manual_seed(seed)
    true = torch.randn(n, k, generator=g, dtype=torch.float64) * scale
    y = torch.multinomial(torch.softmax(true, 1), 1, generator=g).squeeze(1)
    spec = SPEC if k == len(LABELS) else ProbabilitySpec("categorical")
    return prediction_from_logits((true * temperature).float(), spec), y


def _bernoulli(temperature, n=40_000, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    true = torch.randn(n, k, generator=g, dtype=torch.float64) * 2
    y = torch.bernoulli(torch.sigmoid(true), generator=g)
    spec = ProbabilitySpec("bernoulli", labels=("x", "y", "z"))
    return prediction_from_logits((true * temperature).float(), spec), y


# -- known answers -----------------------------------------------------------------------------
@pytest.mark.parametrize("temperature", [0.5, 2.0, 3.0])
def test_a_known_temperature_is_recovered_within_one_percent(temperature):
    prediction, y = _tempered(temperature)
    fit = fit_temperature(prediction, y, **IDS)
    assert fit.ok
    assert fit.temperature == pytest.approx(temperature, rel=0.01)
    assert fit.nll_after < fit.nll_before
    calibrator = fit.require()
    assert calibrator.temperature == fit.temperature  # T itself, not 1 / T


def test_a_known_temperature_is_recovered_for_bernoulli_outputs():
    prediction, y = _bernoulli(2.5)
    fit = fit_temperature(prediction, y, **IDS)
    assert fit.temperature == pytest.approx(2.5, rel=0.01)


def test_a_calibrated_set_stays_near_one():
    prediction, y = _tempered(1.0, seed=4)
    fit = fit_temperature(prediction, y, **IDS)
    assert fit.temperature == pytest.approx(1.0, abs=0.02)
    assert fit.nll_after <= fit.nll_before


def test_the_fit_minimizes_the_nll():
    prediction, y = _tempered(2.0, n=3000, seed=2)
    t = fit_temperature(prediction, y, **IDS).temperature

    def nll(temp):
        return torch.nn.functional.cross_entropy(prediction.logits.double() / temp, y).item()

    assert nll(t) <= nll(t * 1.001)
    assert nll(t) <= nll(t / 1.001)


def test_the_temperature_divides_the_logits_and_never_changes_the_argmax():
    prediction, y = _tempered(2.0, n=2000)
    calibrator = fit_temperature(prediction, y, **IDS).require()
    result = calibrator.transform(prediction, model_id="m1")
    expected = torch.softmax(prediction.logits / calibrator.temperature, dim=1)
    assert torch.allclose(result.calibrated_probabilities, expected)
    assert torch.equal(result.probabilities, prediction.probabilities)  # raw kept beside
    assert torch.equal(result.decoded, prediction.decoded)
    assert result.decoded_labels().tolist() == prediction.decoded_labels().tolist()
    assert result.overrides == ()


def test_ignored_targets_are_left_out_of_the_fit():
    prediction, y = _tempered(2.0, n=4000, seed=6)
    masked = y.clone()
    masked[::3] = -100
    keep = masked != -100
    full = fit_temperature(prediction_from_logits(prediction.logits[keep], SPEC), y[keep], **IDS)
    with_ignored = fit_temperature(prediction, masked, **IDS)
    assert with_ignored.rows == int(keep.sum())
    assert with_ignored.temperature == pytest.approx(full.temperature, rel=1e-9)


# -- the fit's failures ------------------------------------------------------------------------
def test_every_target_decoded_right_fails_with_the_reason():
    logits = torch.randn(200, 10)
    fit = fit_temperature(prediction_from_logits(logits, SPEC), logits.argmax(1), **IDS)
    assert fit.status == "failed"
    assert fit.temperature is None
    with pytest.raises(CalibrationFitError, match="T -> 0") as err:
        fit.require()
    assert err.value.fit is fit


def test_logits_that_rank_the_truth_last_fail_with_the_reason():
    logits = torch.randn(200, 10)
    fit = fit_temperature(prediction_from_logits(logits, SPEC), logits.argmin(1), **IDS)
    with pytest.raises(CalibrationFitError, match="T -> infinity"):
        fit.require()


def test_no_convergence_is_a_failure_not_a_number():
    prediction, y = _tempered(3.0, n=2000)
    fit = fit_temperature(prediction, y, max_iter=1, **IDS)
    assert fit.status == "failed"
    assert "no convergence in 1 iterations" in fit.reason


# -- refusals ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"split_id": "train"}, "split_id"),
        ({"test_split_id": "calibration"}, "test_split_id"),
        ({"train_split_id": "test"}, "test_split_id"),
        ({"model_id": ""}, "model_id"),
        ({"model_id": None}, "model_id"),
        ({"split_id": 3}, "split_id"),
        ({"max_iter": 0}, "max_iter"),
    ],
)
def test_fit_refuses_bad_ids(changes, field):
    prediction, y = _tempered(2.0, n=100)
    with pytest.raises(ConfigError, match=f"^{field}="):
        fit_temperature(prediction, y, **{**IDS, **changes})


def test_fit_refuses_targets_that_do_not_fit_the_prediction():
    prediction, y = _tempered(2.0, n=100)
    with pytest.raises(DataError, match="one class index per row"):
        fit_temperature(prediction, y[:50], **IDS)
    bad = y.clone()
    bad[7] = 10
    with pytest.raises(DataError, match=r"outside \[0, 10\) \(first: element 7"):
        fit_temperature(prediction, bad, **IDS)
    with pytest.raises(DataError, match="no valid target"):
        fit_temperature(prediction, torch.full((100,), -100), **IDS)
    with pytest.raises(ConfigError, match=r"regression prediction|predict_proba"):
        fit_temperature(prediction.logits, y, **IDS)


def test_transform_refuses_another_model_unless_overridden_and_records_it():
    prediction, y = _tempered(2.0, n=1000)
    calibrator = fit_temperature(prediction, y, **IDS).require()
    with pytest.raises(ConfigError, match="fitted on the logits of model 'm1'"):
        calibrator.transform(prediction, model_id="m2")
    result = calibrator.transform(prediction, model_id="m2", override="model_id")
    assert result.overrides == ("model_id",)
    assert result.model_id == "m2"
    with pytest.raises(ConfigError, match="the overrides are"):
        calibrator.transform(prediction, model_id="m2", override="everything")


def test_transform_refuses_another_label_order_unless_overridden():
    prediction, y = _tempered(2.0, n=1000)
    calibrator = fit_temperature(prediction, y, **IDS).require()
    shuffled = ProbabilitySpec("categorical", labels=tuple(reversed(LABELS)))
    other = prediction_from_logits(prediction.logits, shuffled)
    with pytest.raises(ConfigError, match="in another order"):
        calibrator.transform(other, model_id="m1")
    renamed = prediction_from_logits(
        prediction.logits, ProbabilitySpec("categorical", labels=tuple("ABCDEFGHIJ"))
    )
    with pytest.raises(ConfigError, match="are different"):
        calibrator.transform(renamed, model_id="m1")
    both = calibrator.transform(other, model_id="m9", override=("labels", "model_id"))
    assert both.overrides == ("labels", "model_id")


def test_transform_refuses_what_it_cannot_apply():
    prediction, y = _tempered(2.0, n=1000)
    calibrator = fit_temperature(prediction, y, **IDS).require()
    with pytest.raises(ConfigError, match="fitted on 'categorical'"):
        calibrator.transform(
            prediction_from_logits(prediction.logits, ProbabilitySpec("bernoulli", labels=LABELS)),
            model_id="m1",
        )
    with pytest.raises(ConfigError, match="fitted on 10"):
        calibrator.transform(
            prediction_from_logits(torch.randn(5, 4), ProbabilitySpec("categorical")),
            model_id="m1",
            override="labels",
        )
    calibrated = calibrator.transform(prediction, model_id="m1")
    with pytest.raises(ConfigError, match="pass the raw prediction"):
        calibrator.transform(calibrated, model_id="m1")


def test_model_fingerprint_changes_with_the_weights():
    model = f.model()
    before = model_fingerprint(model)
    assert before == model_fingerprint(model.net)
    assert before.startswith("sha256:")
    with torch.no_grad():
        model.net.layers[0].weight[0, 0] += 1e-6
    assert model_fingerprint(model) != before
    with pytest.raises(ConfigError, match="NNModel"):
        model_fingerprint("model")


# -- the file ----------------------------------------------------------------------------------
def test_a_calibrator_round_trips_through_json(tmp_path):
    prediction, y = _tempered(2.0, n=2000)
    calibrator = fit_temperature(prediction, y, **IDS).require()
    path = calibrator.save(tmp_path / "calibrator.json")
    data = json.loads(path.read_text())  # plain JSON, no pickle
    assert data["temperature"] == calibrator.temperature
    assert data["spec"]["labels"] == list(LABELS)
    assert "cannot verify" in data["splits"]["disjointness"]
    loaded = TemperatureCalibrator.load(path)
    assert loaded == calibrator
    again = loaded.transform(prediction, model_id="m1")
    assert torch.equal(
        again.calibrated_probabilities,
        calibrator.transform(prediction, model_id="m1").calibrated_probabilities,
    )


def test_a_refused_save_writes_nothing(tmp_path):
    prediction, y = _tempered(2.0, n=500)
    calibrator = fit_temperature(prediction, y, **IDS).require()
    with pytest.raises(ConfigError, match="does not exist"):
        calibrator.save(tmp_path / "missing" / "c.json")
    with pytest.raises(ConfigError, match="not a folder"):
        calibrator.save(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_write_leaves_the_previous_file(tmp_path, monkeypatch):
    prediction, y = _tempered(2.0, n=500)
    calibrator = fit_temperature(prediction, y, **IDS).require()
    path = calibrator.save(tmp_path / "c.json")
    before = path.read_bytes()

    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        TemperatureCalibrator(**{**calibrator.__dict__, "temperature": 9.0}).save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]  # no temp file left


@pytest.mark.parametrize(
    ("tamper", "match"),
    [
        (lambda d: d.update(temperature=-1.0), "temperature"),
        (lambda d: d.update(temperature=float("nan")), "temperature"),
        (lambda d: d.pop("model_id"), "model_id"),
        (lambda d: d.update(format="pickle"), "format"),
        (lambda d: d.update(version=2), "version"),
        (lambda d: d["spec"].update(kind="poisson"), "spec"),
        (lambda d: d["fit"].update(rows="many"), "rows"),
        (lambda d: d.update(n_outputs=None), "n_outputs"),
        (lambda d: d.update(n_outputs=4), "n_outputs"),
        (lambda d: d.update(splits=["calibration"]), r"splits: Expected `object`"),
        (lambda d: d.pop("spec"), "spec"),
    ],
)
def test_a_tampered_file_is_refused(tmp_path, tamper, match):
    prediction, y = _tempered(2.0, n=500)
    path = fit_temperature(prediction, y, **IDS).require().save(tmp_path / "c.json")
    data = json.loads(path.read_text())
    tamper(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=match):
        TemperatureCalibrator.load(path)


def test_a_file_that_is_not_json_is_refused(tmp_path):
    path = tmp_path / "c.json"
    path.write_bytes(b"\x80\x04\x95 not json")
    with pytest.raises(ConfigError, match="not JSON"):
        TemperatureCalibrator.load(path)
    with pytest.raises(ConfigError, match="no such file"):
        TemperatureCalibrator.load(tmp_path / "absent.json")


# -- the report --------------------------------------------------------------------------------
def test_the_report_says_improved_on_held_out_data():
    prediction, y = _tempered(2.5, n=5000)
    calibrator = fit_temperature(prediction, y, **IDS).require()
    test_prediction, y_test = _tempered(2.5, n=5000, seed=9)
    report = calibrator.report(test_prediction, y_test, model_id="m1", split_id="test")
    assert report.improved
    assert report.after["nll"] < report.before["nll"]
    assert report.after["ece"] < report.before["ece"]
    assert report.summary().startswith("improved: calibration on 'test'")
    assert report.reliability_after.ece == report.after["ece"]
    assert sum(report.reliability_before.counts) == report.rows == 5000
    assert json.dumps(report.to_json())  # plain data


def test_the_report_says_not_improved_when_held_out_nll_gets_worse():
    prediction, y = _tempered(3.0, n=5000)
    calibrator = fit_temperature(prediction, y, **IDS).require()
    sharp, y_sharp = _tempered(0.6, n=5000, seed=8)  # held-out logits already too soft
    report = calibrator.report(sharp, y_sharp, model_id="m1", split_id="test")
    assert not report.improved
    assert report.after["nll"] > report.before["nll"]
    assert report.summary().startswith("not improved: held-out NLL and Brier got worse")


def test_the_report_records_overrides_and_refuses_the_fit_splits():
    prediction, y = _tempered(2.0, n=2000)
    calibrator = fit_temperature(prediction, y, **IDS).require()
    report = calibrator.report(
        prediction, y, model_id="other", split_id="test", override="model_id"
    )
    assert report.overrides == ("model_id",)
    assert "override model_id" in report.summary()
    for taken in ("calibration", "train"):
        with pytest.raises(ConfigError, match="report on a held-out split"):
            calibrator.report(prediction, y, model_id="m1", split_id=taken)


def test_calibration_metrics_on_a_hand_computed_example():
    # two classes; confidences .95 (right), .95 (wrong), .55 (right), .55, .55 (wrong)
    p1 = torch.tensor([0.95, 0.95, 0.55, 0.55, 0.55], dtype=torch.float64)
    logits = torch.stack([torch.zeros(5, dtype=torch.float64), torch.log(p1 / (1 - p1))], 1)
    y = torch.tensor([1, 0, 1, 0, 0])
    prediction = prediction_from_logits(logits, ProbabilitySpec("categorical"))
    values = calibration_metrics(prediction, y)
    assert values["ece"] == pytest.approx((2 / 5) * 0.45 + (3 / 5) * abs(1 / 3 - 0.55))
    p_true = torch.where(y == 1, p1, 1 - p1)
    assert values["nll"] == pytest.approx(float(-p_true.log().mean()))
    assert values["brier"] == pytest.approx(float((2 * (1 - p_true) ** 2).mean()))
    diagram = reliability_diagram(prediction, y)
    assert diagram.counts[14] == 2
    assert diagram.counts[8] == 3
    assert diagram.accuracy[8] == pytest.approx(1 / 3)
    assert diagram.confidence[14] == pytest.approx(0.95)
    assert diagram.accuracy[0] is None  # empty bins have no accuracy, not 0
    assert diagram.edges[0] == 0.0
    assert diagram.edges[-1] == 1.0
    assert len(diagram.edges) == 16


def test_metrics_at_any_temperature_match_the_calibrators():
    """What a temperature slider reads: the same figures as transforming at that T."""
    prediction, y = _tempered(2.0, n=3000)
    calibrator = fit_temperature(prediction, y, **IDS).require()
    at_fit = calibration_metrics(prediction, y, temperature=calibrator.temperature)
    transformed = calibration_metrics(calibrator.transform(prediction, model_id="m1"), y)
    assert at_fit == pytest.approx(transformed, rel=1e-6)
    assert calibration_metrics(prediction, y, temperature=1.0) == calibration_metrics(prediction, y)
    hotter = reliability_diagram(prediction, y, temperature=5.0)
    assert max(c for c in hotter.confidence if c is not None) < 0.9  # softer
    with pytest.raises(ConfigError, match=r"^temperature="):
        calibration_metrics(prediction, y, temperature=0)
    with pytest.raises(ConfigError, match="has its temperature"):
        calibration_metrics(calibrator.transform(prediction, model_id="m1"), y, temperature=2.0)


def test_bins_are_checked():
    prediction, y = _tempered(2.0, n=500)
    calibrator = fit_temperature(prediction, y, **IDS).require()
    for bad in (0, 2.5, True, 20_000):
        with pytest.raises(ConfigError, match=r"^bins="):
            reliability_diagram(prediction, y, bins=bad)
        with pytest.raises(ConfigError, match=r"^bins="):
            calibrator.report(prediction, y, model_id="m1", split_id="test", bins=bad)
    assert len(reliability_diagram(prediction, y, bins=4).counts) == 4


def test_the_fit_of_100k_by_100_logits_is_exact_enough():
    """The benchmark's size, checked for the answer (its time is benchmarks/calibration.py)."""
    prediction, y = _tempered(1.7, n=100_000, k=100, seed=11, scale=1.0)
    fit = fit_temperature(prediction, y, **IDS)
    assert fit.temperature == pytest.approx(1.7, rel=0.01)
    assert fit.iterations <= 10
    assert math.isfinite(fit.nll_after)
