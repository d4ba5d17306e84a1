"""``nnx_lab.launch``: a plan trained by N processes, started from a notebook.

The launcher writes the plan as JSON into a launch folder (``<runs root>/.launches/<id>``),
starts ``python -m torch.distributed.run ... -m nnx_lab.distributed.worker <folder>`` in
its own process group, and returns a handle at once. The workers train the plan with
``distributed=DDP()``; rank 0 writes the run. The launcher is a source of events, not a
UI: ``handle.attach(sink)`` replays rank 0's ``metrics.jsonl`` into any sink
(``nnx_lab.runs.LogFollower``: the same events an in-kernel run emits, so a sink cannot
tell the difference), and ``handle.stop()`` asks the run to stop through the run folder
(``request_stop``): LAST written, status "stopped". The widget layer attaches a
``TrainingMonitor`` (``nnx_lab.launch``, ``TrainingMonitor.for_launch``); this module
imports no widget.

Every refusal comes before any process starts: a plan that does not validate, factories
that another process cannot import, a batch that does not split across the processes,
a run of the same id that already exists.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from ..engine.events import RunFinished
from ..errors import ConfigError
from ..runs import LogFollower, read_stop_request, request_stop

__all__ = ["LaunchHandle", "launch"]

TERMINAL = ("finished", "stopped", "failed")


def _pdeathsig() -> None:
    """In the child before exec: torchrun gets SIGTERM if the kernel dies."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)


class _WorldSize:
    def __init__(self, world_size: int) -> None:
        self.world_size = world_size


