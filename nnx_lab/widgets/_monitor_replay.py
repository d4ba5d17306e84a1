"""Runs the monitor reads from their logs: one run replayed and followed while it is
written (``from_run``, ``follow_run``), a launched run (``for_launch``), finished runs
drawn on top of each other (``compare``).

A mixin of ``TrainingMonitor`` (``_monitor``). The reading is ``nnx_lab.runs``'
``LogFollower``: it turns the log's lines back into the loop's events and hands them to
the monitor's own hooks, so a run read from its log looks exactly as a live one; the
hooks here (``on_log_read``, ``on_follow_ended``, ...) are the follower's extra cues.
"""

from __future__ import annotations

import functools
import logging
import os
import pathlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from ..runs import INTERRUPTED, LogFollower, RunRecordError, effective_status, read_record
from ._race import LANE_STATUSES, MAX_LANES, RaceLane
from ._runs import find_run_dir

__all__ = ["MonitorReplay"]

log = logging.getLogger("nnx_lab.widgets")

_ENDED = ("stopped", "finished", "failed", INTERRUPTED)
_TICK_S = 1.0  # a followed run's elapsed time and ETA move at least this often

_R = TypeVar("_R", bound="MonitorReplay")


def _check_poll(poll_interval: Any) -> float:
    if not (isinstance(poll_interval, int | float) and poll_interval > 0):
        raise ValueError(f"poll_interval={poll_interval!r}: pass a positive number of seconds")
    return float(poll_interval)


def _recorded_status(run_dir: pathlib.Path) -> str | None:
    try:
        return effective_status(read_record(run_dir / "metadata.yaml"))
    except (OSError, RunRecordError) as exc:
        log.debug("no status from %s: %s", run_dir, exc)
        return None


