"""Issue 29: the calibration and abstention tools called as NNx calls them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nnx_lab import ProbabilitySpec, prediction_from_logits
from nnx_lab.calibration import (
    CalibrationError,
    CalibrationMismatchError,
    fit_temperature,
)


def _logits_and_targets(n: int = 300, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    logits = torch.randn(n, 3, generator=g) + 3.0 * torch.nn.functional.one_hot(y, 3)
    flip = torch.rand(n, generator=g) < 0.2  # some confident mistakes: a finite T
    y = torch.where(flip, torch.randint(0, 3, (n,), generator=g), y)
    return logits * 2.0, y


def test_fit_temperature_takes_bare_logits_with_labels():
    logits, y = _logits_and_targets()
    ids = {"model_id": "m", "split_id": "cal", "test_split_id": "test"}
    bare = fit_temperature(logits, y, labels=["a", "b", "c"], **ids)
    spec = ProbabilitySpec(kind="categorical", labels=("a", "b", "c"))
    labelled = fit_temperature(prediction_from_logits(logits, spec), y, **ids)
    assert bare.temperature == pytest.approx(labelled.temperature)
    assert bare.require().labels == ("a", "b", "c")
    as_array = fit_temperature(logits.numpy(), y.numpy(), labels=("a", "b", "c"), **ids)
    assert as_array.temperature == pytest.approx(bare.temperature)
    unnamed = prediction_from_logits(logits, ProbabilitySpec(kind="categorical"))
    assert fit_temperature(unnamed, y, labels=["a", "b", "c"], **ids).require().labels == (
        "a",
        "b",
        "c",
    )
    assert fit_temperature(logits, y, labels=["a", "b", "c"], max_iterations=50, **ids).ok


def test_fit_temperature_refuses_bare_logits_without_fitting_labels():
    logits, y = _logits_and_targets()
    ids = {"model_id": "m", "split_id": "cal"}
    with pytest.raises(CalibrationError, match=r"pass labels=\[\.\.\.\]"):
        fit_temperature(logits, y, **ids)
    with pytest.raises(ValueError, match="2 labels for 3 classes"):
        fit_temperature(logits, y, labels=["a", "b"], **ids)
    spec = ProbabilitySpec(kind="categorical", labels=("a", "b", "c"))
    with pytest.raises(CalibrationMismatchError):
        fit_temperature(prediction_from_logits(logits, spec), y, labels=["c", "b", "a"], **ids)
    assert np.isfinite(logits.numpy()).all()
