"""``TemperatureCalibrator``: a fitted temperature, where it came from, and how it is
applied; saved as JSON (atomically), never pickled."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..engine.data import tensor_digest
from ..engine.probabilities import ProbabilitySpec, prediction_from_logits
from ..errors import CalibrationError, CalibrationMismatchError, ModelFingerprintError
from ..runs import CalibratorFile, DocumentType
from ._inputs import check_overrides, check_prediction, check_split_ids, check_text
from ._prediction import CalibratedPrediction
from ._report import CalibrationReport, check_bins, report_calibrated

__all__ = ["CalibratedPrediction", "TemperatureCalibrator", "model_fingerprint"]

FILE = DocumentType(
    "nnx_lab.temperature_calibrator", 1, noun="a calibrator", redo="fit and save again"
)
DISJOINTNESS = (
    "declared by split ids only: nnx_lab cannot verify that the calibration rows are "
    "disjoint from the training and test rows"
)


def model_fingerprint(model: Any) -> str:
    """A digest of the model's weights and buffers (names, dtypes, shapes, bytes): it
    changes whenever the weights change. Takes an ``nn.Module`` (hashed whole) or an
    ``NNModel`` (its ``.net``); a ``torch.compile`` or ``DataParallel`` /
    ``DistributedDataParallel`` wrapper gives its module's fingerprint. Views are
    materialized, quantized tensors hash their values with their scales and zero points,
    and a module's extra state is hashed as canonical JSON; anything else that cannot be
    hashed is a ``ModelFingerprintError`` (also a ``TypeError``)."""
    net = model if isinstance(model, torch.nn.Module) else getattr(model, "net", None)
    if not isinstance(net, torch.nn.Module):
        raise ModelFingerprintError(
            "model", model, "pass an NNModel (or a torch.nn.Module) to fingerprint its weights"
        )
    net = _unwrapped(net)
    h = hashlib.sha256()
    for name, value in net.state_dict().items():
        h.update(name.encode())
        if isinstance(value, torch.Tensor):
            _tensor(h, name, value)
        else:
            h.update(b"\x00extra:" + _canonical(value, name).encode())
    return f"sha256:{h.hexdigest()}"


def _unwrapped(net: torch.nn.Module) -> torch.nn.Module:
    while True:
        inner = getattr(net, "_orig_mod", None)  # torch.compile's OptimizedModule
        if isinstance(inner, torch.nn.Module):
            net = inner
        elif isinstance(
            net, torch.nn.DataParallel | torch.nn.parallel.DistributedDataParallel
        ) and isinstance(net.module, torch.nn.Module):
            net = net.module
        else:
            return net


def _unhashable(what: str, name: str) -> ModelFingerprintError:
    return ModelFingerprintError(
        "model",
        name,
        f"cannot hash the {what} {name!r}; pass a declared model_id instead",
    )


def _tensor(h: Any, name: str, t: torch.Tensor) -> None:
    if isinstance(t, torch.nn.parameter.UninitializedTensorMixin):
        raise _unhashable("uninitialized lazy tensor", name)
    if t.layout is not torch.strided:
        raise _unhashable(f"{t.layout} tensor", name)
    if t.device.type == "meta":
        raise _unhashable("meta tensor", name)
    t = t.detach()
    if t.is_quantized:
        scheme = t.qscheme()
        if scheme in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            params = f"{scheme}:{t.q_scale()!r}:{t.q_zero_point()}"
        else:
            scales = t.q_per_channel_scales().double().cpu().numpy().tobytes().hex()
            zeros = t.q_per_channel_zero_points().cpu().numpy().tobytes().hex()
            params = f"{scheme}:{t.q_per_channel_axis()}:{scales}:{zeros}"
        h.update(f"\x00quantized:{t.dtype}:{params}".encode())
        t = t.int_repr()
    tensor_digest(h, t.resolve_conj().resolve_neg())


def _canonical(value: Any, name: str) -> str:
    def check(v: Any) -> None:
        if v is None or isinstance(v, bool | int | str):
            return
        if isinstance(v, float):
            if not math.isfinite(v):
                raise _unhashable(f"non-tensor state entry (a non-finite {v})", name)
            return
        if isinstance(v, list | tuple):
            for x in v:
                check(x)
            return
        if isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    raise _unhashable(f"non-tensor state entry (a {type(k).__name__} key)", name)
                check(x)
            return
        raise _unhashable(f"non-tensor state entry (a {type(v).__name__})", name)

    check(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True)
class TemperatureCalibrator:
    """One temperature T (``.temperature`` is T itself: logits are divided by it), the
    spec it was fitted under, the model and the splits it came from.

    Built by ``fit_temperature(...).require()``, read by ``load`` / ``from_state``, or
    directly with NNx's arguments: ``TemperatureCalibrator(1.5, ("cat", "dog"),
    model_id, split_id, train_split_id=None, test_split_id=None, fit_config={},
    fit_result={})`` (a categorical calibrator over the labels' classes; its fit
    statistics are None). Every argument is checked as it is built (``CalibrationError``
    naming it). Equality and hashing follow ``state()``."""

    temperature: float
    labels: tuple[str | int, ...] | None
    model_id: str
    split_id: str
    train_split_id: str | None = None
    test_split_id: str | None = None
    fit_config: dict[str, Any] | None = None  # NNx's record of how it was fitted
    fit_result: dict[str, Any] | None = None
    kind: str = "categorical"
    class_axis: int = -1
    n_outputs: int | None = None  # size of the class axis; default: one per label
    rows: int | None = None  # the fit's statistics: None when built from a temperature
    nll_before: float | None = None
    nll_after: float | None = None
    iterations: int = 0
    disjointness: str = DISJOINTNESS

    def __post_init__(self) -> None:
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t <= 0:
            raise CalibrationError(
                "TemperatureCalibrator.temperature", t, "a temperature is a finite number > 0"
            )
        object.__setattr__(self, "temperature", float(t))
        if self.kind not in ("categorical", "bernoulli"):
            raise CalibrationError(
                "TemperatureCalibrator.kind", self.kind, "use 'categorical' or 'bernoulli'"
            )
        _set(self, "labels", _labels(self.labels))
        if self.n_outputs is None and self.labels is not None:
            _set(self, "n_outputs", len(self.labels))
        least = 2 if self.kind == "categorical" else 1
        n = self.n_outputs
        if (
            isinstance(n, bool)
            or not isinstance(n, int)
            or n < least
            or (self.labels is not None and len(self.labels) != n)
        ):
            raise CalibrationError(
                "TemperatureCalibrator.n_outputs",
                n,
                f"the class axis has one entry per label ({self.labels}), at least {least}; "
                "pass the labels, or n_outputs=",
            )
        if isinstance(self.class_axis, bool) or not isinstance(self.class_axis, int):
            raise CalibrationError(
                "TemperatureCalibrator.class_axis", self.class_axis, "pass an integer axis"
            )
        check_text(self.model_id, "TemperatureCalibrator.model_id")
        check_text(self.split_id, "TemperatureCalibrator.split_id")
        for name in ("train_split_id", "test_split_id"):
            check_text(getattr(self, name), f"TemperatureCalibrator.{name}", optional=True)
        check_split_ids(
            train_split_id=self.train_split_id,
            split_id=self.split_id,
            test_split_id=self.test_split_id,
        )
        for name in ("fit_config", "fit_result"):
            _set(self, name, _plain(getattr(self, name), f"TemperatureCalibrator.{name}"))
        _check_fit(self)

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_json(), sort_keys=True))

    @classmethod
    def from_fit(cls, fit: Any) -> TemperatureCalibrator:
        """The calibrator of a fitted ``TemperatureFit`` (what ``fit.require()`` gives)."""
        assert fit.temperature is not None
        assert fit.nll_after is not None
        return cls(
            temperature=fit.temperature,
            model_id=fit.model_id,
            split_id=fit.split_id,
            kind=fit.kind,
            class_axis=fit.class_axis,
            labels=fit.labels,
            n_outputs=fit.n_outputs,
            train_split_id=fit.train_split_id,
            test_split_id=fit.test_split_id,
            rows=fit.rows,
            nll_before=fit.nll_before,
            nll_after=fit.nll_after,
            iterations=fit.iterations,
        )

    @property
    def spec(self) -> ProbabilitySpec:
        return ProbabilitySpec(self.kind, self.class_axis, self.labels)

    # -- files --------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            **FILE.header(),
            "temperature": self.temperature,
            "spec": self.spec.state(),
            "n_outputs": self.n_outputs,
            "model_id": self.model_id,
            "splits": {
                "calibration": self.split_id,
                "train": self.train_split_id,
                "test": self.test_split_id,
                "disjointness": self.disjointness,
            },
            "fit": {
                "rows": self.rows,
                "nll_before": self.nll_before,
                "nll_after": self.nll_after,
                "iterations": self.iterations,
                # NNx's records enter only when given: older files stay byte-identical
                **({"config": self.fit_config} if self.fit_config else {}),
                **({"result": self.fit_result} if self.fit_result else {}),
            },
        }

    def state(self) -> dict[str, Any]:
        """NNx's name for the saved form: ``to_json()``; ``from_state`` reads it back."""
        return self.to_json()

    @classmethod
    def from_state(cls, state: Any) -> TemperatureCalibrator:
        """The calibrator ``state()`` gave, checked as strictly as a saved file."""
        return _from_doc(cls, FILE.from_state(state, CalibratorFile, "TemperatureCalibrator"))

    def save(self, path: str | Path) -> Path:
        """Write the calibrator as JSON, atomically (the old file or the new one, never
        a partial one)."""
        return FILE.save(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> TemperatureCalibrator:
        """Read a saved calibrator. The file passes its one strict shape first
        (``CalibratorFile``): a tampered or hostile file is refused with a
        ``DocumentFileError`` (a ``ConfigError``) naming the file and the field."""
        return _from_doc(cls, FILE.load(path, CalibratorFile))

    # -- applying -----------------------------------------------------------------------------
    def _checked(self, prediction: Any, model_id: Any, override: Any) -> tuple[Any, tuple]:
        prediction = check_prediction(prediction)
        model_id = check_text(model_id, "model_id")
        overrides = check_overrides(override)
        spec = prediction.spec
        axis = spec.axis_for(tuple(prediction.logits.shape))
        size = prediction.logits.shape[axis]
        if spec.kind != self.kind:
            raise CalibrationMismatchError(
                "prediction.spec.kind",
                spec.kind,
                f"this calibrator was fitted on {self.kind!r} probabilities; predict with "
                f"ProbabilitySpec(kind={self.kind!r}, ...)",
            )
        if size != self.n_outputs:
            raise CalibrationMismatchError(
                "prediction",
                f"{size} classes (outputs)",
                f"this calibrator was fitted on {self.n_outputs}; predict with the model it "
                "was fitted for",
            )
        used: list[str] = []
        if spec.labels != self.labels:
            if "labels" not in overrides:
                same_set = (
                    spec.labels is not None
                    and self.labels is not None
                    and sorted(map(str, spec.labels)) == sorted(map(str, self.labels))
                )
                problem = "in another order" if same_set else "different"
                raise CalibrationMismatchError(
                    "prediction.spec.labels",
                    spec.labels,
                    f"the labels are {problem} than the calibrator's {self.labels}; predict "
                    "with the calibrator's label order, or pass override='labels' to apply "
                    "it anyway (recorded)",
                )
            used.append("labels")
        if model_id != self.model_id:
            if "model_id" not in overrides:
                raise CalibrationMismatchError(
                    "model_id",
                    model_id,
                    f"this calibrator was fitted on the logits of model {self.model_id!r}; "
                    "fit a calibrator for this model, or pass override='model_id' to apply "
                    "it anyway (recorded)",
                )
            used.append("model_id")
        return prediction, tuple(used)

    def transform(
        self, prediction: Any, *, model_id: str, override: Any = None
    ) -> CalibratedPrediction:
        """Raw and calibrated probabilities of ``prediction`` (``logits / T``).

        Refuses logits from another model (``model_id``) or with another label order
        unless ``override="model_id"`` / ``"labels"`` (or both, as a tuple) is given; an
        override that was needed is recorded in ``.overrides``.
        """
        prediction, used = self._checked(prediction, model_id, override)
        scaled = prediction.logits / self.temperature
        calibrated = prediction_from_logits(
            scaled, prediction.spec, sample_ids=prediction.sample_ids
        )
        assert calibrated.probabilities is not None
        assert prediction.probabilities is not None
        return CalibratedPrediction(
            logits=prediction.logits,
            probabilities=prediction.probabilities,
            calibrated_logits=calibrated.logits,
            calibrated_probabilities=calibrated.probabilities,
            decoded=prediction.decoded,
            spec=prediction.spec,
            sample_ids=prediction.sample_ids,
            temperature=self.temperature,
            model_id=model_id,
            overrides=used,
        )

    def report(
        self,
        prediction: Any,
        y: Any,
        *,
        model_id: str,
        split_id: str,
        override: Any = None,
        bins: int = 15,
    ) -> CalibrationReport:
        """NLL, Brier and ECE (``bins`` equal-width bins) before and after, on a held-out
        split (neither the calibration nor the training split)."""
        split_id = check_text(split_id, "split_id")  # type: ignore[assignment]
        for name, taken in (("split_id", self.split_id), ("train_split_id", self.train_split_id)):
            if split_id == taken:
                raise CalibrationError(
                    "split_id",
                    split_id,
                    f"the calibrator was fitted with {name}={taken!r}; report on a held-out "
                    "split (e.g. the test split)",
                )
        bins = check_bins(bins)
        calibrated = self.transform(prediction, model_id=model_id, override=override)
        return report_calibrated(calibrated, y, split_id, self.split_id, bins)


def _from_doc(cls: type[TemperatureCalibrator], doc: Any) -> TemperatureCalibrator:
    return cls(
        temperature=doc.temperature,
        kind=doc.spec.kind,
        class_axis=doc.spec.class_axis,
        labels=None if doc.spec.labels is None else tuple(doc.spec.labels),
        n_outputs=doc.n_outputs,
        model_id=doc.model_id,
        split_id=doc.splits.calibration,
        train_split_id=doc.splits.train,
        test_split_id=doc.splits.test,
        fit_config=doc.fit.config,
        fit_result=doc.fit.result,
        rows=doc.fit.rows,
        nll_before=doc.fit.nll_before,
        nll_after=doc.fit.nll_after,
        iterations=doc.fit.iterations,
        disjointness=doc.splits.disjointness,
    )


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


def _labels(labels: Any) -> tuple[str | int, ...] | None:
    """Distinct, non-empty string or integer labels as a tuple (None: no labels)."""
    if labels is None:
        return None
    fix = "pass the class labels in the logits' column order, e.g. ('cat', 'dog'), each once"
    if isinstance(labels, str) or not isinstance(labels, tuple | list):
        raise CalibrationError("TemperatureCalibrator.labels", labels, fix)
    for label in labels:
        ok = (isinstance(label, str) and label.strip()) or (
            isinstance(label, int) and not isinstance(label, bool)
        )
        if not ok:
            raise CalibrationError("TemperatureCalibrator.labels", label, fix)
    if len(set(labels)) != len(labels):
        raise CalibrationError("TemperatureCalibrator.labels", list(labels), fix)
    return tuple(labels)


def _plain(value: Any, field: str) -> dict[str, Any] | None:
    """A JSON copy of a str-keyed mapping of finite values, or None for none / empty."""
    if value is None:
        return None
    fix = "pass a mapping of JSON values (finite numbers, strings, lists) with string keys"
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise CalibrationError(field, value, fix)
    try:
        copy = json.loads(json.dumps(dict(value), allow_nan=False))
    except (TypeError, ValueError):
        raise CalibrationError(field, value, fix) from None
    return copy or None


def _check_fit(c: TemperatureCalibrator) -> None:
    if c.rows is not None and (
        isinstance(c.rows, bool) or not isinstance(c.rows, int) or c.rows < 1
    ):
        raise CalibrationError("TemperatureCalibrator.rows", c.rows, "pass a count >= 1, or None")
    for name in ("nll_before", "nll_after"):
        v = getattr(c, name)
        bad = isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < math.inf
        if v is not None and bad:
            raise CalibrationError(
                f"TemperatureCalibrator.{name}", v, "pass a finite NLL >= 0, or None"
            )
    it = c.iterations
    if isinstance(it, bool) or not isinstance(it, int) or it < 0:
        raise CalibrationError("TemperatureCalibrator.iterations", it, "pass a count >= 0")