class MonitorReplay:
    """``from_run``, ``follow_run``, ``for_launch``, ``compare``: see each."""

    # What the replay uses of the monitor it is mixed into (TrainingMonitor).
    _lock: Any
    _transport: Any
    _clock: Callable[[], float]
    _job: Any
    _control: Any
    _finished: bool
    run_id: str
    status: str
    stop_reason: str
    can_stop: bool
    from_log: bool
    runs_root: str
    error: str
    hold_sync: Callable[[], Any]
    show_error: Callable[[BaseException | str], None]
    _reset_run_state: Callable[[], None]
    _new_lane: Callable[..., RaceLane]
    _update_fallback: Callable[[], None]

    def _init_replay(self) -> None:
        self._log_path: pathlib.Path | None = None
        self._run_dir: pathlib.Path | None = None
        self._stoppable = False  # a followed run this monitor may ask to stop (launch)
        self._follower: LogFollower | None = None
        self._shown_log = False  # from_log and the run's folder are shown
        self._last_tick = 0.0
        self._comparing = False

    # ------------------------------------------------------------------ one run

    @classmethod
    def from_run(
        cls: type[_R],
        run_id: str,
        runs_root: str | os.PathLike[str] | None = None,
        follow: bool = True,
        *,
        poll_interval: float = 0.25,
        update_interval: float = 0.1,
        smoothing: float = 0.9,
        max_points: int = 100_000,
        max_epochs: int = 20_000,
    ) -> _R:
        """Show a run from ``<runs_root>/<run_id>/metrics.jsonl``.

        ``run_id`` may be an unambiguous prefix of the id. ``runs_root=None`` means
        ``$NNX_RUNS_ROOT``, else ``./runs`` (as for training). With ``follow=True``
        and a run that has not finished (another process still writes it), a thread
        polls the file every ``poll_interval`` seconds until the run finishes or
        ``close()`` is called. The log is read as a stream: a log of any size costs the
        monitor's bounded series and one chunk of the file (``docs/widgets.md``,
        "Memory"); a run folder that is a link out of the root is refused.
        """
        _check_poll(poll_interval)
        run_dir = find_run_dir(run_id, runs_root)
        monitor = cls(
            update_interval=update_interval,
            smoothing=smoothing,
            max_points=max_points,
            max_epochs=max_epochs,
        )
        return monitor.follow_run(run_dir, follow=follow, poll_interval=poll_interval)

    def follow_run(
        self: _R,
        run_dir: str | os.PathLike[str],
        *,
        follow: bool = True,
        poll_interval: float = 0.25,
        stoppable: bool = False,
    ) -> _R:
        """Show the run in ``run_dir`` from its log, and follow it (see ``from_run``).

        ``stoppable=True`` lets Stop and ``stop()`` ask the writing processes to stop,
        through the run folder (``nnx_lab.request_stop``): for a run this notebook
        started elsewhere (``for_launch`` sets it for a launched run). Returns the
        monitor.
        """
        poll = _check_poll(poll_interval)
        run_dir = pathlib.Path(run_dir)
        # first: the follower refuses a run folder that is a link out of its runs root
        follower = LogFollower(run_dir, [self], poll_interval=poll, name=_thread_name(run_dir))
        self._begin_log(run_dir, stoppable)
        self._show_log()
        self._transport.paused = True  # one update once the whole log is read
        try:
            follower.read()
        finally:
            self._transport.paused = False
        self._transport.flush()
        self.runs_root = str(run_dir.resolve().parent)  # where it is read here
        if not self._finished:
            if follow:
                self._follower = follower.start()
            else:
                self._apply_metadata_status(run_dir)
        return self

    @classmethod
    def for_launch(
        cls: type[_R],
        handle: Any,
        *,
        update_interval: float = 0.1,
        smoothing: float = 0.9,
        max_points: int = 100_000,
        max_epochs: int = 20_000,
    ) -> _R:
        """A monitor that follows a run started by ``nnx_lab.distributed.launch``: it is
        attached to the ``LaunchHandle`` (``handle.attach``), which replays rank 0's
        log into it from the run's first line and, when the processes fail, the
        failing rank's traceback. Its Stop button stops every process, in any state,
        also while they start (``handle.stop(wait=False)``). ``handle.monitor`` is this
        monitor when the handle had none. ``nnx_lab.launch(...)`` calls it (``monitor=True``)."""
        monitor = cls(
            update_interval=update_interval,
            smoothing=smoothing,
            max_points=max_points,
            max_epochs=max_epochs,
        )
        monitor._begin_log(pathlib.Path(handle.run_dir), stoppable=True)
        monitor._follower = handle.attach(monitor)
        monitor._stop_launch = functools.partial(handle.stop, wait=False)  # while it starts too
        monitor.can_stop = not monitor._finished
        if getattr(handle, "monitor", None) is None:
            handle.monitor = monitor
        return monitor

    def _begin_log(self, run_dir: pathlib.Path, stoppable: bool) -> None:
        if self._log_path is not None or self._job is not None or self._control is not None:
            raise RuntimeError("this monitor already shows a run; make a new TrainingMonitor")
        self._log_path = run_dir / "metrics.jsonl"
        self._stoppable = bool(stoppable)
        self._run_dir = run_dir

    def _show_log(self) -> None:
        """Say that the run shown is read from its log (once the log is there)."""
        assert self._run_dir is not None
        self._shown_log = True
        with self.hold_sync():
            self.run_id = self._run_dir.name
            self.from_log = True

    def report_failure(self, text: str) -> None:
        """Show that the run's processes failed, with ``text`` (a traceback) under the
        charts."""
        with self._lock:
            with self.hold_sync():
                self.error = str(text)
                self.status = "failed"
                self.can_stop = False
            self._finished = True
            self._transport.flush()
            self._update_fallback()

    # ------------------------------------------------------------------ the follower's cues

    def on_log_restarted(self) -> None:
        """The log was replaced: what it showed is gone."""
        run_id = self.run_id
        self._reset_run_state()
        self.run_id = run_id

    def on_log_read(self, events: int) -> None:
        """After each read of the log: Stop (through the folder) while the run goes on,
        and the counters kept moving."""
        if not self._shown_log and self._log_path is not None and self._log_path.is_file():
            self._show_log()  # a launched run's log appeared: as follow_run shows it
            self.runs_root = str(self._log_path.parent.resolve().parent)
        if events:
            self._scan_figures()  # type: ignore[attr-defined]  # the run folder's, by now
        # a run read from its log is stopped where it runs, or through its folder (launch)
        self.can_stop = self._stoppable and not self._finished and self.status == "running"
        now = self._clock()
        if events or now - self._last_tick >= _TICK_S:
            self._last_tick = now
            self._transport.flush()

    def on_follow_ended(self, reason: str, detail: str) -> None:
        """Following is over (``LogFollower``): say why when the log cannot."""
        if reason == "deleted":
            with self.hold_sync():
                self.status = "failed" if self.status in ("running", "stopping") else self.status
                self.can_stop = False
            self.show_error(f"{detail}; the monitor shows what the log held")
        elif reason == INTERRUPTED:
            with self.hold_sync():
                self.status = INTERRUPTED
                self.stop_reason = detail
                self.can_stop = False
        elif reason == "error":
            self.show_error(detail)
            return
        elif reason == "ended" and not self._finished and self._run_dir is not None:
            self._apply_metadata_status(self._run_dir)  # the processes ended, the log early
        else:
            return
        self._transport.flush()

    def _apply_metadata_status(self, run_dir: pathlib.Path) -> None:
        """Without a run_finished line, take the status recorded in metadata.yaml
        ("interrupted" for a run whose writer is gone)."""
        status = _recorded_status(run_dir)
        if status in _ENDED:
            self.status = status

    # ------------------------------------------------------------------ several runs

    @classmethod
    def compare(
        cls: type[_R],
        run_ids: Iterable[str] | Mapping[str, str],
        runs_root: str | os.PathLike[str] | None = None,
        *,
        update_interval: float = 0.1,
        smoothing: float = 0.9,
    ) -> _R:
        """Finished runs drawn on top of each other, as a race shows them.

        ``run_ids`` lists run ids (or unambiguous prefixes), or maps names to them.
        Each run's ``metrics.jsonl`` is read once (a run still being written is shown
        as far as its log goes, with the status its ``metadata.yaml`` records). Every
        id is checked before any log is read.
        """
        if isinstance(run_ids, str):
            raise TypeError(
                f"compare() takes several run ids: pass a list, e.g. [{run_ids!r}, ...]"
            )
        named = list(run_ids.items()) if isinstance(run_ids, Mapping) else None
        ids = [rid for _, rid in named] if named is not None else list(run_ids)
        if not ids:
            raise ValueError("compare() needs at least one run id")
        if len(ids) > MAX_LANES:
            raise ValueError(
                f"compare() got {len(ids)} runs; at most {MAX_LANES} are drawn at once "
                f"(one colour each): pass fewer"
            )
        dirs = [find_run_dir(rid, runs_root) for rid in ids]
        names = [n for n, _ in named] if named is not None else [d.name[:8] for d in dirs]
        monitor = cls(update_interval=update_interval, smoothing=smoothing)
        monitor._comparing = True
        monitor.from_log = True
        monitor._transport.paused = True  # one update once every log is read
        try:
            for name, run_dir in zip(names, dirs, strict=True):
                lane = monitor._new_lane(str(name), forward=False)
                lane.run_id = run_dir.name
                _read_lane(lane, run_dir)
        finally:
            monitor._transport.paused = False
        with monitor._lock, monitor.hold_sync():
            monitor.status = "finished"
            monitor.run_id = ""
            monitor._transport.flush()
        return monitor


def _read_lane(lane: RaceLane, run_dir: pathlib.Path) -> None:
    LogFollower(run_dir, [lane]).read()
    if lane.status in ("queued", "running"):  # no run_finished line
        status = _recorded_status(run_dir)
        # "running": another process still writes it (compare reads it once)
        lane.status = status if status in LANE_STATUSES else "interrupted"
        if lane.status == "interrupted" and not lane.stop_reason:
            lane.stop_reason = "its log ends without a run_finished line"


def _thread_name(run_dir: pathlib.Path) -> str:
    return f"nnx-monitor-follow-{run_dir.name}"
