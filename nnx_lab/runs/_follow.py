"""LogFollower: a run's ``metrics.jsonl`` replayed as the loop's events, and followed
while another process still writes it. Torch-free: no engine, no widget.

Each line of the log parses back into the event the loop emitted (``event_from_json``),
and goes to the sinks' hooks as the loop would deliver it (``on_run_started``,
``on_step_metrics``, ...), so a sink cannot tell a replayed run from a live one. The
monitor's ``from_run`` / ``follow_run`` and the distributed launcher (``LaunchHandle``,
which follows rank 0's log) read runs through here.

Besides the event hooks a sink may define three of its own, all optional:

* ``on_log_restarted()``: the log was replaced (a run of the same id written again);
  the events that follow start from its first line again.
* ``on_log_read(events)``: after each read of the log, with how many events it gave
  (0 when nothing was added): a cue to refresh what depends on time (elapsed, ETA).
* ``on_follow_ended(reason, detail)``: following is over; ``reason`` is one of
  ``FOLLOW_ENDINGS``, ``detail`` says why in words ("" when there is nothing to add).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ._events import HOOKS, Event, RunFinished, event_from_json, quick_event
from ._ids import is_run_id, run_dir
from ._jsonl import JsonlReader, LogDamagedError, parse_line
from ._records import INTERRUPTED, RunRecordError, effective_status, read_record

__all__ = ["FOLLOW_ENDINGS", "FOLLOW_HOOKS", "LogFollower"]

log = logging.getLogger("nnx_lab.runs")

FOLLOW_HOOKS = ("on_log_restarted", "on_log_read", "on_follow_ended")
# Why following ended: the log's run_finished line was read; close() was called; the
# source said its writer is done (finish()) with no run_finished line in the log; the
# run is recorded as running but its writer is gone; the run's folder was deleted;
# reading the log (or a sink) raised.
FOLLOW_ENDINGS = ("finished", "closed", "ended", INTERRUPTED, "deleted", "error")
LIVENESS_S = 1.0  # how often a quiet log's writer is checked for life


def _positive(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name}={value!r}: pass a positive number of seconds")
    return float(value)


def run_dir_of(folder: Path) -> Path:
    """``folder`` (named as a run), confined to its parent as ``run_dir`` confines it."""
    return run_dir(folder.parent, folder.name, "run_dir")


def _describe(exc: BaseException) -> str:
    """``TypeName: message`` and the traceback, as a widget shows an error."""
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return f"{type(exc).__name__}: {exc}\n\n{tb}".rstrip()


class LogFollower:
    """Replays ``<run_dir>/metrics.jsonl`` to ``sinks`` and follows it while it grows.

    ``read()`` delivers what the log holds now (and, called again, what was added
    since); a line still being written is held back until it is complete, a damaged
    line is skipped with a warning. ``start()`` reads in a thread every
    ``poll_interval`` seconds until the run finishes (its ``run_finished`` line), its
    writer is gone, its folder is deleted, or ``close()``. A log that does not exist yet
    reads as empty: the follower waits for it. The log is read as a stream (a chunk of
    it held at a time, its events delivered before the next is read), so a log of any
    size costs the same memory. Every sink is checked here, before anything is read:
    one with no hook would never be called; a run folder that is a link out of its runs
    root is refused (``ValueError``), as every reader of runs refuses it.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        sinks: Iterable[Any],
        *,
        poll_interval: float = 0.25,
        name: str | None = None,
    ) -> None:
        self.poll_interval = _positive(poll_interval, "poll_interval")
        folder = Path(run_dir)
        if is_run_id(folder.name):  # a run folder is read only under its own runs root
            folder = run_dir_of(folder)
        self.run_dir = folder
        self.sinks = list(sinks)
        for sink in self.sinks:
            if not any(callable(getattr(sink, h, None)) for h in (*HOOKS, *FOLLOW_HOOKS)):
                raise TypeError(
                    f"LogFollower: {sink!r} implements no hook, so it would never be called; "
                    f"define one of {', '.join(HOOKS)} (the events of the log)"
                )
        self._hooks: dict[str, list[Callable[..., Any]]] = {
            hook: [fn for fn in (getattr(s, hook, None) for s in self.sinks) if callable(fn)]
            for hook in (*HOOKS, *FOLLOW_HOOKS)
        }
        self._reader = JsonlReader(
            self.run_dir / "metrics.jsonl", strict=False, decode=self._decode
        )
        self._name = name or f"nnx-follow-{self.run_dir.name[:12]}"
        self._read_lock = threading.RLock()
        self._stop = threading.Event()
        self._over = threading.Event()
        self._thread: threading.Thread | None = None
        self._finishing = False
        self.finished = False  # the log's run_finished line has been read
        self.ended: str | None = None  # one of FOLLOW_ENDINGS once following is over
        self.events_read = 0
        self.skipped = 0  # lines that are no event of this version (a warning each)

    @property
    def path(self) -> Path:
        return self._reader.path

    @property
    def thread(self) -> threading.Thread | None:
        """The thread that polls the log (None before ``start()``)."""
        return self._thread

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ------------------------------------------------------------------ reading

    def read(self) -> int:
        """Deliver the events added to the log since the last read; returns how many."""
        with self._read_lock:
            chunks = self._reader.iter_chunks()
            if self._reader.restarted:
                self.finished = False
                self._call("on_log_restarted")
            count = 0
            for chunk in chunks:  # delivered before the next chunk is read
                for _, event in chunk:
                    self.deliver(event)
                count += len(chunk)
            self.events_read += count
            self._call("on_log_read", count)
            return count

    def _decode(self, raw: bytes, path: Path, line: int) -> Event | None:
        """A line's event; a line that is JSON but no event of this version is skipped
        here (``skipped``), one that is not JSON by the reader (``bad_lines``)."""
        event = quick_event(raw)
        if event is not None:
            return event
        obj = parse_line(raw, path, line)
        try:
            return event_from_json(obj, path, line)
        except LogDamagedError as exc:
            self.skipped += 1
            log.warning("%s: skipping a log line: %s", self.path, exc)
            return None

    def deliver(self, event: Event) -> None:
        """Hand one event to every sink that listens to it, as a line of the log is."""
        if isinstance(event, RunFinished):
            self.finished = True
        for fn in self._hooks.get(event.hook, ()):
            fn(event)

    def _call(self, hook: str, *args: Any) -> None:
        for fn in self._hooks[hook]:
            fn(*args)

    # ------------------------------------------------------------------ following

    def start(self) -> LogFollower:
        """Follow the log in a background thread; returns the follower."""
        with self._read_lock:
            if self._thread is not None:
                raise RuntimeError("this LogFollower is already following; make another")
            if self.ended is not None:
                return self  # closed before it started
            self._thread = threading.Thread(target=self._follow, name=self._name, daemon=True)
            self._thread.start()
        return self

    def _follow(self) -> None:
        reason, detail = "closed", ""
        last_check = time.monotonic()
        try:
            while not self._stop.is_set():
                count = self.read()
                if self.finished:
                    reason = "finished"
                    break
                now = time.monotonic()
                if not count and now - last_check >= LIVENESS_S:
                    last_check = now
                    gone = self._writer_gone()
                    if gone is not None:
                        reason, detail = gone
                        break
                if self._stop.wait(self.poll_interval):
                    break
        except Exception as exc:  # the sinks hear of it (a widget shows it): never lost
            log.exception("following %s failed", self.path)
            reason, detail = "error", _describe(exc)
        if reason != "closed" or not self._finishing:  # finish() ends it, with its news
            self._end(reason, detail)

    def _writer_gone(self) -> tuple[str, str] | None:
        """Why a quiet log will not grow again (its folder deleted, its writer dead), or
        None while it may."""
        if not self.run_dir.is_dir():
            return "deleted", f"the run directory {self.run_dir} was deleted while it was followed"
        try:
            status = effective_status(read_record(self.run_dir / "metadata.yaml"))
        except (OSError, RunRecordError) as exc:
            log.debug("no status from %s: %s", self.run_dir, exc)
            return None
        if status == INTERRUPTED:
            return INTERRUPTED, "its writer ended without a word (killed, crashed)"
        return None

    def _end(self, reason: str, detail: str = "") -> None:
        with self._read_lock:
            if self.ended is not None:
                return
            self.ended = reason
        try:
            self._call("on_follow_ended", reason, detail)
        finally:
            self._over.set()

    def close(self, timeout: float = 5.0) -> None:
        """Stop following (the thread ends after its current read)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if thread is None or not thread.is_alive():
            self._end("closed")

    def finish(self, last: Event | None = None) -> None:
        """The writer is done (its processes ended): stop polling, read what the log
        holds still, deliver ``last`` (an event the source adds after the log: a launch
        whose processes failed), and end."""
        self._finishing = True
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        if self.ended == "closed":
            return  # its sinks were let go of
        try:
            with self._read_lock:
                if self.ended is None:  # else nothing more can come: its writer is gone
                    self.read()
                if last is not None:
                    self.deliver(last)
        except Exception as exc:  # the source finishing must not fail with a sink
            log.exception("finishing %s failed", self.path)
            self._end("error", _describe(exc))
            return
        self._end("finished" if self.finished else "ended")

    def join(self, timeout: float | None = None) -> bool:
        """Wait until following is over (started or not); ``True`` once it is."""
        return self._over.wait(timeout)
