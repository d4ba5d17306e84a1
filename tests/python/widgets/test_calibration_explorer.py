"""CalibrationExplorer, kernel side: the traits drive the measurement (from Python as
from a view), the figures are the metric registry's, bad input from a view is refused
while the kernel keeps its state, Fit and Save, and what a (reloaded) view receives."""

from __future__ import annotations

import json
import math
import os

import engine_factories as f
import ipywidgets.widgets.widget as ipw
import numpy as np
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
from nnx_lab.widgets import CalibrationExplorer
from nnx_lab.widgets._temperature import TemperatureSweep
from nnx_lab.widgets._testing import FakeFrontend

LABELS = ("ant", "bee", "cat", "dog", "eel", "fox", "gnu")


def overconfident(n: int = 3000, classes: int = 5, scale: float = 3.0, seed: int = 0):
    """Logits whose probabilities are too sharp: the fitted temperature is above 1."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, classes, (n,), generator=g)
    z = torch.randn(n, classes, generator=g)
    z[torch.arange(n), y] += 1.5
    z = scale * z
    spec = ProbabilitySpec("categorical", labels=LABELS[:classes])
    return prediction_from_logits(z, spec), y


@pytest.fixture
def data():
    return overconfident()


@pytest.fixture
def explorer(data):
    prediction, y = data
    ex = CalibrationExplorer(
        prediction, y, model_id="model-a", train_split_id="train", compute="kernel"
    )
    yield ex
    ex.close()


def shown(widget) -> FakeFrontend:
    fe = FakeFrontend(widget)
    widget._transport.timer_factory = None  # every flush now, none from a timer
    widget._transport.interval = 0.0
    fe.hello()
    return fe


def last_series(fe: FakeFrontend) -> dict[str, dict[str, np.ndarray]]:
    """The columns of the last update or snapshot the view got, by series."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for content, buffers in fe.custom_with_buffers():
        if content.get("kind") in ("update", "snapshot"):
            out.update(FakeFrontend.decode(content, buffers))
    return out


# ---------------------------------------------------------------- the measurement


@pytest.mark.parametrize("temperature", [0.25, 0.7, 1.0, 1.9, 6.0])
def test_the_sweep_gives_the_registrys_figures_at_any_temperature(data, temperature):
    prediction, y = data
    y = y.clone()
    y[:7] = -100  # left out, as the registry leaves them out
    sweep = TemperatureSweep(prediction, y, 15)
    point = sweep.at(temperature)
    expected = calibration_metrics(prediction, y, temperature=temperature)
    for key in ("nll", "brier", "ece"):
        assert point.__getattribute__(key) == pytest.approx(expected[key], rel=1e-6, abs=1e-12)
    diagram = reliability_diagram(prediction, y, temperature=temperature)
    assert point.counts == list(diagram.counts)
    conf, acc = point.means()
    for got, want in ((conf, diagram.confidence), (acc, diagram.accuracy)):
        for a, b in zip(got, want, strict=True):
            assert (a is None and b is None) or a == pytest.approx(b, rel=1e-6)
    assert sweep.rows == len(y) - 7


def test_the_sweep_gives_the_registrys_figures_for_bernoulli_outputs():
    g = torch.Generator().manual_seed(3)
    z = 3 * torch.randn(2000, 2, generator=g)
    y = (torch.rand(2000, 2, generator=g) < torch.sigmoid(z / 3)).float()
    y[:5, 0] = float("nan")
    prediction = prediction_from_logits(z, ProbabilitySpec("bernoulli"))
    sweep = TemperatureSweep(prediction, y, 10)
    for temperature in (0.5, 1.0, 3.0):
        point = sweep.at(temperature)
        expected = calibration_metrics(prediction, y, temperature=temperature, bins=10)
        assert point.nll == pytest.approx(expected["nll"], rel=1e-6)
        assert point.brier == pytest.approx(expected["brier"], rel=1e-6)
        assert point.ece == pytest.approx(expected["ece"], rel=1e-6)
        diagram = reliability_diagram(prediction, y, temperature=temperature, bins=10)
        assert point.counts == list(diagram.counts)


