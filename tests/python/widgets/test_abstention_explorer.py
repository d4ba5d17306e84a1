"""AbstentionExplorer, kernel side: the threshold, the risk ceiling, the guarantee and
the side drive the readouts and the rows (from Python as from a view), the figures are
the engine's, bad input from a view is refused while the kernel keeps its state, Save
writes a policy the engine loads and applies, and what a (reloaded) view receives."""

from __future__ import annotations

import json
import math

import ipywidgets.widgets.widget as ipw
import numpy as np
import pytest
import torch

from nnx_lab import ConfigError, DataError, ProbabilitySpec, prediction_from_logits
from nnx_lab.abstention import (
    AbstentionPolicy,
    most_confident_mistakes,
    risk_coverage_curve,
    select_threshold,
)
from nnx_lab.calibration import fit_temperature
from nnx_lab.widgets import AbstentionExplorer
from nnx_lab.widgets._testing import FakeFrontend

LABELS = ("ant", "bee", "cat", "dog")


def data(n: int = 4000, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    z = torch.randn(n, 4, generator=g)
    z[torch.arange(n), y] += 1.6
    z = 2.5 * z  # over-confident
    prediction = prediction_from_logits(z, ProbabilitySpec("categorical", labels=LABELS))
    calibrator = fit_temperature(prediction, y, model_id="m", split_id="calibration").require()
    return prediction, calibrator.transform(prediction, model_id="m"), y


@pytest.fixture(scope="module")
def inputs():
    return data()


@pytest.fixture
def explorer(inputs):
    _, calibrated, y = inputs
    ex = AbstentionExplorer(calibrated, y, risk_ceiling=0.05, model_id="m", test_split_id="test")
    yield ex
    ex.close()


def shown(widget) -> FakeFrontend:
    fe = FakeFrontend(widget)
    widget._transport.timer_factory = None
    widget._transport.interval = 0.0
    fe.hello()
    return fe


def engine_report(source, y, threshold, kind="max_probability"):
    """Coverage and risk at ``threshold`` as the engine's policy.apply(...).report gives."""
    sel = select_threshold(source, y, risk_ceiling=1.0, split_id="v", kind=kind)
    policy = sel.require()
    policy = AbstentionPolicy(**{**policy.__dict__, "threshold": threshold})
    return policy.apply(source).report(y)


# ---------------------------------------------------------------- readouts


def test_the_ceiling_chooses_the_engines_threshold(explorer, inputs):
    _, calibrated, y = inputs
    expected = select_threshold(calibrated, y, risk_ceiling=0.05, split_id="validation")
    assert explorer.use == "calibrated"
    assert explorer.threshold == expected.threshold
    assert explorer.selection["status"] == "selected"
    assert explorer.selection["coverage"] == expected.coverage
    r = explorer.readouts["calibrated"]
    assert (r["accepted"], r["errors"]) == (expected.accepted, expected.errors)
    assert r["risk"] <= 0.05


@pytest.mark.parametrize("threshold", [0.3, 0.71, 0.9, 0.97, 0.9999, 1.0])
def test_readouts_are_the_engines_coverage_and_risk_on_both_sides(explorer, inputs, threshold):
    prediction, calibrated, y = inputs
    explorer.threshold = threshold
    for side, source in (("calibrated", calibrated), ("uncalibrated", prediction)):
        report = engine_report(source, y, threshold)
        r = explorer.readouts[side]
        assert r["threshold"] == threshold
        assert (r["accepted"], r["abstained"], r["errors"]) == (
            report.accepted,
            report.abstained,
            report.errors,
        )
        assert r["coverage"] == report.coverage
        assert r["risk"] == report.risk
        assert r["status"] == report.status


def test_nothing_answered_has_no_risk_not_zero(explorer):
    explorer.threshold = 1.0
    r = explorer.readouts["calibrated"]
    if r["accepted"] == 0:
        assert r["risk"] is None
        assert r["status"] == "no_accepted"
    explorer.threshold = 0.0
    assert explorer.readouts["calibrated"]["coverage"] == 1.0


def test_the_same_threshold_answers_more_uncalibrated_rows_at_a_higher_risk(explorer):
    """Over-confident raw probabilities pass a threshold more often, and err more."""
    explorer.threshold = 0.9
    cal, raw = explorer.readouts["calibrated"], explorer.readouts["uncalibrated"]
    assert raw["coverage"] > cal["coverage"]
    assert raw["risk"] > cal["risk"]


def test_the_ceiling_and_guarantee_from_python_or_a_view_reselect(explorer, inputs):
    _, calibrated, y = inputs
    fe = shown(explorer)
    before = explorer.revision
    explorer.set_state({"risk_ceiling": 0.02})
    assert explorer.revision == before + 1
    assert (
        explorer.threshold
        == select_threshold(calibrated, y, risk_ceiling=0.02, split_id="v").threshold
    )
    explorer.guarantee = 0.9
    sel = select_threshold(calibrated, y, risk_ceiling=0.02, split_id="v", guarantee=0.9)
    if sel.ok:
        assert explorer.threshold == sel.threshold
        assert explorer.selection["risk_bound"] == sel.risk_bound
        assert explorer.selection["note"].startswith("with probability at least 0.9")
    assert explorer.error == ""
    assert any("readouts" in u for u in fe.updates)


def test_a_ceiling_nothing_meets_says_why_and_keeps_the_threshold(explorer):
    explorer.threshold = 0.95
    with explorer.hold_trait_notifications():
        explorer.risk_ceiling = 0.0
        explorer.guarantee = 0.9  # a bound above 0 whatever the threshold
    assert explorer.selection["status"] == "no_threshold"
    assert explorer.selection["reason"].startswith(
        "no tested threshold has a 0.9-confidence risk bound at or below 0"
    )
    assert explorer.threshold == 0.95


def test_switching_sides_reselects_on_the_other_probabilities(explorer, inputs):
    prediction, _, y = inputs
    fe = shown(explorer)
    fe.clear()
    explorer.use = "uncalibrated"
    expected = select_threshold(prediction, y, risk_ceiling=0.05, split_id="v")
    assert explorer.threshold == expected.threshold
    assert explorer.selection["use"] == "uncalibrated"
    # the slider's stops are now the uncalibrated curve's
    stops = [
        FakeFrontend.decode(c, b)["stops"]
        for c, b in fe.custom_with_buffers()
        if c["kind"] == "update" and any(o["series"] == "stops" for o in c["ops"])
    ]
    curve = risk_coverage_curve(prediction, y)
    assert set(stops[-1]["threshold"]) <= set(curve.thresholds)


def test_the_tables_hold_the_engines_mistakes_and_the_declined_rows(explorer, inputs):
    _, calibrated, y = inputs
    explorer.threshold = 0.8
    expected = most_confident_mistakes(calibrated, y, k=10)
    assert [m["sample_id"] for m in explorer.mistakes] == [m["sample_id"] for m in expected]
    for m in explorer.mistakes:
        assert m["accepted"] == (m["score"] >= 0.8)
        assert m["target_label"] == LABELS[m["target"]]
    rows = explorer.abstained_rows
    assert len(rows) == 10
    scores = [r["score"] for r in rows]
    assert scores == sorted(scores, reverse=True)  # nearest the threshold first
    assert all(s < 0.8 for s in scores)
    p = calibrated.calibrated_probabilities.double().numpy()
    for r in rows:
        assert r["score"] == pytest.approx(p[r["sample_id"]].max(), rel=1e-12)
        assert r["target"] == int(y[r["sample_id"]])
        assert r["correct"] == (r["target"] == r["prediction"])
        assert r["predicted_label"] == LABELS[r["prediction"]]
    first_page = {r["sample_id"] for r in rows}
    explorer.abstained_start = 10
    second = explorer.abstained_rows
    assert {r["sample_id"] for r in second}.isdisjoint(first_page)
    assert max(r["score"] for r in second) <= min(scores)
    explorer.threshold = 0.85  # a new threshold shows the rows nearest to it
    assert explorer.abstained_start == 0


def test_the_last_page_is_clamped(explorer):
    explorer.threshold = 0.5
    declined = explorer.readouts["calibrated"]["abstained"]
    explorer.abstained_start = 10_000_000
    assert explorer.abstained_start == (declined - 1) // 10 * 10
    assert 1 <= len(explorer.abstained_rows) <= 10


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("state", "match"),
    [
        ({"threshold": 1.5}, "threshold=1.5 is invalid: pass a score threshold in"),
        ({"threshold": None}, "threshold"),
        ({"threshold": "high"}, "threshold"),
        ({"risk_ceiling": -0.1}, "risk_ceiling=-0.1 is invalid"),
        ({"guarantee": 1.0}, "guarantee=1.0 is invalid"),
        ({"use": "bogus"}, "use='bogus' is invalid: pick one of"),
        ({"abstained_start": -3}, "abstained_start=-3 is invalid"),
        ({"path": ""}, "path='' is invalid"),
    ],
)
def test_bad_input_from_a_view_is_refused_and_the_kernel_keeps_its_state(explorer, state, match):
    fe = shown(explorer)
    kept = {
        k: getattr(explorer, k)
        for k in ("threshold", "risk_ceiling", "guarantee", "use", "abstained_start", "path")
    }
    readouts = json.dumps(explorer.readouts, sort_keys=True)
    fe.clear()
    before = explorer.revision
    explorer.set_state(state)
    assert match in explorer.error
    assert {k: getattr(explorer, k) for k in kept} == kept
    assert json.dumps(explorer.readouts, sort_keys=True) == readouts
    assert explorer.revision == before + 1
    key = next(iter(state))
    resent = [u for u in fe.updates if key in u]
    assert resent
    assert resent[-1][key] == kept[key]  # the view is put back


