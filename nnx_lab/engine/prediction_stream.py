"""``PredictionStream``: what ``model.iter_predict`` returns (§2.21).

One batch result at a time, in the loader's order, each computed under the same
inference context as ``predict()`` (eval mode, no grad, the precision policy:
``prediction.batch_logits``) and with every module's own mode restored before the batch
is handed over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from ..errors import StreamClosedError
from .data import iter_inputs
from .probabilities import PredictionBatch, PredictionResult, prediction_from_logits
from .tasks import Task

__all__ = ["PredictionStream", "plain_batch", "rich_batch"]


class PredictionStream:
    """``with model.iter_predict(loader) as stream: for batch in stream: ...``

    One pass: a ``PredictionBatch`` (``rich=False``) or a ``PredictionResult``
    (``rich=True``) per loader batch. Closing the stream (leaving the ``with`` block)
    drops its references to the model, the loader and the loader's iterator; the loader
    itself stays yours.
    """

    def __init__(
        self,
        logits_of: Callable[[torch.Tensor], torch.Tensor],
        X: Any,
        make: Callable[[torch.Tensor, np.ndarray], Any],
    ) -> None:
        """``logits_of(xb)``: one feature batch's float32 logits on the host, computed
        under the inference context; ``make(logits, sample_ids)``: the batch's result."""
        self._logits_of: Callable[[torch.Tensor], torch.Tensor] | None = logits_of
        self._X: Any = X
        self._make: Callable[[torch.Tensor, np.ndarray], Any] | None = make
        self._state = "new"
        self._batches: Iterator[Any] | None = None

    @property
    def closed(self) -> bool:
        return self._state == "closed"

    def __enter__(self) -> PredictionStream:
        if self._state != "new":
            raise StreamClosedError(
                "this prediction stream was already opened; call model.iter_predict(...) "
                "again for another pass"
            )
        self._state = "open"
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._batches is not None:
            self._batches.close()  # type: ignore[attr-defined]
        self._batches = None
        self._logits_of = self._X = self._make = None
        self._state = "closed"

    def __iter__(self) -> Iterator[Any]:
        if self._state != "open":
            raise StreamClosedError(
                "a prediction stream is read inside its with block: "
                "`with model.iter_predict(loader) as stream: for batch in stream: ...`"
                + (" (this one is closed)" if self._state == "closed" else "")
            )
        if self._batches is not None:
            raise StreamClosedError(
                "a prediction stream is one pass; call model.iter_predict(...) again"
            )
        self._batches = self._generate()
        return self._batches

    def _generate(self) -> Iterator[Any]:
        logits_of, make = self._logits_of, self._make
        assert logits_of is not None
        assert make is not None
        offset = 0
        for xb in iter_inputs(self._X):
            logits = logits_of(xb)
            n = int(logits.shape[0])
            ids = np.arange(offset, offset + n, dtype=np.int64)
            offset += n
            yield make(logits, ids)


def plain_batch(task: Task) -> Callable[[torch.Tensor, np.ndarray], PredictionBatch]:
    return lambda logits, ids: PredictionBatch(logits, task.decode(logits), ids)


def rich_batch(spec: Any, task: Task) -> Callable[[torch.Tensor, np.ndarray], PredictionResult]:
    if spec is None:  # a regression task: continuous values, no probabilities
        return lambda logits, ids: PredictionResult(logits, None, task.decode(logits), None, ids)
    return lambda logits, ids: prediction_from_logits(logits, spec, sample_ids=ids)
