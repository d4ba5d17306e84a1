"""The run directory's records: ``metadata.yaml`` kept true to the run's status."""

from __future__ import annotations

import time
from typing import Any

from ..enums import RunStatus
from ..events import RunFinished
from ..runs import write_metadata

__all__ = ["RunRecorder"]


class RunRecorder:
    """Writes the run's end (status, error, stop reason, counters) into
    ``metadata.yaml`` and onto the ``NNRun`` the caller holds."""

    def __init__(self, run: Any) -> None:
        self.run = run

    def on_run_finished(self, event: RunFinished) -> None:
        run = self.run
        run.status = RunStatus(event.status)
        run.error = event.error
        run.metadata.update(
            status=event.status,
            error=event.error,
            stop_reason=event.stop_reason,
            finished_at=time.time(),
            steps=event.steps,
            epochs_completed=event.epochs_completed,
        )
        write_metadata(run)