def _widgets() -> int:
    return len(ipw._instances)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"kind": "entropy"}, ConfigError, "kind='entropy' is invalid"),
        ({"risk_ceiling": 2}, ConfigError, "risk_ceiling=2 is invalid"),
        ({"guarantee": 0}, ConfigError, "guarantee=0 is invalid"),
        ({"threshold": -1}, ConfigError, "threshold=-1 is invalid"),
        ({"test_split_id": "validation"}, ConfigError, "it equals split_id='validation'"),
        ({"use": "calibrated"}, ConfigError, "use='calibrated' is invalid"),
        ({"page_size": 0}, ConfigError, "page_size=0 is invalid"),
        ({"labels": ("a", "b")}, ConfigError, "give one label per class"),
        ({"path": " "}, ConfigError, "name the JSON file"),
    ],
)
def test_bad_arguments_are_refused_before_a_widget_exists(inputs, kwargs, error, match):
    prediction, _, y = inputs
    before = _widgets()
    with pytest.raises(error, match=match):
        AbstentionExplorer(prediction, y, **kwargs)
    assert _widgets() == before


def test_logits_and_bad_targets_are_refused_with_the_engines_messages(inputs):
    prediction, _, y = inputs
    with pytest.raises(DataError, match="pass probabilities, not logits"):
        AbstentionExplorer(prediction.logits, y)
    with pytest.raises(DataError, match="pass 4000 class indices, one per row"):
        AbstentionExplorer(prediction, y[:-1])


