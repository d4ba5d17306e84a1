"""Temperature calibration (§2.18): fit one temperature on a calibration split, apply it,
and report NLL, Brier and ECE before and after on held-out data.

    from nnx_lab.calibration import TemperatureCalibrator, fit_temperature, model_fingerprint

    fit = fit_temperature(model.predict_proba(X_calib, spec), y_calib,
                          model_id=model_fingerprint(model), split_id="calibration",
                          train_split_id="train", test_split_id="test")
    calibrator = fit.require()
"""

from ..errors import CalibrationError, CalibrationMismatchError, ModelFingerprintError
from ._calibrator import CalibratedPrediction, TemperatureCalibrator, model_fingerprint
from ._fit import CalibrationFitError, TemperatureFit, fit_temperature
from ._inputs import check_prediction, check_split_ids, check_text, prediction_rows  # noqa: F401
from ._report import (
    CalibrationReport,
    ReliabilityDiagram,
    calibration_metrics,
    reliability_diagram,
)

__all__ = [
    "CalibratedPrediction",
    "CalibrationError",
    "CalibrationFitError",
    "CalibrationMismatchError",
    "CalibrationReport",
    "ModelFingerprintError",
    "ReliabilityDiagram",
    "TemperatureCalibrator",
    "TemperatureFit",
    "calibration_metrics",
    "fit_temperature",
    "model_fingerprint",
    "reliability_diagram",
]
