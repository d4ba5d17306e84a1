"""One rank of a launched plan: ``python -m nnx_lab.distributed.worker LAUNCH_DIR``.

torchrun starts one of these per process (``nnx_lab.launch`` starts torchrun). Each rank:

1. dies with its parent: the kernel's torchrun gone, the worker gets SIGTERM (Linux
   ``PR_SET_PDEATHSIG``), and a watcher thread ends it if it is reparented anyway;
2. writes its output to ``LAUNCH_DIR/rank<k>.log``;
3. reads the plan (``plan.json``), builds what ``plan.fit()`` would, shares the data out
   (``_plan_ranks``) and trains with ``distributed=DDP()``: rank 0 writes the run, and
   writes ``run.json`` (the run id) into the launch folder first, so the launcher can
   follow the run's log;
4. stops when the launcher asks (``LAUNCH_DIR/stop_request.json``, read twice a second
   from the start): before the ranks start their run, they agree and leave with none;
   once it runs, every rank stops at the same step (LAST written, status "stopped");
5. on an error, writes ``rank<k>.error.json`` (type, message, traceback, exit code, and
   ``caused_by``: the rank that failed first, when this error is its consequence), tells
   the other ranks (``_failure``) and exits at once: it never waits in a barrier, so its
   exit ends the job within seconds (the others' collectives raise, and torchrun ends
   them);
6. on SIGTERM (torchrun tearing the group down, the kernel gone): while the run trains,
   the run ends after the current step as "failed" ("terminated") with its records
   written; a rank recording a failure finishes it; otherwise the rank exits; a rank
   stuck in a C call is ended after 20 s (``_sigterm``).
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from . import _sigterm

__all__ = ["main"]

POLL_S = 0.25


class _Rank:
    """What the watcher thread acts on: the launch folder and the run's control."""

    def __init__(self, launch: Path) -> None:
        from ..engine.events import TrainingControl

        self.launch = launch
        self.control = TrainingControl()
        self.parent = os.getppid()


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass  # not Linux: the watcher below still ends an orphaned worker


def _watch(state: _Rank) -> None:
    """Four times a second: reparented (the parent died and the death signal did not
    come) -> SIGTERM to itself; a stop request in the launch folder -> the stop."""
    from ..runs import read_stop_request

    asked = False
    while True:
        if os.getppid() != state.parent or state.parent == 1:
            os.kill(os.getpid(), signal.SIGTERM)
            return
        if not asked:
            request = read_stop_request(state.launch)
            if request is not None:
                asked = True
                by = f" by {request['by']}" if request.get("by") else ""
                state.control.request_stop(f"{request.get('reason', 'stop requested')}{by}")
        time.sleep(POLL_S)


def _write_json(path: Path, data: Any) -> None:
    from ..runs import atomic_write_json

    atomic_write_json(path, data)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m nnx_lab.distributed.worker LAUNCH_DIR", file=sys.stderr)
        return 2
    launch = Path(args[0])
    rank = int(os.environ.get("RANK", "0"))
    _sigterm.install(force=True)
    _die_with_parent()
    state = _Rank(launch)
    threading.Thread(target=_watch, args=(state,), name="nnx-rank-watch", daemon=True).start()
    _write_json(launch / f"rank{rank}.pid.json", {"rank": rank, "pid": os.getpid()})
    log = open(launch / f"rank{rank}.log", "a", buffering=1, encoding="utf-8")  # noqa: SIM115
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    faulthandler.register(signal.SIGUSR1, file=log, all_threads=True)  # kill -USR1: stacks
    try:
        return _train(launch, rank, state)
    except BaseException as exc:
        code = _record_failure(launch, rank, exc)
        log.flush()
        # Leave now: no barrier, no teardown that could wait for ranks that are gone or
        # stuck; the process's end closes its sockets (the others' collectives raise)
        # and tells torchrun.
        os._exit(code)


def _record_failure(launch: Path, rank: int, exc: BaseException) -> int:
    from ..engine.collective import RankFailedError
    from . import _failure

    _sigterm.set_failing()
    code = 143 if isinstance(exc, _sigterm.Terminated) else 1
    tb = traceback.format_exc()
    caused_by = exc.rank if isinstance(exc, RankFailedError) else None
    with contextlib.suppress(Exception):  # a failure outside the loop: tell the others too
        notes = _failure.board()
        first = None if notes is None else notes.announce(exc, tb)
        if caused_by is None and first is not None and first["rank"] != rank:
            caused_by = first["rank"]
    _write_json(
        launch / f"rank{rank}.error.json",
        {
            "rank": rank,
            "type": type(exc).__name__,
            "message": str(exc),
            "traceback": tb,
            "time": time.time(),
            "exit_code": code,
            "caused_by": caused_by,
        },
    )
    traceback.print_exc()
    return code


def _train(launch: Path, rank: int, state: _Rank) -> int:
    from ..engine.run_handle import run_id_for
    from ..plans import ExperimentPlan
    from ..runs import read_plan_json
    from . import DDP, init_process_group, shutdown
    from ._plan_ranks import rank_params

    # The plan is data until here: its shape checked, then its references resolved
    # (their modules imported), before this rank joins the group.
    file = launch / "plan.json"
    plan = ExperimentPlan.from_json(read_plan_json(file), source=file).resolve()
    init_process_group()
    ddp = DDP()
    model, params, callbacks = plan.materialize()
    params = rank_params(params, ddp.world_size)
    control = state.control
    # A stop asked while the ranks started: they agree, and leave with no run recorded.
    asked = ddp.agree(control.stop_reason if control.stop_requested else None)
    if asked is not None:
        print(f"rank {rank}: stopped before the run started ({asked})", flush=True)
        shutdown()
        return 0
    if rank == 0:
        run_id = run_id_for(model.run_config(params, ddp))
        root = params.runs_root or os.environ.get("NNX_RUNS_ROOT") or "runs"
        _write_json(launch / "run.json", {"run_id": run_id, "runs_root": str(Path(root).resolve())})
    run = model.train(params, callbacks=callbacks, control=control, distributed=ddp)
    print(f"rank {rank}: run {run.id} {run.status.value}", flush=True)
    shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
