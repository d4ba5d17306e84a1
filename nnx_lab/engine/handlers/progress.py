"""The tqdm progress bar over optimizer steps (§2.7)."""

from __future__ import annotations

import os
from typing import Any

from ..events import RunFinished, RunStarted, StepEnded, StepMetrics

__all__ = ["ProgressBar", "tqdm_disabled"]


def tqdm_disabled() -> bool:
    """§2.7: NNX_TQDM_DISABLE=1/true/yes (any case) silences the bar."""
    return os.environ.get("NNX_TQDM_DISABLE", "").strip().lower() in ("1", "true", "yes")


class ProgressBar:
    """A ``tqdm.auto`` bar (renders in notebooks and terminals)."""

    def __init__(self) -> None:
        self._bar: Any = None

    def on_run_started(self, event: RunStarted) -> None:
        from tqdm.auto import tqdm  # tqdm.auto probes for IPython: only when a bar is drawn

        total = None if event.steps_per_epoch is None else event.steps_per_epoch * event.n_epochs
        name = event.run_id[:8] if event.run_id else "training"
        self._bar = tqdm(total=total, desc=f"run {name}", unit="step", leave=True)

    def on_step_ended(self, event: StepEnded) -> None:
        self._bar.update(1)

    def on_step_metrics(self, event: StepMetrics) -> None:
        last = event.records[-1]
        loss = "-" if last.loss is None else f"{last.loss:.4g}"
        self._bar.set_postfix(epoch=last.epoch, loss=loss, refresh=False)

    def on_run_finished(self, event: RunFinished) -> None:
        bar = self._bar
        if bar is not None and event.status == "finished" and bar.total and bar.n < bar.total:
            # Ended early and complete (early stopping): a success. tqdm paints a bar
            # closed short of its total red (it reads that as an error), so the total
            # becomes the steps run, and the postfix says why it ended there.
            bar.total = bar.n
            notebook_bar = getattr(bar, "container", None)  # tqdm.notebook's widgets
            if notebook_bar is not None:
                notebook_bar.children[1].max = bar.n
            bar.set_postfix_str(event.stop_reason or "finished early", refresh=False)
        self.on_detach()

    def on_detach(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
