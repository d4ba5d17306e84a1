"""The run directory's records: ``metadata.yaml`` kept true to the run while it lives.

While the run trains, a watchdog thread refreshes the heartbeat in ``metadata.yaml``
every ``HEARTBEAT_S`` seconds (nothing on the training loop's path), looks twice a
second for a stop request written into the folder by another process
(``nnx_lab.runs.request_stop``: the runs panel's Stop, a launcher), and checks that the
run directory is still the one this run created: a folder deleted or replaced under a
live run ends it as "failed" with that reason, instead of a run that goes on logging
into a deleted file, and the records of whoever replaced it are never overwritten.

``metadata.yaml`` names a BEST only once its checkpoint is on disk (it is written right
after BEST is committed), so a kill never leaves it naming a BEST that is not there.
The run's end is written once the last checkpoints are (``RunEndRecord``, after the
checkpoint policy on the event stream), before ``RunFinished``: a run whose end cannot
be written ends "failed" with that reason, in memory and in the event stream. A disk
that refuses writes (full, over quota, read-only, I/O errors) fails the run from
whichever writer meets it, and the failure is recorded as far as the disk allows: when
the atomic write finds no room, the record is rewritten over its own blocks
(``write_end_record``). The writer lock is released at the end in every case, so the
run can be trained again.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import yaml

from ...errors import RunDirectoryError
from ...runs import HEARTBEAT_S, read_stop_request
from ..enums import RunStatus
from ..events import (
    CheckpointWritten,
    EpochEnded,
    RunEnding,
    RunFinished,
    RunStarted,
    TrainingControl,
)
from ..run_handle import write_metadata
from ..write_faults import cannot_write, is_write_fault, kill_point

__all__ = ["STOP_POLL_S", "RunEndRecord", "RunRecorder", "write_end_record"]

STOP_POLL_S = 0.5  # how often the watchdog looks for a stop request
_ERROR_CHARS = 400  # of the error, in a record rewritten in place on a full disk
# what the end of a run writes into its record
_END_KEYS = (
    "status",
    "error",
    "stop_reason",
    "finished_at",
    "heartbeat",
    "steps",
    "epochs_completed",
)


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
        self._decided: dict[int, dict[str, Any]] = {}  # improved epochs whose BEST is pending
        self._ended: dict[str, Any] | None = None  # the end as record_end wrote it
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
        """Write ``metadata.yaml`` now; a disk that refuses raises ``RunDirectoryError``."""
        with self._write_lock:
            if self.still_ours():
                try:
                    write_metadata(self.run)
                except OSError as exc:
                    if is_write_fault(exc) and self.still_ours():
                        raise cannot_write("metadata.yaml", _record(self.run), exc) from exc
                    raise

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
            failure: BaseException | None = None
            try:
                self._write()
            except RunDirectoryError as exc:  # the disk refuses: the run cannot go on
                failure = exc
            except OSError:
                self.still_ours()  # a write into a vanished folder: say which
            if self.gone is not None:
                failure = RunDirectoryError(f"{self.gone}; the run ends as failed")
            if failure is not None:
                if self._control is not None:
                    self._control.fail(failure)
                return

    def on_epoch_ended(self, event: EpochEnded) -> None:
        """Progress for listings, written with the next heartbeat (no write here); an
        improvement waits until its BEST is on disk (``on_checkpoint_written``)."""
        with self._write_lock:  # the watchdog may be writing this very dict
            self.run.metadata.update(epochs_completed=event.epoch, steps=event.step)
        if event.improved:
            # a declared monitor says its direction; the §2.11 signal (an error or a
            # loss) is lower-is-better
            mode = (event.selection or {}).get("mode") if event.selection else "min"
            self._decided[event.epoch] = {
                "value": event.signal,
                "source": event.signal_source,
                "epoch": event.epoch,
                "mode": mode if mode in ("min", "max") else None,
            }

    def on_checkpoint_written(self, event: CheckpointWritten) -> None:
        """BEST is on disk: ``metadata.yaml`` names it now, never before."""
        if event.type != "best":
            return
        decided = self._decided.get(event.epoch)
        for epoch in [e for e in self._decided if e <= event.epoch]:
            del self._decided[epoch]
        if decided is not None:
            with self._write_lock:
                self.run.metadata["best"] = decided
            kill_point("metadata.best")
            self._write()

    def _stop_watch(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    # -- the end ---------------------------------------------------------------------------
    def record_end(self, event: RunEnding, error: str | None) -> None:
        """Write the run's end once its last checkpoints are written (``RunEndRecord``).

        A run that would end "finished" or "stopped" but cannot write this record raises
        (it ends "failed", and ``on_run_finished`` writes that as far as it can); a
        failed run's record is written as far as the disk allows.
        """
        self._stop_watch()
        stop_reason = None if self._control is None else self._control.stop_reason
        self._fill_end(event.status, error, stop_reason, event.step, event.epoch, time.time())
        if event.status == RunStatus.FAILED.value:
            self._write_end()
        else:
            self._write()
        self._ended = {k: self.run.metadata.get(k) for k in _END_KEYS}

    def on_run_finished(self, event: RunFinished) -> None:
        """The run's own record holds its end (``NNRun`` hears the event first); written
        again only when the end changed since ``record_end`` (a writer failed there)."""
        self._stop_watch()
        run = self.run
        run.status = RunStatus(event.status)
        run.error = event.error
        ended = self._ended
        if ended is not None and (ended["status"], ended["error"]) == (event.status, event.error):
            run.metadata.update(ended)  # as written: the record and the run say the same
            return
        self._fill_end(
            event.status,
            event.error,
            event.stop_reason,
            event.steps,
            event.epochs_completed,
            event.time,
        )
        self._write_end()

    def _fill_end(
        self,
        status: str,
        error: str | None,
        stop_reason: str | None,
        steps: int,
        epochs: int,
        at: float,
    ) -> None:
        self.run.metadata.update(
            status=status,
            error=error,
            stop_reason=stop_reason,
            finished_at=at,
            heartbeat=time.time(),
            steps=steps,
            epochs_completed=epochs,
        )

    def _write_end(self) -> None:
        with self._write_lock:
            if self.still_ours():
                write_end_record(self.run)

    def on_detach(self) -> None:
        self._stop_watch()
        if self.lock is not None:
            self.lock.release()


class RunEndRecord:
    """The sink that writes the run's end: added after the checkpoint policy, so the
    record says "finished" or "stopped" only once the last checkpoints are written."""

    def __init__(self, recorder: RunRecorder, loop: Any) -> None:
        self.recorder, self.loop = recorder, loop

    def on_run_ending(self, event: RunEnding) -> None:
        outcome = getattr(self.loop, "outcome", None)
        self.recorder.record_end(event, None if outcome is None else outcome.error)


def write_end_record(run: Any) -> bool:
    """Write a run's final ``metadata.yaml`` as far as the disk allows; False if it could
    not be written at all (the record then still says "running", its writer lock is
    free, and a rerun replaces it as an interrupted run)."""
    try:
        write_metadata(run)
        return True
    except OSError as exc:
        if not is_write_fault(exc):
            raise
        first = exc
    try:
        _rewrite_in_place(_record(run), _compact(run.metadata))
        return True
    except OSError:
        warnings.warn(
            f"run {run.id}: its end ({run.metadata.get('status')}) could not be written to "
            f"{_record(run)} ({first}); the record still says running. Free space and "
            "train again: a rerun replaces it",
            RuntimeWarning,
            stacklevel=2,
        )
        return False


def _record(run: Any) -> Path:
    return Path(run.run_dir) / "metadata.yaml"


def _compact(metadata: dict[str, Any]) -> bytes:
    record = dict(metadata)
    error = record.get("error")
    if isinstance(error, str) and len(error) > _ERROR_CHARS:
        record["error"] = error[: _ERROR_CHARS - 3] + "..."
    return yaml.safe_dump(record, sort_keys=False).encode()


def _rewrite_in_place(path: Path, data: bytes) -> None:
    """Overwrite ``path`` over the blocks it already holds: a full disk has no room for
    the temporary copy an atomic write needs, but takes this when it fits there. Never
    written when it does not fit, so the old record is kept whole rather than torn."""
    fd = os.open(path, os.O_WRONLY)
    try:
        st = os.fstat(fd)
        held = max(st.st_blocks * 512, st.st_size)
        if len(data) > held:
            raise OSError(28, "the record does not fit in the blocks it holds", str(path))
        view = memoryview(data)
        done = 0
        while done < len(view):
            done += os.pwrite(fd, view[done:], done)
        os.ftruncate(fd, len(data))
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


def _inode(path: Any) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
