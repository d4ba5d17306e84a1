"""``LaunchHandle``: a launched run as the kernel sees it (status, run, error, logs), how
it is stopped (in every state: the request waits in the launch folder for the ranks),
and how it is followed (``attach``: rank 0's log into any sink)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from ..engine.events import RunFinished
from ..runs import STOP_REQUEST, LogFollower, atomic_write_json

__all__ = ["LaunchHandle"]

TERMINAL = ("finished", "stopped", "failed")


class LaunchHandle:
    """A launched run: ``status``, ``run``, ``wait()``, ``stop()``, ``logs(rank)``, and
    ``attach(sink)`` to follow it."""

    def __init__(
        self, proc: subprocess.Popen, folder: Path, root: Path, run_id: str, world: int, out: Any
    ) -> None:
        self.proc, self.folder, self.root = proc, folder, root
        self.run_id, self.world_size = run_id, world
        self._out = out
        # The TrainingMonitor the widget layer attached (nnx_lab.launch); None without.
        self.monitor: Any = None
        self._lock = threading.Lock()
        self._followers: list[LogFollower] = []
        self._log_seen = False  # rank 0's log exists: the followers read it
        self._ended = False  # the processes have ended and the followers are finished
        self._stop_reason: str | None = None  # stop() was asked, why
        self._done = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="nnx-launch", daemon=True)
        self._watcher.start()

    def __repr__(self) -> str:
        return (
            f"LaunchHandle(run {self.run_id[:12]}, {self.world_size} processes, "
            f"status {self.status}, folder {self.folder})"
        )

    # -- state ---------------------------------------------------------------------------
    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    @property
    def run_dir(self) -> Path:
        return self.root / self.run_id

    @property
    def status(self) -> str:
        """ "starting", "running", then the run's own status ("finished", "stopped",
        "failed"; "failed" too when the processes ended with an error). "stopped" also
        when a stop came before the ranks started the run: then no run is recorded."""
        code = self.proc.poll()
        recorded = self._recorded()
        if code is None:
            return "running" if recorded == "running" else recorded or "starting"
        if recorded is None and self._stopped_before_the_run():
            return "stopped"
        if code != 0 or recorded not in TERMINAL:
            return "failed"
        return recorded

    def _stopped_before_the_run(self) -> bool:
        """Asked to stop, the processes ended with no run and no rank's own error."""
        if self._stop_reason is None and not (self.folder / STOP_REQUEST).is_file():
            return False
        first = self._first_error()
        return first is None or first[2] == "Terminated"

    def _recorded(self) -> str | None:
        from ..runs import RunRecordError, effective_status, read_record

        try:
            return effective_status(read_record(self.run_dir / "metadata.yaml"))
        except (OSError, RunRecordError):
            return None

    def _first_error(self) -> tuple[str, str, str] | None:
        """(what failed, its traceback, its type) of the rank that failed first: a rank
        ended by the teardown (Terminated) or whose error is another rank's consequence
        (``caused_by``) counts only when no other rank recorded one."""
        errors = []
        for path in sorted(self.folder.glob("rank*.error.json")):
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(path.read_text())
                if isinstance(data, dict) and {"rank", "type", "message"} <= data.keys():
                    errors.append(data)
        if not errors:
            return None
        own = [e for e in errors if e.get("caused_by") is None]
        real = [e for e in own if e.get("type") != "Terminated"] or own or errors
        first = min(real, key=lambda e: e.get("time", 0))
        head = (
            f"rank {first['rank']} failed (exit code {first.get('exit_code', '?')}): "
            f"{first['type']}: {first['message']}"
        )
        return head, str(first.get("traceback", "")).rstrip(), str(first["type"])

    @property
    def error(self) -> str | None:
        """The failing rank's traceback (the first rank that recorded one), or None."""
        first = self._first_error()
        return None if first is None else f"{first[0]}\n\n{first[1]}"

    def _failure_text(self) -> str:
        return self.error or self._no_error_text()

    def _no_error_text(self) -> str:
        return (
            f"the processes ended with exit code {self.returncode} and no rank recorded an "
            f"error (killed? out of memory?); see handle.logs(rank) and handle.logs(-1)"
        )

    def _failure_event(self) -> RunFinished | None:
        """The run's end as the launcher saw it, when rank 0's log cannot say it: the
        processes failed (another rank failed, or rank 0 was killed): ``RunFinished``
        "failed" with the failing rank's traceback; stopped before the run started (no
        log at all): ``RunFinished`` "stopped". Its counts are 0: the log has them."""
        status = self.status
        if status == "stopped" and self._recorded() is None:
            return RunFinished(
                run_id=self.run_id,
                status="stopped",
                epochs_completed=0,
                steps=0,
                stop_reason=self._stop_reason or "stop requested",
            )
        if status != "failed":
            return None
        first = self._first_error()
        error, tb = first[:2] if first is not None else (self._no_error_text(), None)
        return RunFinished(
            run_id=self.run_id,
            status="failed",
            epochs_completed=0,
            steps=0,
            error=error,
            traceback=tb,
        )

    @property
    def run(self) -> Any:
        """The ``NNRun`` once the processes have ended (None before)."""
        if self.proc.poll() is None or not (self.run_dir / "run.yaml").is_file():
            return None
        from ..engine.run_handle import NNRun

        return NNRun.load(self.run_id, runs_root=self.root)

    def logs(self, rank: int = 0) -> str:
        """What rank ``rank`` printed (its stdout and stderr); ``rank=-1``: torchrun's."""
        path = self.folder / ("torchrun.log" if rank == -1 else f"rank{rank}.log")
        try:
            return path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    # -- control -------------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> Any:
        """Wait for the processes; returns the ``NNRun`` (None when they were stopped
        before the run started). Raises ``TimeoutError``, or ``RuntimeError`` with the
        failing rank's traceback when they failed."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"run {self.run_id} still running after {timeout}s")
        if self.status == "failed":
            raise RuntimeError(self._failure_text())
        return self.run

    def stop(
        self, reason: str = "stopped from the launcher", timeout: float = 60.0, *, wait: bool = True
    ) -> None:
        """Ask every rank to stop, in any state: while they start, they leave with no
        run (status "stopped", ``run`` None); once the run trains, every rank stops
        after the same step (LAST written, status "stopped"). If they have not ended
        after ``timeout`` s, the processes are ended (``terminate``). ``wait=False``
        returns at once (the Stop button) and ends them after ``timeout`` all the same.

        The request is ``stop_request.json`` in the launch folder, which each rank reads
        twice a second from its start; it never needs the run folder to exist."""
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"reason={reason!r}: say why the run is stopped")
        if self.proc.poll() is not None:
            return
        with self._lock:
            first = self._stop_reason is None
            if first:
                self._stop_reason = reason
                atomic_write_json(
                    self.folder / STOP_REQUEST,
                    {"reason": reason[:500], "by": "nnx_lab.launch", "requested_at": time.time()},
                )
        if not wait:
            if first:
                threading.Thread(
                    target=self._end_after, args=(timeout,), name="nnx-launch-stop", daemon=True
                ).start()
            return
        self._end_after(timeout)

    def _end_after(self, timeout: float) -> None:
        if not self._done.wait(timeout):
            self.terminate()

    def terminate(self) -> None:
        """End all the processes now: SIGTERM to torchrun (which ends its ranks), then,
        after 15 s, SIGKILL to torchrun and to every rank still alive."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for pid in self._rank_pids():  # each in a session of its own (torchrun's doing)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def _rank_pids(self) -> list[int]:
        """The ranks' processes that are still alive (a recycled pid, whose command line
        does not name this launch folder, is not one of them)."""
        pids = []
        for path in self.folder.glob("rank*.pid.json"):
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                pid = int(json.loads(path.read_text())["pid"])
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                if str(self.folder).encode() in cmdline:
                    pids.append(pid)
        return pids

    # -- following ------------------------------------------------------------------------
    def attach(self, sink: Any, *, poll_interval: float = 0.25) -> LogFollower:
        """Follow the run into ``sink`` (any object with event hooks, as a training sink):
        rank 0's ``metrics.jsonl`` replayed from its first line (whenever it is
        attached) and followed while the processes run; when they fail, a last
        ``RunFinished`` "failed" with the failing rank's traceback. Returns the
        ``LogFollower``: ``close()`` detaches the sink, ``join()`` waits for the end."""
        follower = LogFollower(
            self.run_dir, [sink], poll_interval=poll_interval, name=f"nnx-launch-{self.run_id[:8]}"
        )
        with self._lock:
            ended = self._ended
            if not ended:
                self._followers.append(follower)
                if self._log_seen:
                    follower.start()
        if ended:  # the processes are done: the whole log, and how they ended, now
            follower.finish(self._failure_event())
        return follower

    def _log_exists(self) -> bool:
        return (self.run_dir / "metrics.jsonl").is_file()

    def _watch(self) -> None:
        while True:
            code = self.proc.poll()
            if not self._log_seen and self._log_exists():
                with self._lock:
                    self._log_seen = True
                    for follower in self._followers:
                        follower.start()
            if code is not None:
                break
            time.sleep(0.2)
        self._out.close()
        with self._lock:
            self._ended = True
            followers = list(self._followers)
        last = self._failure_event()
        for follower in followers:  # each reads what is left, then hears how it ended
            follower.finish(last)
        self._done.set()