def test_setting_the_temperature_from_python_measures_and_sends_it(explorer, data):
    prediction, y = data
    fe = shown(explorer)
    fe.clear()
    explorer.temperature = 2.0
    assert explorer.metrics == pytest.approx(
        {"temperature": 2.0, **calibration_metrics(prediction, y, temperature=2.0)}, rel=1e-6
    )
    assert explorer.metrics_before == pytest.approx(
        {"temperature": 1.0, **calibration_metrics(prediction, y)}, rel=1e-6
    )
    updates = [c for c in fe.custom if c["kind"] == "update"]
    assert len(updates) == 1  # bins and metrics together, in one numbered message
    sent = last_series(fe)
    diagram = reliability_diagram(prediction, y, temperature=2.0)
    assert sent["bins"]["count"].tolist() == list(diagram.counts)
    assert sent["bins"]["count_before"].tolist() == list(reliability_diagram(prediction, y).counts)
    accuracy = [math.nan if a is None else a for a in diagram.accuracy]
    np.testing.assert_allclose(sent["bins"]["accuracy"], accuracy, rtol=1e-6)
    assert sent["metrics"]["temperature"].tolist() == [1.0, 2.0]
    assert sent["metrics"]["ece"][1] == pytest.approx(explorer.metrics["ece"])
    assert explorer.diagram()["counts"] == list(diagram.counts)


def test_a_view_moving_the_slider_does_what_python_does(explorer, data):
    prediction, y = data
    fe = shown(explorer)
    before = explorer.revision
    explorer.set_state({"temperature": 2.5})  # what a view's slider sends
    assert explorer.temperature == 2.5
    assert explorer.revision == before + 1  # answered: the view may send its next value
    assert explorer.metrics["ece"] == pytest.approx(
        calibration_metrics(prediction, y, temperature=2.5)["ece"], rel=1e-6
    )
    assert last_series(fe)["metrics"]["temperature"][1] == 2.5
    assert explorer.error == ""


@pytest.mark.parametrize(
    ("value", "shown_value"),
    [(-1.0, "-1.0"), (0.0, "0.0"), (None, "None"), ("warm", "'warm'"), (1e9, "1000000000.0")],
)
def test_bad_temperatures_from_a_view_are_refused_and_the_kernel_keeps_its_state(
    explorer, value, shown_value
):
    fe = shown(explorer)
    explorer.temperature = 1.7
    metrics = dict(explorer.metrics)
    fe.clear()
    before = explorer.revision
    explorer.set_state({"temperature": value})
    assert explorer.temperature == 1.7
    assert explorer.metrics == metrics
    assert "temperature" in explorer.error
    if value is not None and not isinstance(value, str):
        assert f"temperature={shown_value} is invalid" in explorer.error
        assert "pass a finite temperature in [0.001, 1000]" in explorer.error
    assert explorer.revision == before + 1
    # nothing was measured; the view was sent the value the kernel kept
    assert [c for c in fe.custom if c["kind"] == "update"] == []
    resent = [u for u in fe.updates if "temperature" in u]
    assert resent
    assert resent[-1]["temperature"] == 1.7
    explorer.set_state({"temperature": 1.2})  # the next good value clears the message
    assert explorer.error == ""


def test_an_empty_path_from_a_view_is_refused(explorer):
    explorer.path = "cal.json"
    explorer.set_state({"path": "  "})
    assert explorer.path == "cal.json"
    assert "path='  ' is invalid" in explorer.error


# ---------------------------------------------------------------- fit and save


def test_fit_sets_the_temperature_that_minimizes_the_nll(explorer, data):
    prediction, y = data
    fe = shown(explorer)
    calibrator = explorer.fit()
    expected = fit_temperature(
        prediction, y, model_id="model-a", split_id="calibration", train_split_id="train"
    ).require()
    assert calibrator.temperature == pytest.approx(expected.temperature, rel=1e-12)
    assert calibrator.temperature > 1.2  # the logits are over-confident
    assert explorer.temperature == calibrator.temperature
    assert explorer.fitted_temperature == calibrator.temperature
    assert explorer.fit_message.startswith(f"fitted T = {calibrator.temperature:.4g}")
    assert explorer.metrics["nll"] < explorer.metrics_before["nll"]
    assert explorer.metrics["ece"] < explorer.metrics_before["ece"]
    assert last_series(fe)["metrics"]["temperature"][1] == calibrator.temperature
    assert explorer.calibrator is calibrator


