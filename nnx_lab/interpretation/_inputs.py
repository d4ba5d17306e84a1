"""The checks of ``interpret``'s arguments (all before any inference), the model it
reads (a run's BEST checkpoint, or a model as it is), and the tap that keeps each loader
batch's targets and inputs while ``iter_predict`` reads the same batches once."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from ..abstention import AbstentionPolicy
from ..calibration import TemperatureCalibrator
from ..engine.checkpoint import NNCheckpoint
from ..engine.enums import Checkpoints
from ..engine.fast_batches import batches
from ..engine.model import NNModel
from ..engine.run_handle import NNRun
from ..errors import ConfigError, DataError
from ..runs import is_run_id

__all__ = ["BatchTap", "check_count", "resolve_model"]


def check_count(value: Any, field: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"interpret.{field}", value, f"pass an integer >= {minimum}")
    return value


def check_tools(calibrator: Any, policy: Any) -> None:
    if calibrator is not None and not isinstance(calibrator, TemperatureCalibrator):
        raise ConfigError(
            "interpret.calibrator",
            calibrator,
            "pass a TemperatureCalibrator (fit_temperature(...).require() or "
            "TemperatureCalibrator.load(path)), or None",
        )
    if policy is not None and not isinstance(policy, AbstentionPolicy):
        raise ConfigError(
            "interpret.policy",
            policy,
            "pass an AbstentionPolicy (select_threshold(...).require() or "
            "AbstentionPolicy.load(path)), or None",
        )


def resolve_model(
    run_or_model: Any, runs_root: Any, module: Any, loss: Any
) -> tuple[NNModel, dict[str, Any]]:
    """A run (an ``NNRun`` or its id): its BEST checkpoint, rebuilt from the checkpoint's
    recipe (``NNModel.from_checkpoint``: the files are read as data, nothing they name is
    imported). An ``NNModel``: as it is."""
    if isinstance(run_or_model, NNModel):
        return run_or_model, {"kind": "model"}
    if isinstance(run_or_model, NNRun) or (
        isinstance(run_or_model, str) and is_run_id(run_or_model)
    ):
        checkpoint = NNCheckpoint.load(run_or_model, Checkpoints.BEST, runs_root)
        model = NNModel.from_checkpoint(checkpoint, module=module, loss=loss)
        source = {
            "kind": "run",
            "run_id": checkpoint.run_id,
            "checkpoint": "best",
            "epoch": checkpoint.epoch,
            "step": checkpoint.step,
        }
        return model, source
    raise ConfigError(
        "interpret.run_or_model",
        run_or_model,
        "pass an NNModel, an NNRun (model.train(...)'s result) or a run id",
    )


class BatchTap:
    """Iterates ``loader`` as ``iter_predict`` does and keeps each ``(x, y)`` batch until
    ``take(n)`` hands its rows out, so the targets and the inputs come from the same
    single pass as the predictions (a shuffling loader stays consistent)."""

    def __init__(self, loader: Any) -> None:
        if isinstance(loader, tuple) and len(loader) == 2:
            X, y = (torch.as_tensor(v) if isinstance(v, np.ndarray) else v for v in loader)
            loader = [(X, y)]
        self._loader = loader
        self._x: deque[Any] = deque()
        self._y: deque[torch.Tensor] = deque()

    def __iter__(self) -> Iterator[Any]:
        self._x.clear()  # a new pass (the model may read a batch to learn its outputs)
        self._y.clear()
        for batch in batches(self._loader):  # the engine's fast path for tensor data
            if not isinstance(batch, tuple | list) or len(batch) < 2:
                raise DataError(
                    "loader",
                    f"a batch is a {type(batch).__name__}, not an (inputs, targets) pair",
                    "interpret needs the targets: pass a loader of (x, y) batches or an "
                    "(X, y) tuple",
                )
            x, y = batch[0], batch[1]
            y = torch.as_tensor(y).detach().cpu()
            self._x.append(x)
            self._y.append(y)
            yield batch

    def take(self, n: int) -> tuple[Any, torch.Tensor]:
        """The next ``n`` rows' inputs (a tensor, or None for other inputs) and targets."""
        xs, ys, have = [], [], 0
        while have < n:
            if not self._y:
                raise DataError(
                    "loader",
                    "the predictions have more rows than the batches' targets",
                    "give every batch as many targets as inputs",
                )
            x, y = self._x.popleft(), self._y.popleft()
            m = int(y.shape[0])
            if have + m > n:  # a batch split into chunks: keep the rest for the next
                cut = n - have
                self._x.appendleft(x[cut:] if isinstance(x, torch.Tensor) else None)
                self._y.appendleft(y[cut:])
                x, y = (x[:cut] if isinstance(x, torch.Tensor) else None), y[:cut]
                m = cut
            xs.append(x)
            ys.append(y)
            have += m
        tensors = all(isinstance(x, torch.Tensor) for x in xs)
        return (torch.cat([x.detach().cpu() for x in xs]) if tensors else None), torch.cat(ys)