def _check_int(value: Any, field: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(field, value, f"pass an integer >= {minimum}")
    return value


def _references(data: Any) -> list[str]:
    """Every ``module:qualname`` reference in a plan's JSON."""
    found: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key in ("factory", "ref") and isinstance(value, str) and ":" in value:
                found.append(value)
            else:
                found += _references(value)
    elif isinstance(data, list):
        for value in data:
            found += _references(value)
    return found


def _import_roots(data: Any) -> list[str]:
    """The folders the workers need on their path to import the plan's factories as the
    kernel does (a module beside the notebook, a folder the kernel added to sys.path)."""
    roots: list[str] = []
    for ref in _references(data):
        name = ref.split(":", 1)[0]
        module = sys.modules.get(name)
        origin = getattr(getattr(module, "__spec__", None), "origin", None)
        if not origin or not os.path.isfile(origin):
            continue
        depth = name.count(".") + (1 if Path(origin).name == "__init__.py" else 0)
        root = str(Path(origin).resolve().parents[depth])
        if root not in roots:
            roots.append(root)
    return roots


def launch(
    plan: Any,
    nproc_per_node: int = 2,
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv_endpoint: str | None = None,
    rdzv_id: str | None = None,
    master_port: int | None = None,
    monitor: bool = False,
    env: dict[str, str] | None = None,
) -> LaunchHandle:
    """Train ``plan`` (an ``ExperimentPlan``) with ``nproc_per_node`` processes per node.

    One node by default (torchrun ``--standalone``); ``nnodes``, ``node_rank`` and
    ``rdzv_endpoint`` (``host:port``, and ``rdzv_id``) pass through to torchrun for
    several machines: call ``launch`` with the same plan on each node. The handle
    owns no widget: ``handle.attach(sink)`` follows the run into any sink.
    ``nnx_lab.launch`` is this function with a ``TrainingMonitor`` attached
    (``monitor=True``, its default); here ``monitor=True`` is refused with that fix.
    """
    from ..plans import ExperimentPlan
    from ._plan_ranks import rank_params

    if monitor:
        raise ConfigError(
            "monitor",
            monitor,
            "the launcher owns no widget: call nnx_lab.launch(...) for a handle with a "
            "TrainingMonitor, or attach one: TrainingMonitor.for_launch(handle)",
        )
    if not isinstance(plan, ExperimentPlan):
        raise ConfigError("plan", type(plan).__name__, "pass an ExperimentPlan")
    nproc = _check_int(nproc_per_node, "nproc_per_node")
    nnodes = _check_int(nnodes, "nnodes")
    node_rank = _check_int(node_rank, "node_rank", 0)
    if nnodes > 1 and not rdzv_endpoint:
        raise ConfigError(
            "rdzv_endpoint", rdzv_endpoint, "several nodes meet at an endpoint: pass 'host:port'"
        )
    plan.validate().raise_for_errors()
    data = plan.to_json()  # refuses lambdas, __main__ functions, instances: with the fix
    world = nproc * nnodes
    # Rank 0's checks and run id, here, before any process exists: the data, a resume
    # (its source, its world size), a run of the same id.
    from ..engine.reservation import existing_run_error, inspect_existing
    from ..engine.training_state import preserved_rng

    with preserved_rng():
        model, params, _ = plan.materialize()
        params = rank_params(params, world, rank=0)
        pre = model.preflight(params, _WorldSize(world))
    run_id = pre.run_id
    root = pre.root.resolve()
    existing = inspect_existing(root, run_id)
    if existing is not None and node_rank == 0:
        existing_run_error(root, run_id, existing, params.overwrite_existing)

    # -- side effects start here --------------------------------------------------------
    folder = root / ".launches" / f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
    folder.mkdir(parents=True)
    (folder / "plan.json").write_text(json.dumps(data, indent=1))
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}"]
    if nnodes == 1:
        cmd.append("--standalone")
        if master_port is not None:
            cmd += ["--master_port", str(master_port)]
    else:
        cmd += [
            f"--nnodes={nnodes}",
            f"--node_rank={node_rank}",
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint={rdzv_endpoint}",
            f"--rdzv_id={rdzv_id or run_id}",
        ]
    cmd += ["-m", "nnx_lab.distributed.worker", str(folder)]
    child_env = {**os.environ, **(env or {}), "NNX_TQDM_DISABLE": "1", "NNX_RUNS_ROOT": str(root)}
    path = [*_import_roots(data), os.getcwd(), child_env.get("PYTHONPATH", "")]
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    out = open(folder / "torchrun.log", "ab")  # noqa: SIM115 - closed by the handle
    proc = subprocess.Popen(
        cmd,
        stdout=out,
        stderr=subprocess.STDOUT,
        env=child_env,
        start_new_session=True,  # its own process group: stop() ends all of it
        preexec_fn=_pdeathsig,
    )
    return LaunchHandle(proc, folder, root, run_id, nproc * nnodes, out)


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
        "failed"; "failed" too when the processes ended with an error)."""
        code = self.proc.poll()
        recorded = self._recorded()
        if code is None:
            return "running" if recorded == "running" else recorded or "starting"
        if code != 0 or recorded not in TERMINAL:
            return "failed"
        return recorded

    def _recorded(self) -> str | None:
        from ..runs import RunRecordError, effective_status, read_record

        try:
            return effective_status(read_record(self.run_dir / "metadata.yaml"))
        except (OSError, RunRecordError):
            return None

    def _first_error(self) -> tuple[str, str] | None:
        """(what failed, its traceback) of the first rank that recorded an error."""
        errors = []
        for path in sorted(self.folder.glob("rank*.error.json")):
            with contextlib.suppress(OSError, ValueError):
                errors.append(json.loads(path.read_text()))
        if not errors:
            return None
        real = [e for e in errors if e.get("type") != "Terminated"] or errors
        first = min(real, key=lambda e: e.get("time", 0))
        head = (
            f"rank {first['rank']} failed (exit code {first.get('exit_code', '?')}): "
            f"{first['type']}: {first['message']}"
        )
        return head, first["traceback"].rstrip()

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
        """The run's end as the launcher saw it, when its processes failed (rank 0's log
        may not say so: another rank failed, or rank 0 was killed): ``RunFinished``
        "failed" with the failing rank's traceback. Its counts are 0: the log has them."""
        if self.status != "failed":
            return None
        first = self._first_error()
        error, tb = first if first is not None else (self._no_error_text(), None)
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
        """Wait for the processes; returns the ``NNRun``. Raises ``TimeoutError``, or
        ``RuntimeError`` with the failing rank's traceback when they failed."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"run {self.run_id} still running after {timeout}s")
        if self.status == "failed":
            raise RuntimeError(self._failure_text())
        return self.run

    def stop(self, reason: str = "stopped from the launcher", timeout: float = 60.0) -> None:
        """Ask every rank to stop after its current step (LAST written, status
        "stopped"); if they have not ended after ``timeout`` s, end the process group."""
        if self.proc.poll() is not None:
            return
        if (self.run_dir / "metadata.yaml").is_file() and read_stop_request(self.run_dir) is None:
            with contextlib.suppress(ValueError):
                request_stop(self.run_id, self.root, reason=reason, by="nnx_lab.launch")
        if not self._done.wait(timeout):
            self.terminate()

    def terminate(self) -> None:
        """End all the processes now (SIGTERM to the group, then SIGKILL)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)

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