# ---------------------------------------------------------------- save


def test_save_writes_the_selected_policy_which_the_engine_loads_and_applies(
    explorer, inputs, tmp_path
):
    _, calibrated, y = inputs
    path = explorer.save(tmp_path / "policy.json")
    assert explorer.path == str(path)
    policy = AbstentionPolicy.load(path)
    expected = select_threshold(
        calibrated,
        y,
        risk_ceiling=0.05,
        split_id="validation",
        test_split_id="test",
        labels=LABELS,
        model_id="m",
    ).require()
    assert policy.to_json() == expected.to_json()
    assert policy.calibrated is True
    assert policy.temperature == calibrated.temperature
    result = policy.apply(calibrated, model_id="m")
    ids = np.concatenate([result.accepted_ids, result.abstained_ids])
    assert sorted(ids.tolist()) == list(range(len(y)))
    assert result.report(y).coverage == explorer.readouts["calibrated"]["coverage"]
    assert explorer.saved.startswith(f"saved threshold {policy.threshold:.6g} (calibrated")
    assert [p.name for p in tmp_path.iterdir()] == ["policy.json"]


def test_a_guaranteed_selection_saves_its_bound(explorer, tmp_path):
    explorer.risk_ceiling = 0.1
    explorer.guarantee = 0.9
    assert explorer.selection["status"] == "selected"
    policy = AbstentionPolicy.load(explorer.save(tmp_path / "g.json"))
    assert policy.guarantee == 0.9
    assert policy.risk_bound == explorer.selection["risk_bound"]
    assert "guaranteed risk" in explorer.saved


