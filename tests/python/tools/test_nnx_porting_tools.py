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


# -- model_fingerprint ------------------------------------------------------------------------
def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def test_model_fingerprint_sees_through_wrappers_and_hashes_whole_modules():
    from nnx_lab.calibration import model_fingerprint

    net = _net()
    bare = model_fingerprint(net)
    assert model_fingerprint(torch.nn.DataParallel(net)) == bare
    assert model_fingerprint(torch.compile(net)) == bare  # compiled lazily: no compile here

    class Holder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = net
            self.head = torch.nn.Linear(2, 2)

    assert model_fingerprint(Holder()) != bare  # a module is hashed whole, head included

    class Plain:  # not a module: its .net is the model (an NNModel's shape)
        pass

    holder = Plain()
    holder.net = net
    assert model_fingerprint(holder) == bare
    with pytest.raises(TypeError):
        model_fingerprint(object())


def test_model_fingerprint_materializes_views_and_hashes_extra_state():
    from nnx_lab.calibration import ModelFingerprintError, model_fingerprint

    class WithBuffer(torch.nn.Module):
        def __init__(self, buf, extra=None):
            super().__init__()
            self.register_buffer("z", buf)
            self.extra = extra

        def get_extra_state(self):
            return self.extra

        def set_extra_state(self, state):
            self.extra = state

    z = torch.tensor([1 + 2j, 3 - 1j])
    assert model_fingerprint(WithBuffer(z.conj(), {"a": 1})) == model_fingerprint(
        WithBuffer(z.conj().resolve_conj(), {"a": 1})
    )
    assert model_fingerprint(WithBuffer(z, {"a": 1})) != model_fingerprint(WithBuffer(z, {"a": 2}))
    for bad in (object(), {1: "int key"}, float("nan")):
        with pytest.raises(ModelFingerprintError, match="pass a declared model_id"):
            model_fingerprint(WithBuffer(z, bad))
    with pytest.raises(TypeError, match="sparse"):
        model_fingerprint(WithBuffer(torch.eye(2).to_sparse(), {}))


def test_model_fingerprint_separates_quantization_scales():
    from nnx_lab.calibration import model_fingerprint

    class Q(torch.nn.Module):
        def __init__(self, scale):
            super().__init__()
            x = torch.tensor([0.0, 0.5, 1.0])
            self.register_buffer("q", torch.quantize_per_tensor(x, scale, 0, torch.qint8))

    a, b = Q(0.1), Q(0.2)
    b.q = torch._make_per_tensor_quantized_tensor(a.q.int_repr(), 0.2, 0)  # same integers
    assert torch.equal(a.q.int_repr(), b.q.int_repr())
    assert model_fingerprint(a) != model_fingerprint(b)
