"""The run directory's records: ``metadata.yaml`` kept true to the run while it lives.

While the run trains, a watchdog thread refreshes the heartbeat in ``metadata.yaml``
every ``HEARTBEAT_S`` seconds (nothing on the training loop's path), looks twice a
second for a stop request written into the folder by another process
(``nnx_lab.runs.request_stop``: the runs panel's Stop, a launcher), and checks that the
run directory is still the one this run created: a folder deleted or replaced under a
live run ends it as "failed" with that reason, instead of a run that goes on logging
into a deleted file, and the records of whoever replaced it are never overwritten. At
the end the run's status, error and counters are written, and the writer lock released.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from ...errors import RunDirectoryError
from ...runs import HEARTBEAT_S, read_stop_request
from ..enums import RunStatus
from ..events import EpochEnded, RunFinished, RunStarted, TrainingControl
from ..run_handle import write_metadata

__all__ = ["STOP_POLL_S", "RunRecorder"]

STOP_POLL_S = 0.5  # how often the watchdog looks for a stop request


class RunRecorder:
    def __init__(self, run: Any, lock: Any = None, heartbeat_s: float | None = None) -> None:
        """``run`` is the NNRun; ``lock`` its RunLock, released when the run ends;
        ``heartbeat_s`` defaults to ``NNX_HEARTBEAT_S`` or 10 seconds."""
        if heartbeat_s is None:
            heartbeat_s = float(os.environ.get("NNX_HEARTBEAT_S") or HEARTBEAT_S)
        self.run, self.lock, self.heartbeat_s = run, lock, heartbeat_s
        self._inode = _inode(run.run_dir)
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._control: TrainingControl | None = None
        self.gone: str | None = None  # why the run directory is no longer this run's

    # -- identity --------------------------------------------------------------------------
    def gone_reason(self) -> str | None:
        """Why the run directory is no longer the folder this run created, or None."""
        if self.gone is None and _inode(self.run.run_dir) != self._inode:
            exists = os.path.isdir(self.run.run_dir)
            self.gone = (
                f"the run directory {self.run.run_dir} was "
                f"{'replaced by another' if exists else 'deleted'} while the run was training"
            )
        return self.gone

    def still_ours(self) -> bool:
        return self.gone_reason() is None

    def _write(self) -> None:
        with self._write_lock:
            if self.still_ours():
                write_metadata(self.run)

    # -- the watchdog --------------------------------------------------------------------
    def on_attach(self, control: TrainingControl) -> None:
        self._control = control

    def on_run_started(self, event: RunStarted) -> None:
        self.run.metadata["planned_epochs"] = event.start_epoch + event.n_epochs - 1
        self._thread = threading.Thread(
            target=self._watch, name=f"nnx-run-{self.run.id[:8]}", daemon=True
        )
        self._thread.start()

    def _watch(self) -> None:
        next_beat = time.monotonic() + self.heartbeat_s
        asked = False
        while not self._stop.wait(min(STOP_POLL_S, self.heartbeat_s)):
            if not asked and self._control is not None:
                request = read_stop_request(self.run.run_dir)
                if request is not None:
                    asked = True
                    by = f" by {request['by']}" if request.get("by") else ""
                    self._control.request_stop(f"{request.get('reason', 'stop requested')}{by}")
            if time.monotonic() < next_beat:
                continue
            next_beat = time.monotonic() + self.heartbeat_s
            self.run.metadata["heartbeat"] = time.time()
            try:
                self._write()
            except OSError:
                self.still_ours()  # a write into a vanished folder: say which
            if self.gone is not None:
                if self._control is not None:
                    self._control.fail(RunDirectoryError(f"{self.gone}; the run ends as failed"))
                return

    def on_epoch_ended(self, event: EpochEnded) -> None:
        """Progress for listings, written with the next heartbeat (no write here)."""
        meta = self.run.metadata
        meta.update(epochs_completed=event.epoch, steps=event.step)
        if event.improved:
            meta["best"] = {
                "value": event.signal,
                "source": event.signal_source,
                "epoch": event.epoch,
            }

    def _stop_watch(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    # -- the end ---------------------------------------------------------------------------
    def on_run_finished(self, event: RunFinished) -> None:
        """Write the end the run's own record holds (``NNRun`` hears the event first)."""
        self._stop_watch()
        run = self.run
        run.status = RunStatus(event.status)
        run.error = event.error
        run.metadata.update(
            status=event.status,
            error=event.error,
            stop_reason=event.stop_reason,
            finished_at=event.time,
            heartbeat=time.time(),
            steps=event.steps,
            epochs_completed=event.epochs_completed,
        )
        self._write()

    def on_detach(self) -> None:
        self._stop_watch()
        if self.lock is not None:
            self.lock.release()


def _inode(path: Any) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
