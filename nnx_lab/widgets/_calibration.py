"""CalibrationExplorer: a temperature slider over a reliability diagram, with the fit."""

from __future__ import annotations

import math
import pathlib
import threading
from typing import Any

import numpy as np
import traitlets as t

from ..calibration import (
    CalibrationFitError,
    TemperatureCalibrator,
    TemperatureFit,
    check_prediction,
    check_split_ids,
    check_text,
    fit_temperature,
    model_fingerprint,
)
from ..errors import ConfigError
from ._base import NNxWidget
from ._page_messages import ExplorerMessages
from ._tables import Table
from ._temperature import SweepPoint, TemperatureSweep
from ._transport import SeriesTransport

__all__ = ["CalibrationExplorer"]

# What the slider spans (log scale); code may set any temperature in the wider range.
SLIDER_RANGE = (0.05, 20.0)
TEMPERATURE_RANGE = (1e-3, 1e3)
# compute="auto" lets the browser measure up to this many logits (8 MB as float32):
# below it a slider move costs no round trip (benchmarks/explorer_slider.py).
BROWSER_MAX_LOGITS = 2_000_000
COMPUTE = ("auto", "kernel", "browser")


def _check_temperature(value: Any) -> float:
    lo, hi = TEMPERATURE_RANGE
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not lo <= value <= hi:
        raise ConfigError(
            "temperature",
            value,
            f"pass a finite temperature in [{lo:g}, {hi:g}] (T > 1 softens the probabilities, "
            "T < 1 sharpens them)",
        )
    return float(value)


def _finite_or_nan(values: list[float | None]) -> np.ndarray:
    return np.asarray([math.nan if v is None else v for v in values], dtype=np.float64)


def _prediction_of(source: Any, X: Any, spec: Any, model_id: Any) -> tuple[Any, str]:
    """A raw prediction and the model id, from a model (with ``X``) or a prediction."""
    if hasattr(source, "predict_proba") and hasattr(source, "net"):
        if X is None:
            raise ConfigError(
                "X",
                None,
                "with a model, pass the calibration rows to predict: "
                "CalibrationExplorer(model, y, X=X_calib, spec=spec)",
            )
        prediction = source.predict_proba(X, spec)
        return check_prediction(prediction), model_id or model_fingerprint(source)
    for name, value in (("X", X), ("spec", spec)):
        if value is not None:
            raise ConfigError(
                name,
                "given with a prediction",
                f"{name}= is for a model; a prediction already holds its rows and spec",
            )
    prediction = check_prediction(source)
    if model_id is None:
        raise ConfigError(
            "model_id",
            None,
            "with a prediction, name the model it came from: model_id=model_fingerprint(model) "
            "(or pass the model itself with X=); the saved calibrator refuses other models",
        )
    return prediction, check_text(model_id, "model_id")  # type: ignore[return-value]


