"""``PredictionResult.to_numpy()``: NNx's form of a prediction, NumPy arrays.

nnx-lab's ``PredictionResult`` keeps torch tensors (they stay on the device and feed
calibration, abstention and metrics without copies; docs/nnx_differences.md). A script
written for NNx, which reads NumPy arrays, calls ``to_numpy()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

__all__ = ["NumpyPrediction", "to_numpy"]


@dataclass(frozen=True)
class NumpyPrediction:
    """NNx's ``PredictionResult`` fields as NumPy arrays, in NNx's order: ``logits``,
    ``probabilities`` (None for a regression result), ``decoded``, ``sample_ids``,
    ``spec``; ``kind``, ``labels``, ``class_axis``, ``class_indices`` and
    ``decoded_labels()`` as NNx names them."""

    logits: np.ndarray
    probabilities: np.ndarray | None
    decoded: np.ndarray
    sample_ids: np.ndarray
    spec: Any
    _source: Any = field(repr=False, compare=False)

    def __len__(self) -> int:
        return int(self.logits.shape[0])

    @property
    def kind(self) -> str | None:
        return None if self.spec is None else self.spec.kind

    @property
    def labels(self) -> tuple[Any, ...] | None:
        return None if self.spec is None else self.spec.labels

    @property
    def class_axis(self) -> int | None:
        return None if self.spec is None else self.spec.class_axis

    @property
    def class_indices(self) -> np.ndarray:
        _ = self._source.class_indices  # the same refusal for a non-categorical result
        return self.decoded

    def decoded_labels(self) -> np.ndarray:
        return self._source.decoded_labels()


def _array(t: torch.Tensor, dtype: torch.dtype | None = None) -> np.ndarray:
    t = t.detach()
    if dtype is not None:
        t = t.to(dtype)
    if t.dtype is torch.bfloat16:  # NumPy has no bfloat16
        t = t.float()
    return t.cpu().numpy()


def to_numpy(result: Any) -> NumpyPrediction:
    """``result`` with every tensor copied to a NumPy array; probabilities in the logits'
    dtype (float16 logits give float16 probabilities, as in NNx; bfloat16 logits, which
    NumPy cannot hold, give float32 logits and probabilities)."""
    probabilities = result.probabilities
    return NumpyPrediction(
        logits=_array(result.logits),
        probabilities=None if probabilities is None else _array(probabilities, result.logits.dtype),
        decoded=_array(result.decoded),
        sample_ids=np.asarray(result.sample_ids),
        spec=result.spec,
        _source=result,
    )
