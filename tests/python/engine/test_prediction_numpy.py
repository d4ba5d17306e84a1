"""Issue 29: ``PredictionResult.to_numpy()``, NNx's NumPy form of a prediction (nnx-lab's
fields stay torch tensors: docs/nnx_differences.md)."""

from __future__ import annotations

import engine_factories as f
import numpy as np
import pytest
import torch

from nnx_lab import PredictionValidationError, ProbabilitySpec, prediction_from_logits

SPEC = ProbabilitySpec("categorical", labels=("a", "b", "c"))


def test_to_numpy_gives_arrays_with_probabilities_in_the_logits_dtype():
    model = f.model()
    X = torch.randn(6, 8)
    result = model.predict_proba(X, SPEC)
    assert isinstance(result.probabilities, torch.Tensor)  # ours stay tensors
    out = result.to_numpy()
    for name in ("logits", "probabilities", "decoded", "sample_ids"):
        assert isinstance(getattr(out, name), np.ndarray), name
    assert out.probabilities.dtype == np.float32
    assert np.array_equal(out.logits, model.predict(X).logits.numpy())
    assert np.allclose(out.probabilities.sum(1), 1.0)
    assert np.array_equal(out.decoded, result.decoded.numpy())
    assert out.class_indices.tolist() == result.decoded.tolist()
    assert out.decoded_labels().tolist() == result.decoded_labels().tolist()
    assert (out.kind, out.labels, out.class_axis, len(out)) == ("categorical", SPEC.labels, -1, 6)


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (torch.float16, np.float16),  # NNx's rule: float16 stays float16
        (torch.float64, np.float64),
        (torch.bfloat16, np.float32),  # NumPy has no bfloat16
    ],
)
def test_to_numpy_keeps_the_logits_dtype_where_numpy_has_it(dtype, expected):
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.25, 3.0]]).to(dtype)
    result = prediction_from_logits(logits, SPEC)
    assert result.logits.dtype == dtype  # the logits as given
    assert result.probabilities.dtype in (torch.float32, torch.float64)  # computed in >= fp32
    out = result.to_numpy()
    assert out.probabilities.dtype == expected
    assert out.logits.dtype == expected
    want = torch.softmax(logits.double(), 1).numpy()
    assert np.allclose(out.probabilities.astype(np.float64), want, atol=1e-2)


def test_to_numpy_of_a_bernoulli_result_refuses_class_indices_as_the_result_does():
    result = prediction_from_logits(torch.tensor([[1.0, -1.0]]), ProbabilitySpec("bernoulli"))
    out = result.to_numpy()
    assert out.decoded.tolist() == [[1, 0]]
    with pytest.raises(PredictionValidationError, match="bernoulli"):
        _ = out.class_indices
