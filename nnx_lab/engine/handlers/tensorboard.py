"""TensorBoard as a sink of the event stream (§2.8, docs/logging.md).

``TensorBoardCallback(log_dir)`` writes through ``torch.utils.tensorboard`` into
``log_dir/<run id>``: every step record's scalars (``step/...``, at the global step),
every epoch's training summary, validation metrics (declared metrics included) and
learning rate (``epoch/...``, at the epoch), and at the end the run's hyperparameters
with its final epoch metrics in the HParams view. The hparams summary goes into the
run's own writer, so TensorBoard shows one run (``SummaryWriter.add_hparams`` would
write a second, timestamped one). With ``histograms_every=N`` the network's weights and
their gradients (those of the epoch's last step) are written every N epochs.

tensorboard is an optional extra (``pip install "nnx-lab[tensorboard]"``); it is
imported when a callback is made, never by the engine otherwise.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from ...runs import EpochEnded, RunFinished, RunStarted, StepMetrics
from ..sinks import Callback
from .scalars import epoch_scalars, flat_scalars, step_scalars

__all__ = ["TensorBoardCallback", "flat_scalars"]

_INSTALL = 'install the extra: pip install "nnx-lab[tensorboard]"'


def _writer_class() -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:  # tensorboard missing: torch's module raises on import
        raise ImportError(f"TensorBoardCallback needs tensorboard ({exc}); {_INSTALL}") from None
    return SummaryWriter


def _hparam(value: Any) -> Any:
    """What the HParams view can hold: a number, a bool, or text."""
    if isinstance(value, bool | int | float | str):
        return value
    return "none" if value is None else str(value)


class TensorBoardCallback(Callback):
    """Write a run's scalars, hyperparameters and (optionally) histograms for
    TensorBoard: ``model.train(params, callbacks=[TensorBoardCallback("tb_logs")])``,
    then ``tensorboard --logdir tb_logs``."""

    def __init__(self, log_dir: str | Path = "tb_logs", histograms_every: int | None = None):
        if not isinstance(log_dir, str | Path) or not str(log_dir).strip():
            raise ConfigError("log_dir", log_dir, "pass the folder to write into, e.g. 'tb_logs'")
        every = histograms_every
        if every is not None and (
            isinstance(every, bool) or not isinstance(every, int) or every < 1
        ):
            raise ConfigError(
                "histograms_every", every, "pass None (no histograms) or a number of epochs >= 1"
            )
        self._writer_cls = _writer_class()  # refused now, not when the run starts
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._summary, self._value = Summary, Summary.Value
        self.log_dir = Path(log_dir)
        self.histograms_every = every
        self.writer: Any = None
        self.run_dir: Path | None = None
        self._hparams: dict[str, Any] = {}
        self._final: dict[str, float] = {}

    # -- the stream ----------------------------------------------------------------------------
    def on_run_started(self, event: RunStarted) -> None:
        if self.writer is not None:
            return  # a replayed log that holds a second start (nnx_lab.export)
        self.run_dir = self.log_dir / (event.run_id or "run")
        # a deep queue: with the default 10 events, the loop's thread waits on the
        # writer's thread at every StepMetrics batch
        self.writer = self._writer_cls(log_dir=str(self.run_dir), max_queue=4096)
        config = {k: v for k, v in event.config.items() if k in ("net", "model", "train")}
        self._hparams = {k: _hparam(v) for k, v in _flat(config, "").items()}
        if event.parent_run_id is not None:
            self._hparams["parent_run_id"] = event.parent_run_id
        self._final = {}

    def _scalars(self, values: dict[str, float], step: int) -> None:
        """One event holding every value of a step: ``add_scalar`` would write one event
        (and build one protobuf message through its checks) per value."""
        summary = self._summary(
            value=[self._value(tag=t, simple_value=v) for t, v in values.items()]
        )
        self.writer.file_writer.add_summary(summary, step)

    def on_step_metrics(self, event: StepMetrics) -> None:
        if self.writer is None:
            return
        for record in event.records:
            self._scalars(step_scalars(record), record.step)

    def on_epoch_ended(self, event: EpochEnded) -> None:
        if self.writer is None:
            return
        values = epoch_scalars(event)
        self._scalars(values, event.epoch)
        self._final = {t: v for t, v in values.items() if math.isfinite(v)}

    def on_epoch_end(self, ctx: Any) -> None:  # NNx's hook: it carries the model
        every = self.histograms_every
        if self.writer is None or every is None or ctx.epoch % every:
            return
        for name, p in ctx.model.net.named_parameters():
            self.writer.add_histogram(f"weights/{name}", p.detach().float().cpu(), ctx.epoch)
            if p.grad is not None:
                self.writer.add_histogram(f"grads/{name}", p.grad.detach().float().cpu(), ctx.epoch)

    def on_run_finished(self, event: RunFinished) -> None:
        self.write_hparams(event.status)

    def write_hparams(self, status: str) -> None:
        """The HParams view's entry of this run: its configuration, ``status`` and the
        final epoch's metrics."""
        if self.writer is None:
            return
        from torch.utils.tensorboard.summary import hparams

        hp = {**self._hparams, "status": status}
        # the metric values are the epoch scalars already in this run, under these tags
        experiment, start, end = hparams(hp, dict(self._final))
        for summary in (experiment, start, end):
            self.writer.file_writer.add_summary(summary)
        self.writer.flush()

    def on_detach(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    """A nested config as ``{"train.optim.max_lr": 0.01}``; lists stay whole."""
    out: dict[str, Any] = {}
    stack = [(prefix, value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, dict) and node:
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in node.items())
        else:
            out[where] = node
    return out
