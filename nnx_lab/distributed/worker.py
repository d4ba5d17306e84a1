"""One rank of a launched plan: ``python -m nnx_lab.distributed.worker LAUNCH_DIR``.

torchrun starts one of these per process (``nnx_lab.launch`` starts torchrun). Each rank:

1. dies with its parent: the kernel's torchrun gone, the worker gets SIGTERM (Linux
   ``PR_SET_PDEATHSIG``), and a watcher thread ends it if it is reparented anyway;
2. writes its output to ``LAUNCH_DIR/rank<k>.log``;
3. reads the plan (``plan.json``), builds what ``plan.fit()`` would, shares the data out
   (``_plan_ranks``) and trains with ``distributed=DDP()``: rank 0 writes the run, and
   writes ``run.json`` (the run id) into the launch folder first, so the launcher can
   follow the run's log;
4. on an error, writes ``rank<k>.error.json`` (type, message, traceback) and exits 1;
   on SIGTERM (torchrun tearing the group down after another rank failed) the run ends
   as "failed" ("terminated") with its records written.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass  # not Linux: the watcher below still ends an orphaned worker
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGTERM)
                return

    threading.Thread(target=watch, name="nnx-parent-watch", daemon=True).start()


class Terminated(SystemExit):
    """SIGTERM reached this rank (the group is being torn down)."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated(143)


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
    _die_with_parent()
    signal.signal(signal.SIGTERM, _on_sigterm)
    _write_json(launch / f"rank{rank}.pid.json", {"rank": rank, "pid": os.getpid()})
    log = open(launch / f"rank{rank}.log", "a", buffering=1, encoding="utf-8")  # noqa: SIM115
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    try:
        return _train(launch, rank)
    except BaseException as exc:
        code = 143 if isinstance(exc, Terminated) else 1
        _write_json(
            launch / f"rank{rank}.error.json",
            {
                "rank": rank,
                "type": type(exc).__name__,
                "message": str(exc),
                "traceback": traceback.format_exc(),
                "time": time.time(),
                "exit_code": code,
            },
        )
        traceback.print_exc()
        return code


def _train(launch: Path, rank: int) -> int:
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
    if rank == 0:
        run_id = run_id_for(model.run_config(params, ddp))
        root = params.runs_root or os.environ.get("NNX_RUNS_ROOT") or "runs"
        _write_json(launch / "run.json", {"run_id": run_id, "runs_root": str(Path(root).resolve())})
    try:
        run = model.train(params, callbacks=callbacks, distributed=ddp)
        print(f"rank {rank}: run {run.id} {run.status.value}", flush=True)
    finally:
        shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