def test_the_fit_button_fits_and_answers(explorer):
    fe = shown(explorer)
    before = explorer.revision
    fe.widget._dispatch_frontend_msg(explorer, {"kind": "fit"}, [])
    assert explorer.fitted_temperature is not None
    assert explorer.temperature == explorer.fitted_temperature
    assert explorer.revision == before + 1


def test_a_fit_that_finds_no_temperature_says_why_and_changes_nothing():
    # every row decoded right: sharper is always better, no finite optimum
    y = torch.arange(50) % 3
    z = torch.nn.functional.one_hot(y, 3).float() * 4
    ex = CalibrationExplorer(
        prediction_from_logits(z, ProbabilitySpec("categorical")), y, model_id="m"
    )
    try:
        ex.temperature = 1.5
        with pytest.raises(CalibrationFitError, match="already decoded right"):
            ex.fit()
        assert ex.fit_message.startswith("no temperature fitted: every calibration target")
        assert ex.temperature == 1.5
        assert ex.fitted_temperature is None
        assert ex.calibrator is None
        ex._dispatch_frontend_msg(ex, {"kind": "fit"}, [])  # the button: no exception
        assert ex.error == ""
        assert ex.temperature == 1.5
    finally:
        ex.close()


def test_save_writes_the_fitted_calibrator_atomically(explorer, data, tmp_path):
    prediction, y = data
    with pytest.raises(ConfigError, match="nothing fitted yet: press Fit"):
        explorer.save(tmp_path / "early.json")
    assert not (tmp_path / "early.json").exists()
    calibrator = explorer.fit()
    path = explorer.save(tmp_path / "cal.json")
    assert explorer.path == str(tmp_path / "cal.json")  # a path given here is the trait
    loaded = TemperatureCalibrator.load(path)
    assert loaded == calibrator
    assert loaded.model_id == "model-a"
    assert (loaded.split_id, loaded.train_split_id) == ("calibration", "train")
    assert [p.name for p in tmp_path.iterdir()] == ["cal.json"]  # no temp file left
    assert explorer.saved == f"saved the fitted T = {calibrator.temperature:.4g} to {path}"
    # moving the slider away: Save still writes the fit, and says so
    explorer.temperature = 3.0
    explorer.save()
    assert TemperatureCalibrator.load(path).temperature == calibrator.temperature
    assert "(the slider's T = 3 is not saved)" in explorer.saved
    report = loaded.report(prediction, y, model_id="model-a", split_id="test")
    assert report.after["nll"] == pytest.approx(
        calibration_metrics(prediction, y, temperature=calibrator.temperature)["nll"]
    )


def test_save_from_the_widget_uses_the_path_it_was_given(explorer, tmp_path):
    explorer.fit()
    target = tmp_path / "from_widget.json"
    explorer.set_state({"path": str(target)})
    before = explorer.revision
    explorer._dispatch_frontend_msg(explorer, {"kind": "save"}, [])
    assert TemperatureCalibrator.load(target).temperature == explorer.fitted_temperature
    assert explorer.error == ""
    assert explorer.revision == before + 1  # answered: the view may send its next value


def test_a_failed_save_is_shown_writes_nothing_and_keeps_the_old_file(explorer, tmp_path):
    explorer.fit()
    missing = tmp_path / "no" / "such" / "folder" / "cal.json"
    explorer.set_state({"path": str(missing)})
    explorer._dispatch_frontend_msg(explorer, {"kind": "save"}, [])
    assert "ConfigError: path=" in explorer.error
    assert "does not exist; create it first" in explorer.error
    assert "Traceback" not in explorer.error  # a refusal, not a crash
    assert not missing.parent.exists()
    # a write that fails half way leaves the previous file as it was
    good = tmp_path / "cal.json"
    explorer.save(good)
    before = good.read_bytes()
    explorer.temperature = 2.0
    explorer._calibrator = TemperatureCalibrator.from_fit(
        fit_temperature(explorer._prediction, explorer._y, model_id="model-a", split_id="c")
    )

    def boom(*_a, **_k):
        raise OSError("disk full")

    import nnx_lab.runs._atomic as io

    original = io.os.replace
    io.os.replace = boom
    try:
        explorer._dispatch_frontend_msg(explorer, {"kind": "save"}, [])
    finally:
        io.os.replace = original
    assert "OSError: disk full" in explorer.error
    assert good.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cal.json"]
    assert json.loads(before)["temperature"] == explorer.fitted_temperature