def test_a_hand_moved_threshold_saves_its_own_validation_figures(explorer, inputs, tmp_path):
    prediction, _, y = inputs
    explorer.use = "uncalibrated"
    chosen = explorer.threshold
    explorer.threshold = min(1.0, chosen + 0.01)  # stricter: still within the ceiling
    r = explorer.readouts["uncalibrated"]
    policy = AbstentionPolicy.load(explorer.save(tmp_path / "hand.json"))
    assert policy.threshold == explorer.threshold
    assert policy.calibrated is False
    assert policy.guarantee is None  # a bound held for the chosen threshold only
    assert policy.validation == {
        "coverage": r["coverage"],
        "risk": r["risk"],
        "accepted": r["accepted"],
        "errors": r["errors"],
        "total": len(y),
    }
    assert policy.apply(prediction, model_id="m").report(y).risk == r["risk"]


def test_save_is_refused_above_the_ceiling_or_with_nothing_answered(explorer, tmp_path):
    explorer.threshold = 0.0
    assert explorer.readouts["calibrated"]["risk"] > 0.05
    with pytest.raises(ConfigError, match=r"is above the risk ceiling 0\.05"):
        explorer.save(tmp_path / "a.json")
    explorer.set_state({"path": str(tmp_path / "b.json")})
    before = explorer.revision
    explorer._dispatch_frontend_msg(explorer, {"kind": "save"}, [])
    assert explorer.revision == before + 1  # a refused save is answered too
    assert "ConfigError: threshold=0.0 is invalid" in explorer.error
    assert "Traceback" not in explorer.error
    explorer.threshold = 1.0
    if explorer.readouts["calibrated"]["accepted"] == 0:
        with pytest.raises(ConfigError, match="it answers no row"):
            explorer.save(tmp_path / "c.json")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- views and reloads


def test_a_view_gets_curves_and_stops_that_are_exact_points_of_the_engines_curves(explorer, inputs):
    prediction, calibrated, y = inputs
    fe = shown(explorer)
    snap = [(c, b) for c, b in fe.custom_with_buffers() if c["kind"] == "snapshot"]
    assert len(snap) == 1
    sent = FakeFrontend.decode(*snap[0])
    stops, curve = sent["stops"], sent["curve"]
    full = risk_coverage_curve(calibrated, y)
    assert 500 <= len(stops["threshold"]) <= 1001
    assert np.all(np.diff(stops["threshold"]) > 0)  # ascending: the slider's order
    index = {t: i for i, t in enumerate(full.thresholds.tolist())}
    for t, cov, risk, acc, err in zip(
        stops["threshold"],
        stops["coverage"],
        stops["risk"],
        stops["accepted"],
        stops["errors"],
        strict=True,
    ):
        i = index[t]  # every stop is a threshold of the engine's curve...
        assert (cov, risk, acc, err) == (
            full.coverage[i],
            full.risk[i],
            full.accepted[i],
            full.errors[i],
        )  # ...with its exact figures
    assert stops["coverage"][0] == 1.0
    # the drawn curves pass through every stop of their side
    x = curve["coverage"]
    assert np.all(np.diff(x) > 0)
    raw = risk_coverage_curve(prediction, y)
    for side, c in (("calibrated", full), ("uncalibrated", raw)):
        col = curve[f"risk.{side}"]
        assert np.isfinite(col[-1])
        where = np.searchsorted(x, c.coverage[-1])
        assert col[where] == pytest.approx(c.risk[-1])


