"""§2.19: abstention thresholds: risk and coverage by hand (ties included), the
no-accepted case, the risk-coverage curve and AURC, the guaranteed-risk threshold and
its Clopper-Pearson bound, the policy file, and every refusal."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from nnx_lab import ConfigError, DataError, ProbabilitySpec, prediction_from_logits
from nnx_lab.abstention import (
    AbstentionError,
    AbstentionPolicy,
    clopper_pearson_upper,
    most_confident_mistakes,
    risk_coverage_curve,
    select_threshold,
)
from nnx_lab.calibration import fit_temperature

# top probabilities .9 .9 .8 .8 .8 .6 with correctness 1 1 0 0 1 0 (class 0 is predicted)
TOP = np.array([0.9, 0.9, 0.8, 0.8, 0.8, 0.6])
P = np.stack([TOP, 1 - TOP], 1)
Y = np.array([0, 0, 1, 1, 0, 1])
SPLITS = {"split_id": "val", "test_split_id": "test"}


# -- risk and coverage by hand -----------------------------------------------------------------
def test_the_curve_by_hand_accepts_ties_together():
    curve = risk_coverage_curve(P, Y)
    assert curve.thresholds.tolist() == [0.9, 0.8, 0.6]  # one point per distinct score
    assert curve.accepted.tolist() == [2, 5, 6]
    assert curve.errors.tolist() == [0, 2, 3]
    assert curve.coverage.tolist() == pytest.approx([2 / 6, 5 / 6, 1])
    assert curve.risk.tolist() == pytest.approx([0, 2 / 5, 1 / 2])
    # AURC: risk at coverage i/6, a tie's errors spread evenly across it:
    # r(1..2) = 0, r(3) = (2/3)/3, r(4) = (4/3)/4, r(5) = 2/5, r(6) = 3/6
    assert curve.aurc == pytest.approx((0 + 0 + 2 / 9 + 1 / 3 + 2 / 5 + 1 / 2) / 6)
    # optimal: the three correct rows first, then r(4) = 1/4, r(5) = 2/5, r(6) = 1/2
    assert curve.optimal_aurc == pytest.approx((1 / 4 + 2 / 5 + 1 / 2) / 6)
    assert curve.to_json()["risk"] == pytest.approx([0, 0.4, 0.5])


def test_aurc_without_ties_is_the_mean_selective_risk():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), size=200)
    y = rng.integers(0, 3, 200)
    curve = risk_coverage_curve(p, y)
    order = np.argsort(-p.max(1))
    wrong = (p.argmax(1) != y)[order]
    brute = np.mean(np.cumsum(wrong) / np.arange(1, 201))
    assert len(curve) == 200
    assert curve.aurc == pytest.approx(brute, rel=1e-12)


@pytest.mark.parametrize(
    ("ceiling", "threshold", "coverage", "risk"),
    [(0.4, 0.8, 5 / 6, 0.4), (0.39, 0.9, 2 / 6, 0.0), (0.5, 0.6, 1.0, 0.5)],
)
def test_select_threshold_takes_the_most_coverage_within_the_ceiling(
    ceiling, threshold, coverage, risk
):
    selection = select_threshold(P, Y, risk_ceiling=ceiling, **SPLITS)
    assert selection.ok
    assert selection.threshold == threshold
    assert selection.coverage == pytest.approx(coverage)
    assert selection.risk == pytest.approx(risk)
    report = selection.require().apply(P).report(Y)  # the same rows give the same figures
    assert (report.coverage, report.risk) == pytest.approx((coverage, risk))


def test_the_margin_kind_scores_the_top_two_gap():
    p = np.array([[0.5, 0.4, 0.1], [0.7, 0.2, 0.1], [0.34, 0.33, 0.33]])
    curve = risk_coverage_curve(p, np.array([0, 1, 0]), kind="margin")
    assert curve.thresholds.tolist() == pytest.approx([0.5, 0.1, 0.01])
    assert curve.errors.tolist() == [1, 1, 1]


def test_nothing_accepted_gives_no_risk_not_zero():
    policy = select_threshold(P, Y, risk_ceiling=0.0, **SPLITS).require()  # threshold 0.9
    result = policy.apply(np.array([[0.7, 0.3], [0.4, 0.6]]))
    report = result.report(np.array([0, 0]))
    assert report.status == "no_accepted"
    assert report.risk is None
    assert report.coverage == 0.0
    assert report.within_ceiling is None
    assert result.abstained_ids.tolist() == [0, 1]


def test_no_threshold_meeting_the_ceiling_raises_with_the_reason():
    y = np.array([1, 0, 0, 0, 0, 0])  # the most confident row is wrong
    selection = select_threshold(P, y, risk_ceiling=0.0, **SPLITS)
    assert selection.status == "no_threshold"
    with pytest.raises(
        AbstentionError, match="no threshold keeps the validation risk at or below 0"
    ) as err:
        selection.require()
    assert "the lowest is 0.1667" in err.value.reason


# -- applying a policy -------------------------------------------------------------------------
def test_accepted_and_abstained_ids_partition_every_row_and_abstained_rows_keep_everything():
    policy = select_threshold(P, Y, risk_ceiling=0.4, labels=("cat", "dog"), **SPLITS).require()
    ids = np.array([10, 11, 12, 13, 14, 15])
    result = policy.apply(P, labels=("cat", "dog"), sample_ids=ids)
    assert set(result.accepted_ids) | set(result.abstained_ids) == set(ids)
    assert not set(result.accepted_ids) & set(result.abstained_ids)
    assert result.abstained_ids.tolist() == [15]
    (row,) = result.rows(Y, which="abstained")
    assert row["sample_id"] == 15
    assert row["predicted_label"] == "cat"  # the prediction is kept
    assert row["reason"] == "max_probability 0.6 < threshold 0.8"
    assert row["target_label"] == "dog"
    assert result.probabilities[5].tolist() == pytest.approx([0.6, 0.4])  # and the distribution
    assert result.predicted_labels().tolist() == ["cat"] * 6
    assert len(result.rows()) == 6


def test_the_result_refuses_what_it_cannot_answer():
    result = select_threshold(P, Y, risk_ceiling=0.4, **SPLITS).require().apply(P)
    with pytest.raises(ConfigError, match="applied without labels"):
        result.predicted_labels()
    with pytest.raises(ConfigError, match=r"^which="):
        result.rows(which="rejected")
    with pytest.raises(DataError, match="6 class indices"):
        result.report(Y[:3])
    with pytest.raises(ConfigError, match=r"^k="):
        most_confident_mistakes(P, Y, k=-1)


def test_a_prediction_result_carries_its_labels_and_ids():
    spec = ProbabilitySpec("categorical", labels=("cat", "dog"))
    logits = torch.log(torch.tensor(P, dtype=torch.float64))
    prediction = prediction_from_logits(logits, spec, sample_ids=[5, 6, 7, 8, 9, 10])
    policy = select_threshold(prediction, Y, risk_ceiling=0.4, **SPLITS).require()
    assert policy.labels == ("cat", "dog")
    result = policy.apply(prediction)
    assert result.accepted_ids.tolist() == [5, 6, 7, 8, 9]


def test_a_single_binary_output_is_two_classes():
    spec = ProbabilitySpec("bernoulli")
    logits = torch.tensor([[3.0], [-2.0], [0.1]])
    prediction = prediction_from_logits(logits, spec)
    curve = risk_coverage_curve(prediction, np.array([1, 0, 0]))
    assert curve.total == 3
    assert curve.errors[-1] == 1  # the 0.1 logit decodes to 1, target 0


def test_apply_refuses_mismatched_labels_models_and_class_counts():
    policy = select_threshold(
        P, Y, risk_ceiling=0.4, labels=("cat", "dog"), model_id="m1", **SPLITS
    ).require()
    with pytest.raises(ConfigError, match="chosen with labels"):
        policy.apply(P, labels=("dog", "cat"), model_id="m1")
    with pytest.raises(ConfigError, match="chosen with labels"):
        policy.apply(P, model_id="m1")
    with pytest.raises(ConfigError, match="chosen on model 'm1'"):
        policy.apply(P, labels=("cat", "dog"), model_id="m2")
    with pytest.raises(ConfigError, match="chosen on 2 classes"):
        policy.apply(np.full((2, 3), 1 / 3), labels=("a", "b", "c"), model_id="m1")
    with pytest.raises(DataError, match="repeat some ids"):
        policy.apply(P, labels=("cat", "dog"), model_id="m1", sample_ids=[1, 1, 2, 3, 4, 5])


def test_probabilities_are_checked_where_they_enter():
    with pytest.raises(DataError, match=r"row 0 sums to 1.5"):
        select_threshold(np.array([[0.5, 1.0]]), np.array([0]), risk_ceiling=0.1, split_id="v")
    with pytest.raises(DataError, match="not logits"):
        select_threshold(np.array([[-1.0, 2.0]]), np.array([0]), risk_ceiling=0.1, split_id="v")
    with pytest.raises(DataError, match="NaN/inf"):
        select_threshold(np.array([[np.nan, 1.0]]), np.array([0]), risk_ceiling=0.1, split_id="v")
    with pytest.raises(DataError, match=r"outside \[0, 2\)"):
        select_threshold(P, np.array([0, 0, 2, 0, 0, 0]), risk_ceiling=0.1, split_id="v")
    with pytest.raises(DataError, match="has no rows"):
        select_threshold(np.zeros((0, 2)), np.zeros(0, dtype=int), risk_ceiling=0.1, split_id="v")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"risk_ceiling": 1.5}, "risk_ceiling"),
        ({"risk_ceiling": -0.1}, "risk_ceiling"),
        ({"kind": "entropy"}, "kind"),
        ({"guarantee": 1.0}, "guarantee"),
        ({"test_split_id": "val"}, "test_split_id"),
        ({"split_id": ""}, "split_id"),
        ({"labels": ("a", "b", "c")}, "labels"),
    ],
)
def test_select_threshold_refuses_bad_settings(kwargs, field):
    base = {"risk_ceiling": 0.1, "split_id": "val"}
    with pytest.raises(ConfigError, match=f"^{field}="):
        select_threshold(P, Y, **{**base, **kwargs})


# -- calibrated probabilities ------------------------------------------------------------------
def _calibrated():
    g = torch.Generator().manual_seed(0)
    true = torch.randn(3000, 4, generator=g, dtype=torch.float64) * 2
    y = torch.multinomial(torch.softmax(true, 1), 1, generator=g).squeeze(1)
    prediction = prediction_from_logits(true * 2.0, ProbabilitySpec("categorical"))
    ids = {"model_id": "m", "split_id": "cal", "test_split_id": "test"}
    calibrator = fit_temperature(prediction, y, **ids).require()
    return prediction, calibrator.transform(prediction, model_id="m"), y.numpy(), calibrator


def test_a_policy_chosen_on_calibrated_probabilities_applies_only_to_them():
    raw, calibrated, y, calibrator = _calibrated()
    policy = select_threshold(calibrated, y, risk_ceiling=0.2, split_id="val").require()
    assert policy.calibrated
    assert policy.temperature == calibrator.temperature
    report = policy.apply(calibrated).report(y)
    assert report.risk <= 0.2
    with pytest.raises(ConfigError, match="chosen on calibrated probabilities"):
        policy.apply(raw)
    raw_policy = select_threshold(raw, y, risk_ceiling=0.2, split_id="val").require()
    with pytest.raises(ConfigError, match="chosen on uncalibrated probabilities"):
        raw_policy.apply(calibrated)
    other = type(calibrator)(**{**calibrator.__dict__, "temperature": 1.5})
    with pytest.raises(ConfigError, match="chosen at T ="):
        policy.apply(other.transform(raw, model_id="m"))


# -- the guaranteed-risk threshold -------------------------------------------------------------
def test_clopper_pearson_known_answers():
    # no errors: closed form 1 - delta^(1/n)
    assert clopper_pearson_upper(0, 50, 0.05) == pytest.approx(1 - 0.05 ** (1 / 50), rel=1e-12)
    assert clopper_pearson_upper(10, 10, 0.05) == 1.0
    assert clopper_pearson_upper(0, 0, 0.05) == 1.0
    # the defining property: P(Binomial(n, b) <= k) = delta
    for k, n, delta in [(1, 10, 0.05), (5, 100, 0.01), (37, 1000, 0.001), (60, 80, 0.1)]:
        b = clopper_pearson_upper(k, n, delta)
        cdf = sum(math.comb(n, j) * b**j * (1 - b) ** (n - j) for j in range(k + 1))
        assert cdf == pytest.approx(delta, rel=1e-9)
        assert b > k / n
    assert clopper_pearson_upper(1, 10, 0.05) == pytest.approx(0.3942, abs=1e-4)  # tables


def _simulated(n, seed):
    """Scores s ~ U(0.5, 1) with P(correct | s) = s: the risk above threshold t is (1 - t) / 2."""
    rng = np.random.default_rng(seed)
    s = rng.uniform(0.5, 1.0, n)
    correct = rng.random(n) < s
    y = np.where(correct, 0, 1)
    return np.stack([s, 1 - s], 1), y


def test_the_guaranteed_threshold_reports_its_bound_and_is_more_cautious():
    p, y = _simulated(4000, 0)
    empirical = select_threshold(p, y, risk_ceiling=0.1, split_id="val")
    guaranteed = select_threshold(p, y, risk_ceiling=0.1, split_id="val", guarantee=0.95)
    assert guaranteed.ok
    assert guaranteed.tests == math.ceil(math.log2(len(guaranteed.curve)))
    assert guaranteed.risk <= guaranteed.risk_bound <= 0.1
    delta = (1 - 0.95) / guaranteed.tests
    assert guaranteed.risk_bound == clopper_pearson_upper(
        guaranteed.errors, guaranteed.accepted, delta
    )
    assert guaranteed.threshold >= empirical.threshold
    policy = guaranteed.require()
    assert "with probability at least 0.95" in policy.note
    assert "not guaranteed" in empirical.require().note


def test_with_no_validation_errors_the_guaranteed_threshold_keeps_nearly_everything():
    """Bisection moves to more coverage while the bound passes; the choice is the tested
    threshold with the most coverage, not the first that passed."""
    rng = np.random.default_rng(2)
    s = rng.uniform(0.5, 1.0, 1000)
    p = np.stack([s, 1 - s], 1)
    selection = select_threshold(
        p, np.zeros(1000, dtype=int), risk_ceiling=0.1, split_id="v", guarantee=0.95
    )
    assert selection.accepted == 999  # tested: 500, 250, ..., 2, 1 rows from the top
    delta = 0.05 / selection.tests
    assert selection.risk_bound == pytest.approx(1 - delta ** (1 / 999))


def test_the_guarantee_holds_on_new_data_where_the_validation_threshold_does_not():
    """Over many validation draws, the true risk of the guaranteed threshold exceeds the
    ceiling in at most 1 - guarantee of them; the validation-only threshold, about half."""
    ceiling, level, draws = 0.1, 0.9, 150
    over_guaranteed = over_empirical = 0
    for seed in range(draws):
        p, y = _simulated(1500, seed)
        g = select_threshold(p, y, risk_ceiling=ceiling, split_id="val", guarantee=level)
        e = select_threshold(p, y, risk_ceiling=ceiling, split_id="val")
        if g.ok:
            over_guaranteed += (1 - g.threshold) / 2 > ceiling
        over_empirical += (1 - e.threshold) / 2 > ceiling
    assert over_guaranteed / draws <= 1 - level
    assert over_empirical / draws > 0.25


def test_a_guarantee_that_no_tested_threshold_meets_raises():
    p, y = _simulated(200, 1)
    selection = select_threshold(p, y, risk_ceiling=0.01, split_id="val", guarantee=0.99)
    with pytest.raises(AbstentionError, match=r"0\.99-confidence risk bound"):
        selection.require()


# -- the file ----------------------------------------------------------------------------------
def test_a_policy_round_trips_through_json(tmp_path):
    _, calibrated, y, _ = _calibrated()
    policy = select_threshold(
        calibrated, y, risk_ceiling=0.2, split_id="val", model_id="m", guarantee=0.9
    ).require()
    path = policy.save(tmp_path / "policy.json")
    data = json.loads(path.read_text())
    assert data["threshold"] == policy.threshold
    assert data["note"] == policy.note
    loaded = AbstentionPolicy.load(path)
    assert loaded == policy
    assert (
        loaded.apply(calibrated, model_id="m").accepted.tolist()
        == policy.apply(calibrated, model_id="m").accepted.tolist()
    )


def test_a_refused_policy_save_writes_nothing(tmp_path):
    policy = select_threshold(P, Y, risk_ceiling=0.4, **SPLITS).require()
    with pytest.raises(ConfigError, match="does not exist"):
        policy.save(tmp_path / "no" / "p.json")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("tamper", "match"),
    [
        (lambda d: d.update(threshold=1.5), "threshold"),
        (lambda d: d.update(threshold="high"), "threshold"),
        (lambda d: d.update(kind="entropy"), "kind"),
        (lambda d: d.pop("risk_ceiling"), "risk_ceiling"),
        (lambda d: d.update(labels=["a"]), "labels"),
        (lambda d: d.update(format="x"), "format"),
        (lambda d: d["calibration"].update(calibrated="yes"), "calibrated"),
    ],
)
def test_a_tampered_policy_is_refused(tmp_path, tamper, match):
    policy = select_threshold(P, Y, risk_ceiling=0.4, labels=("a", "b"), **SPLITS).require()
    path = policy.save(tmp_path / "p.json")
    data = json.loads(path.read_text())
    tamper(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=match):
        AbstentionPolicy.load(path)


# -- plain data for the explorer ---------------------------------------------------------------
def test_most_confident_mistakes_by_hand():
    rows = most_confident_mistakes(
        P, Y, k=2, labels=("cat", "dog"), sample_ids=[7, 8, 9, 10, 11, 12]
    )
    assert [r["sample_id"] for r in rows] == [9, 10]  # the two .8 mistakes, in row order
    assert rows[0]["score"] == pytest.approx(0.8)
    assert rows[0]["target_label"] == "dog"
    assert rows[0]["probability_of_target"] == pytest.approx(0.2)
    assert len(most_confident_mistakes(P, Y, k=10)) == 3