class CalibrationExplorer(ExplorerMessages, NNxWidget):
    """A reliability diagram, a confidence histogram and NLL / Brier / ECE of a
    prediction, live under a temperature slider; a Fit button that sets the temperature
    minimizing the NLL (``nnx_lab.calibration.fit_temperature``); Save writes the fitted
    ``TemperatureCalibrator`` as JSON (atomically).

    ``CalibrationExplorer(model, y, X=X_calib, spec=spec)`` predicts ``X`` with the
    model (and fingerprints it); ``CalibrationExplorer(prediction, y, model_id=...)``
    takes ``model.predict_proba(...)`` (or ``prediction_from_logits(...)``) as it is.
    ``y`` are the calibration split's targets. Everything shown is measured on these
    rows: report the result on a held-out split with ``explorer.calibrator.report(...)``.

    The state lives in traitlets, so code drives it as the controls do:
    ``explorer.temperature = 2.0``, ``explorer.fit()``, ``explorer.path = "cal.json"``,
    ``explorer.save()``. ``explorer.metrics`` reads NLL / Brier / ECE at the current
    temperature, ``explorer.metrics_before`` at T = 1.

    ``compute`` says who measures a slider move: ``"browser"`` (the view, from the
    logits sent once as float32), ``"kernel"`` (the kernel, sending per-bin summaries),
    or ``"auto"``: the browser up to ``BROWSER_MAX_LOGITS`` categorical logits, the
    kernel above (``benchmarks/explorer_slider.py`` measured both; docs/explorers.md).
    """

    _bundle_name = "calibration"
    # What the page may set: the temperature slider, the calibrator's path. The kernel
    # owns the rest.
    _page_traits = NNxWidget._page_traits | {"temperature", "path"}

    temperature = t.Float(1.0, help="T: the logits are divided by it.").tag(sync=True)
    fitted_temperature = t.Float(
        None, allow_none=True, help="The temperature the last Fit found (None before)."
    ).tag(sync=True)
    fit_message = t.Unicode("", help="What the last Fit found, or why it failed.").tag(sync=True)
    path = t.Unicode("calibrator.json", help="Where Save writes the calibrator.").tag(sync=True)
    saved = t.Unicode("", help="What the last Save wrote.").tag(sync=True)
    revision = t.Int(0, help="Counts the requests the kernel answered.").tag(sync=True)
    info = t.Dict(help="What the explorer shows: rows, classes, ids (fixed).").tag(sync=True)

    def __init__(
        self,
        source: Any,
        y: Any,
        *,
        X: Any = None,
        spec: Any = None,
        model_id: str | None = None,
        split_id: str = "calibration",
        train_split_id: str | None = None,
        test_split_id: str | None = None,
        bins: int = 15,
        temperature: float = 1.0,
        path: str = "calibrator.json",
        compute: str = "auto",
        update_interval: float = 0.02,
    ) -> None:
        if compute not in COMPUTE:
            raise ConfigError(
                "compute",
                compute,
                "use 'auto' (the browser measures up to 2,000,000 logits, the kernel above), "
                "'kernel' or 'browser'",
            )
        split_id = check_text(split_id, "split_id")  # type: ignore[assignment]
        check_text(train_split_id, "train_split_id", optional=True)
        check_text(test_split_id, "test_split_id", optional=True)
        check_split_ids(
            train_split_id=train_split_id, split_id=split_id, test_split_id=test_split_id
        )
        if isinstance(bins, bool) or not isinstance(bins, int) or not 2 <= bins <= 100:
            raise ConfigError("bins", bins, "pass an integer number of bins in [2, 100] (15)")
        if not 0.005 <= update_interval <= 10:
            raise ConfigError("update_interval", update_interval, "pass seconds in [0.005, 10]")
        temperature = _check_temperature(temperature)
        if not isinstance(path, str) or not path.strip():
            raise ConfigError(
                "path", path, "name the JSON file Save writes (e.g. 'calibrator.json')"
            )
        prediction, model_id = _prediction_of(source, X, spec, model_id)
        self._prediction = prediction
        self._y = y
        spec_ = prediction.spec
        logits = prediction.logits
        classes = int(logits.shape[spec_.axis_for(tuple(logits.shape))])
        if compute == "browser" and spec_.kind != "categorical":
            raise ConfigError(
                "compute",
                compute,
                "the browser measures categorical probabilities only: use compute='kernel' "
                "(or 'auto') for bernoulli outputs",
            )
        if compute == "auto":
            small = logits.numel() <= BROWSER_MAX_LOGITS
            compute = "browser" if spec_.kind == "categorical" and small else "kernel"
        self.compute = compute
        # checks y with the engine's checks; in browser mode, on the values the browser gets
        self._sweep = TemperatureSweep(prediction, y, bins, float32=compute == "browser")
        self._ids = {
            "model_id": model_id,
            "split_id": split_id,
            "train_split_id": train_split_id,
            "test_split_id": test_split_id,
        }
        self._lock = threading.RLock()
        self._fit: TemperatureFit | None = None
        self._calibrator: TemperatureCalibrator | None = None
        self._point: SweepPoint | None = None
        self._before = self._sweep.at(1.0)
        self._bins = Table(
            [
                ("count_before", "int32"),
                ("confidence_before", "float64"),
                ("accuracy_before", "float64"),
                ("count", "int32"),
                ("confidence", "float64"),
                ("accuracy", "float64"),
            ]
        )
        self._metrics = Table([(n, "float64") for n in ("temperature", "nll", "brier", "ece")])
        super().__init__(
            path=path,
            info={
                "rows": self._sweep.rows,
                "classes": classes,
                "kind": spec_.kind,
                "labels": None if spec_.labels is None else [str(v) for v in spec_.labels],
                "bins": bins,
                "accuracy": self._sweep.accuracy,
                "slider_range": list(SLIDER_RANGE),
                "compute": compute,
                **self._ids,
            },
        )
        if compute == "browser":
            # sent once (and to each reloaded view); the view measures them itself
            shifted, targets = self._sweep.buffers()
            logits_table, targets_table = Table([("z", "float32")]), Table([("y", "int32")])
            logits_table.set({"z": shifted})
            targets_table.set({"y": targets})
            series = {"logits": logits_table, "targets": targets_table}
            for table in series.values():
                table.take_changes()  # no view yet: each view gets them in its snapshot
        else:
            series = {"bins": self._bins, "metrics": self._metrics}
        self._transport = SeriesTransport(self.send, series, self._lock, interval=update_interval)
        self.observe(self._on_temperature, names="temperature")
        self.temperature = temperature  # the first refresh, unless it is 1 (the default)
        if self._point is None:
            self._refresh()

    # ------------------------------------------------------------------ traits

    @t.validate("temperature")
    def _valid_temperature(self, proposal: Any) -> float:
        try:
            return _check_temperature(proposal["value"])
        except ConfigError as exc:
            raise t.TraitError(str(exc)) from None

    @t.validate("path")
    def _valid_path(self, proposal: Any) -> str:
        value = proposal["value"]
        if not value.strip():
            raise t.TraitError(
                f"path={value!r} is invalid: name the JSON file Save writes (e.g. "
                "'calibrator.json')"
            )
        return value

    def _on_temperature(self, _change: Any) -> None:
        self._refresh()

    def set_state(self, sync_data: dict[str, Any]) -> None:
        try:
            super().set_state(sync_data)  # a refused value is shown and sent back
        finally:
            self.revision += 1  # answered: the view may send its next value

    def _refresh(self) -> None:
        """Measure at the current temperature and send it to the views (in browser mode
        the views measure it themselves: the kernel keeps its figures for Python)."""
        with self._lock:
            point = self._sweep.at(self.temperature)
            self._point = point
            self.error = ""
            if self.compute == "browser":
                return
            before_conf, before_acc = self._before.means()
            conf, acc = point.means()
            self._bins.set(
                {
                    "count_before": self._before.counts,
                    "confidence_before": _finite_or_nan(before_conf),
                    "accuracy_before": _finite_or_nan(before_acc),
                    "count": point.counts,
                    "confidence": _finite_or_nan(conf),
                    "accuracy": _finite_or_nan(acc),
                }
            )
            b = self._before
            self._metrics.set(
                {
                    "temperature": [1.0, point.temperature],
                    "nll": [b.nll, point.nll],
                    "brier": [b.brier, point.brier],
                    "ece": [b.ece, point.ece],
                }
            )
            self._transport.request_flush()

    # ------------------------------------------------------------------ messages
    # hello and save: ExplorerMessages (_page_messages.py)

    def _on_fit(self, _content: dict[str, Any], _buffers: list[Any]) -> None:
        try:
            self.fit()
        except CalibrationFitError:
            pass  # fit_message says why; nothing else changed
        finally:
            self.revision += 1

    # ------------------------------------------------------------------ actions

    def fit(self) -> TemperatureCalibrator:
        """Fit the temperature that minimizes the NLL on these rows and move the slider
        there. Returns the calibrator; raises ``CalibrationFitError`` (the reason is also
        shown in the widget) when no finite temperature is optimal."""
        with self._lock:
            fit = fit_temperature(self._prediction, self._y, **self._ids)  # type: ignore[arg-type]
            self._fit = fit
            if not fit.ok:
                self.fit_message = f"no temperature fitted: {fit.reason}"
                return fit.require()  # raises CalibrationFitError
            calibrator = fit.require()
            self._calibrator = calibrator
            with self.hold_sync():
                self.fitted_temperature = calibrator.temperature
                self.fit_message = (
                    f"fitted T = {calibrator.temperature:.4g} in {fit.iterations} iterations: "
                    f"NLL {fit.nll_before:.4f} -> {fit.nll_after:.4f} on {fit.rows:,} rows"
                )
                self.saved = ""
            self.temperature = calibrator.temperature
            return calibrator

    @property
    def calibrator(self) -> TemperatureCalibrator | None:
        """The calibrator of the last successful Fit (None before)."""
        return self._calibrator

    def save(self, path: str | pathlib.Path | None = None) -> pathlib.Path:
        """Write the fitted calibrator as JSON to ``path`` (default: the ``path`` trait,
        which the widget's box edits), atomically. A path given here becomes the
        ``path`` trait. Refused before anything is written when nothing was fitted, or
        when the folder does not exist."""
        with self._lock:
            if path is not None:
                self.path = str(path)
            calibrator = self._calibrator
            if calibrator is None:
                raise ConfigError(
                    "calibrator",
                    None,
                    "nothing fitted yet: press Fit (or call explorer.fit()) before saving",
                )
            written = calibrator.save(self.path)
            note = ""
            if not math.isclose(self.temperature, calibrator.temperature, rel_tol=1e-9):
                note = f" (the slider's T = {self.temperature:.4g} is not saved)"
            self.saved = f"saved the fitted T = {calibrator.temperature:.4g} to {written}{note}"
            return written

    # ------------------------------------------------------------------ reading

    @property
    def metrics(self) -> dict[str, float]:
        """NLL, Brier and ECE at the current temperature (``temperature`` included)."""
        point = self._point
        assert point is not None
        return {
            "temperature": point.temperature,
            "nll": point.nll,
            "brier": point.brier,
            "ece": point.ece,
        }

    @property
    def metrics_before(self) -> dict[str, float]:
        """NLL, Brier and ECE at T = 1."""
        b = self._before
        return {"temperature": 1.0, "nll": b.nll, "brier": b.brier, "ece": b.ece}

    def diagram(self) -> dict[str, list[Any]]:
        """The reliability bins at the current temperature: ``edges``, ``counts``, mean
        ``confidence`` and ``accuracy`` per bin (None for an empty bin)."""
        point = self._point
        assert point is not None
        conf, acc = point.means()
        bins = self._sweep.bins
        return {
            "edges": [i / bins for i in range(bins + 1)],
            "counts": list(point.counts),
            "confidence": conf,
            "accuracy": acc,
        }

    @property
    def transport_stats(self) -> Any:
        return self._transport.stats

    def summary(self) -> str:
        info = self.info
        m, b = self.metrics, self.metrics_before
        fitted = self.fitted_temperature
        parts = [
            f"{info['rows']:,} rows",
            f"{info['classes']} classes" if info["kind"] == "categorical" else "bernoulli",
            f"T = {self.temperature:.4g}"
            + (f" (fitted {fitted:.4g})" if fitted is not None else " (not fitted)"),
            f"NLL {b['nll']:.4f} -> {m['nll']:.4f}",
            f"Brier {b['brier']:.4f} -> {m['brier']:.4f}",
            f"ECE {b['ece']:.4f} -> {m['ece']:.4f}",
        ]
        return ", ".join(parts)

    def close(self) -> None:
        transport = getattr(self, "_transport", None)
        if transport is not None:
            transport.close()
        super().close()