def test_a_reloaded_view_gets_everything_and_the_traits_it_reads(explorer):
    explorer.threshold = 0.93
    explorer.abstained_start = 20
    reloaded = FakeFrontend(explorer)
    reloaded.hello()
    snaps = [c for c in reloaded.custom if c["kind"] == "snapshot"]
    assert [c["to"] for c in snaps] == [reloaded.view]
    state = explorer.get_state()
    assert state["threshold"] == 0.93
    assert state["abstained_start"] == 20
    assert state["readouts"]["calibrated"]["threshold"] == 0.93
    assert len(state["abstained_rows"]) == 10


def test_a_plain_array_is_one_side_and_its_labels_are_given(inputs):
    prediction, _, y = inputs
    p = prediction.probabilities.numpy()
    ex = AbstentionExplorer(p, y.numpy(), labels=LABELS)
    try:
        assert ex.info["sides"] == ["uncalibrated"]
        assert ex.info["labels"] == list(LABELS)
        assert ex.mistakes[0]["predicted_label"] in LABELS
        with pytest.raises(Exception, match="use='calibrated' is invalid"):
            ex.use = "calibrated"
    finally:
        ex.close()


def test_text_repr_for_places_with_no_front_end(explorer):
    explorer.threshold = 0.9
    r = explorer.readouts["calibrated"]
    assert repr(explorer) == (
        f"AbstentionExplorer(4,000 rows, threshold 0.9 on calibrated max_probability, "
        f"coverage {r['coverage']:.4f}, risk {r['risk']:.4f}, ceiling 0.05)"
    )
    explorer.threshold = 1.0
    if explorer.readouts["calibrated"]["accepted"] == 0:
        assert "risk n/a (nothing answered)" in repr(explorer)


def test_bytes_per_threshold_move_do_not_grow_with_the_rows():
    sizes = {}
    for n in (1000, 40_000):
        _, calibrated, y = data(n=n)
        ex = AbstentionExplorer(calibrated, y)
        fe = shown(ex)
        fe.clear()
        for t in (0.8, 0.85, 0.9):
            ex.set_state({"threshold": t})
        sizes[n] = fe.bytes_sent / 3
        ex.close()
    assert sizes[40_000] < 1.3 * sizes[1000]
    assert sizes[40_000] < 8192
    assert math.isfinite(sizes[1000])


def test_select_chooses_again_after_a_hand_move(explorer, inputs):
    _, calibrated, y = inputs
    chosen = explorer.threshold
    explorer.threshold = 0.5
    selection = explorer.select()  # the ceiling did not change: choose again explicitly
    assert selection.threshold == chosen
    assert explorer.threshold == chosen
    assert (
        selection.threshold
        == select_threshold(calibrated, y, risk_ceiling=0.05, split_id="v").threshold
    )


def test_the_views_transport_ends_with_the_kernels_curves_and_stops(explorer, tmp_path):
    """Replayed through the real js/shared/transport.js (Node): after a snapshot and a
    change of side, the view holds the kernel's curve and the new side's stops."""
    from test_widget_contract import replay

    fe = shown(explorer)
    explorer.use = "uncalibrated"
    held = replay(fe.custom_with_buffers(), fe.view, tmp_path, series=("curve", "stops"))
    assert held["synced"] is True
    for name, table in (("curve", explorer._curve), ("stops", explorer._stop_table)):
        js = held["series"][name]
        assert js["length"] == len(table)
        for field in table.fields:
            kernel = [
                "NaN" if isinstance(v, float) and math.isnan(v) else v
                for v in table.column(field).tolist()
            ]
            assert js["columns"][field] == kernel, (name, field)
    assert (
        held["series"]["stops"]["columns"]["threshold"]
        == (
            explorer.curve("uncalibrated").thresholds[explorer._sides["uncalibrated"].stops[::-1]]
        ).tolist()
    )