# ---------------------------------------------------------------- inputs


def test_a_model_is_predicted_and_fingerprinted():
    torch.manual_seed(0)
    model = f.model()
    X, y, _, _ = f.data(n_train=200)
    spec = ProbabilitySpec("categorical")
    ex = CalibrationExplorer(model, y, X=X, spec=spec)
    try:
        assert ex.info["model_id"] == model_fingerprint(model)
        expected = calibration_metrics(model.predict_proba(X, spec), y)
        assert ex.metrics_before["nll"] == pytest.approx(expected["nll"], rel=1e-6)
        assert ex.info["rows"] == 200
        assert ex.info["classes"] == 3
    finally:
        ex.close()


def _widgets() -> int:
    return len(ipw._instances)


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda p, y, m: CalibrationExplorer(p, y), ConfigError, "model_id=None is invalid"),
        (lambda p, y, m: CalibrationExplorer(m, y), ConfigError, "X=None is invalid"),
        (
            lambda p, y, m: CalibrationExplorer(p, y, model_id="a", X=[1]),
            ConfigError,
            "X= is for a model",
        ),
        (
            lambda p, y, m: CalibrationExplorer(p, y, model_id="a", temperature=-2),
            ConfigError,
            "temperature=-2 is invalid",
        ),
        (
            lambda p, y, m: CalibrationExplorer(p, y, model_id="a", bins=1),
            ConfigError,
            "bins=1 is invalid",
        ),
        (
            lambda p, y, m: CalibrationExplorer(p, y, model_id="a", test_split_id="calibration"),
            ConfigError,
            "it equals split_id='calibration'",
        ),
        (
            lambda p, y, m: CalibrationExplorer(p, y[:-1], model_id="a"),
            DataError,
            "pass one class index per row",
        ),
        (
            lambda p, y, m: CalibrationExplorer(p.logits, y, model_id="a"),
            ConfigError,
            "pass model.predict_proba",
        ),
        (
            lambda p, y, m: CalibrationExplorer(p, y, model_id="a", path=""),
            ConfigError,
            "name the JSON file",
        ),
    ],
)
def test_bad_arguments_are_refused_before_a_widget_exists(data, make, error, match):
    prediction, y = data
    model = f.model(net={"output_dim": 5})
    before = _widgets()
    with pytest.raises(error, match=match):
        make(prediction, y, model)
    assert _widgets() == before


def test_a_calibrated_prediction_is_refused_with_the_fix(data):
    prediction, y = data
    cal = fit_temperature(prediction, y, model_id="m", split_id="c").require()
    with pytest.raises(ConfigError, match="pass the raw prediction"):
        CalibrationExplorer(cal.transform(prediction, model_id="m"), y, model_id="m")


# ---------------------------------------------------------------- views and reloads


def test_a_reloaded_view_gets_the_current_state_in_its_snapshot(explorer, data):
    prediction, y = data
    explorer.fit()
    explorer.temperature = 0.8
    reloaded = FakeFrontend(explorer)
    reloaded.hello()
    snaps = [c for c in reloaded.custom if c["kind"] == "snapshot"]
    assert len(snaps) == 1
    assert snaps[0]["to"] == reloaded.view
    sent = last_series(reloaded)
    assert sent["metrics"]["temperature"].tolist() == [1.0, 0.8]
    assert sent["bins"]["count"].tolist() == list(
        reliability_diagram(prediction, y, temperature=0.8).counts
    )
    # the traits a reloaded view reads are the kernel's
    assert explorer.get_state()["fitted_temperature"] == explorer.fitted_temperature
    assert explorer.get_state()["temperature"] == 0.8


