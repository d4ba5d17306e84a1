"""``CalibratedPrediction``: raw and calibrated probabilities of the same rows, what a
calibrator's ``transform`` returns and the reports and the abstention policy read."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..engine.probabilities import PredictionResult, ProbabilitySpec

__all__ = ["CalibratedPrediction"]


@dataclass(frozen=True)
class CalibratedPrediction:
    """Raw and calibrated probabilities of the same rows, in the same label order.

    ``decoded`` is the raw prediction's: a positive temperature never changes the
    argmax (or the sign of a logit). ``overrides`` lists the checks that were overridden
    to produce it.
    """

    logits: torch.Tensor
    probabilities: torch.Tensor
    calibrated_logits: torch.Tensor
    calibrated_probabilities: torch.Tensor
    decoded: torch.Tensor
    spec: ProbabilitySpec
    sample_ids: np.ndarray
    temperature: float
    model_id: str
    overrides: tuple[str, ...] = ()

    def __len__(self) -> int:
        return int(self.logits.shape[0])

    @property
    def raw(self) -> PredictionResult:
        return PredictionResult(
            self.logits, self.probabilities, self.decoded, self.spec, self.sample_ids
        )

    @property
    def calibrated(self) -> PredictionResult:
        return PredictionResult(
            self.calibrated_logits,
            self.calibrated_probabilities,
            self.decoded,
            self.spec,
            self.sample_ids,
        )

    @property
    def class_indices(self) -> torch.Tensor:
        return self.raw.class_indices

    def decoded_labels(self) -> np.ndarray:
        return self.raw.decoded_labels()