def test_text_repr_for_places_with_no_front_end(explorer):
    text = repr(explorer)
    assert text.startswith("CalibrationExplorer(3,000 rows, 5 classes, T = 1 (not fitted), NLL ")
    explorer.fit()
    assert f"(fitted {explorer.fitted_temperature:.4g})" in repr(explorer)
    explorer.set_state({"temperature": -1})
    assert repr(explorer).splitlines()[1].startswith("temperature=-1.0 is invalid")


def test_bytes_per_move_stay_small_whatever_the_rows(data):
    """Per move the kernel sends bins and metrics (a few hundred bytes), not rows."""
    sizes = {}
    for n in (500, 20_000):
        prediction, y = overconfident(n=n)
        ex = CalibrationExplorer(prediction, y, model_id="m", compute="kernel")
        fe = shown(ex)
        fe.clear()
        for t in (1.5, 2.0, 2.5):
            ex.temperature = t
        sizes[n] = fe.bytes_sent / 3
        ex.close()
    assert sizes[20_000] == pytest.approx(sizes[500], rel=0.05)
    assert sizes[20_000] < 2048


def test_importing_the_widgets_still_loads_no_torch():
    import subprocess
    import sys

    code = (
        "import sys, nnx_lab.widgets\n"
        "from nnx_lab.widgets import TrainingMonitor\n"
        "assert 'torch' not in sys.modules\n"
        "from nnx_lab.widgets import CalibrationExplorer, AbstentionExplorer\n"
        "assert 'torch' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})


# ---------------------------------------------------------------- browser mode


def test_auto_lets_the_browser_measure_few_logits_and_the_kernel_many(monkeypatch):
    import nnx_lab.widgets._calibration as module

    prediction, y = overconfident(n=400)
    small = CalibrationExplorer(prediction, y, model_id="m")
    assert small.compute == small.info["compute"] == "browser"
    monkeypatch.setattr(module, "BROWSER_MAX_LOGITS", 400 * 5 - 1)
    large = CalibrationExplorer(prediction, y, model_id="m")
    assert large.compute == "kernel"
    z = torch.randn(300, 1)
    bern = CalibrationExplorer(
        prediction_from_logits(z, ProbabilitySpec("bernoulli")),
        (z > 0).float(),
        model_id="m",
    )
    assert bern.compute == "kernel"  # the browser measures categorical rows only
    with pytest.raises(ConfigError, match="categorical probabilities only"):
        CalibrationExplorer(
            prediction_from_logits(z, ProbabilitySpec("bernoulli")),
            (z > 0).float(),
            model_id="m",
            compute="browser",
        )
    with pytest.raises(ConfigError, match="compute='gpu' is invalid"):
        CalibrationExplorer(prediction, y, model_id="m", compute="gpu")
    for ex in (small, large, bern):
        ex.close()


def test_browser_mode_sends_the_logits_once_and_nothing_per_move():
    prediction, y = overconfident(n=800)
    y = y.clone()
    y[3] = -100  # left out: the buffer holds the valid rows only
    ex = CalibrationExplorer(prediction, y, model_id="m", compute="browser")
    fe = shown(ex)
    sent = last_series(fe)
    assert set(sent) == {"logits", "targets"}
    z = prediction.logits.double()
    keep = y != -100
    shifted = (z - z.max(dim=1, keepdim=True).values)[keep].float().numpy().reshape(-1)
    np.testing.assert_array_equal(sent["logits"]["z"], shifted)
    np.testing.assert_array_equal(sent["targets"]["y"], y[keep].numpy())
    assert sent["logits"]["z"].dtype == np.float32
    fe.clear()
    ex.set_state({"temperature": 1.8})  # the view writes T once the slider rests
    assert [c for c in fe.custom if c["kind"] in ("update", "snapshot")] == []
    assert fe.bytes_sent < 1024
    # the kernel still knows the figures, for Python, as the registry gives them
    expected = calibration_metrics(prediction, y, temperature=1.8)
    for key in ("nll", "brier", "ece"):
        assert ex.metrics[key] == pytest.approx(expected[key], rel=1e-5)
    ex.close()


def test_the_browsers_arithmetic_equals_the_kernels_on_the_same_values(tmp_path):
    """js/calibration/measure.js, run by Node on the buffers the kernel sent, gives the
    kernel's figures (the kernel measures the same float32 values in browser mode)."""
    import base64
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (Node >= 20; `bash scripts/test` installs it)")
    prediction, y = overconfident(n=5000, classes=7, scale=4.0)
    ex = CalibrationExplorer(prediction, y, model_id="m", compute="browser", bins=15)
    z, t = ex._sweep.buffers()
    temperatures = [0.3, 0.77, 1.0, 2.4, 9.0]
    payload = {
        "z": base64.b64encode(z.tobytes()).decode(),
        "y": base64.b64encode(t.tobytes()).decode(),
        "bins": 15,
        "temperatures": temperatures,
    }
    path = tmp_path / "in.json"
    path.write_text(json.dumps(payload))
    script = pathlib_root() / "tests" / "js" / "measure_replay.mjs"
    out = subprocess.run(
        [node, str(script), str(path)], capture_output=True, text=True, check=True, timeout=120
    )
    got = json.loads(out.stdout)
    assert got["accuracy"] == pytest.approx(ex._sweep.accuracy, rel=1e-15)
    for t_, js in zip(temperatures, got["points"], strict=True):
        point = ex._sweep.at(t_)
        assert js["count"] == point.counts
        for key in ("nll", "brier", "ece"):
            assert js[key] == pytest.approx(getattr(point, key), rel=1e-12), key
        np.testing.assert_allclose(js["confidence"], point.confidence, rtol=1e-12)
        np.testing.assert_allclose(js["correct"], point.correct, rtol=0, atol=0)
    ex.close()


def pathlib_root():
    import pathlib

    return pathlib.Path(__file__).resolve().parents[3]


def test_every_widget_refuses_bad_view_input_and_sends_its_own_value_back():
    """The base (NNxWidget.set_state) does it for every widget: the monitor too."""
    from nnx_lab.widgets import TrainingMonitor

    monitor = TrainingMonitor(smoothing=0.8)
    try:
        fe = FakeFrontend(monitor)
        monitor.set_state({"smoothing": 5.0})
        assert monitor.smoothing == 0.8
        assert "smoothing" in monitor.error
        assert "Traceback" not in monitor.error
        assert fe.updates[-1] == {"smoothing": 0.8}
    finally:
        monitor.close()


def test_a_confidence_on_a_bin_edge_falls_in_the_lower_bin_as_in_the_registry():
    # tied logits: p = 0.5 exactly, the edge between (0.4, 0.5] and (0.5, 0.6] of 10 bins
    z = torch.tensor([[0.0, 0.0], [0.0, 0.0], [2.0, 0.0], [0.0, 3.0]])
    y = torch.tensor([0, 1, 0, 1])
    prediction = prediction_from_logits(z, ProbabilitySpec("categorical"))
    point = TemperatureSweep(prediction, y, 10).at(1.0)
    assert point.counts[4] == 2
    assert point.counts == list(reliability_diagram(prediction, y, bins=10).counts)


def test_the_views_transport_ends_with_the_kernels_tables(explorer, tmp_path):
    """The kernel's messages replayed through the real js/shared/transport.js (Node): a
    view that joined, then saw three moves, holds exactly the kernel's bins and metrics."""
    from test_widget_contract import replay

    fe = shown(explorer)
    for t in (0.5, 2.0, 3.3):
        explorer.temperature = t
    held = replay(fe.custom_with_buffers(), fe.view, tmp_path, series=("bins", "metrics"))
    assert held["synced"] is True
    for name, table in (("bins", explorer._bins), ("metrics", explorer._metrics)):
        js = held["series"][name]
        assert js["length"] == len(table)
        for field in table.fields:
            kernel = [
                "NaN" if isinstance(v, float) and math.isnan(v) else v
                for v in table.column(field).tolist()
            ]
            assert js["columns"][field] == kernel, (name, field)
    assert held["series"]["metrics"]["columns"]["temperature"] == [1.0, 3.3]
