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
a run of the same id that already exists, torchrun's arguments (``_launch_args``).

torchrun is started from one thread that lives as long as this process, with
``PR_SET_PDEATHSIG``: the signal follows the thread that started the child, so a launch
from a short-lived thread (a widget's handler, a kernel subshell that a page reload
drops) would otherwise lose its processes when that thread ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ._handle import LaunchHandle
from ._launch_args import check_launch_args

__all__ = ["LaunchHandle", "launch"]


def _pdeathsig() -> None:
    """In the child before exec: torchrun gets SIGTERM if the kernel dies."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)


_spawn_lock = threading.Lock()
_spawn_queue: queue.SimpleQueue[tuple[list[str], dict[str, Any], Future]] = queue.SimpleQueue()
_spawner: threading.Thread | None = None


def _spawn_forever() -> None:
    while True:
        cmd, kwargs, done = _spawn_queue.get()
        try:
            done.set_result(subprocess.Popen(cmd, **kwargs))
        except BaseException as exc:  # handed to the caller
            done.set_exception(exc)


def _spawn(cmd: list[str], **kwargs: Any) -> subprocess.Popen:
    """``Popen`` from the launcher's own thread, alive as long as this process."""
    global _spawner
    with _spawn_lock:
        if _spawner is None or not _spawner.is_alive():
            _spawner = threading.Thread(target=_spawn_forever, name="nnx-launch", daemon=True)
            _spawner.start()
    done: Future = Future()
    _spawn_queue.put((cmd, kwargs, done))
    return done.result()


class _WorldSize:
    def __init__(self, world_size: int) -> None:
        self.world_size = world_size


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


def _check_factory_travels(net: Any) -> None:
    """A spec's factory reaches the workers as the ``module:qualname`` the plan's JSON
    names (a runtime module is refused earlier, by ``validate()`` and ``to_json``)."""
    if isinstance(net, dict) and net.get("kind") == "spec" and not net.get("factory"):
        raise ConfigError(
            "model.net",
            f"ModelSpec({net['id']!r}, {net['version']})",
            "the workers import the factory registered for the spec, and this one has no "
            "importable name (a lambda, or a function of __main__ or of a notebook cell); "
            "define it with def in a module (a .py file beside the notebook), import it "
            "from there and register that function",
        )


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

    One node by default (torchrun ``--standalone``); for several, ``nnodes``,
    ``node_rank`` (0 to ``nnodes - 1``) and ``rdzv_endpoint`` (``host:port``, and
    ``rdzv_id``) make a c10d rendezvous: call ``launch`` with the same plan on each
    node (docs/distributed.md, "Several machines"). ``nproc_per_node`` is at most what
    this machine has (CPUs, or CUDA devices with NCCL). The handle owns no widget:
    ``handle.attach(sink)`` follows the run into any sink.
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
    args = check_launch_args(
        nproc_per_node, nnodes, node_rank, rdzv_endpoint, rdzv_id, master_port, env
    )
    plan.validate().raise_for_errors()
    data = plan.to_json()  # refuses lambdas, __main__ functions, instances: with the fix
    _check_factory_travels(data["values"].get("model.net"))
    world = args.world_size
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
    if existing is not None and args.node_rank == 0:
        existing_run_error(root, run_id, existing, params.overwrite_existing)

    # -- side effects start here --------------------------------------------------------
    folder = root / ".launches" / f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
    folder.mkdir(parents=True)
    (folder / "plan.json").write_text(json.dumps(data, indent=1))
    cmd = [sys.executable, "-m", "torch.distributed.run", *args.torchrun(run_id)]
    cmd += ["-m", "nnx_lab.distributed.worker", str(folder)]
    child_env = {**os.environ, **args.env, "NNX_TQDM_DISABLE": "1", "NNX_RUNS_ROOT": str(root)}
    path = [*_import_roots(data), os.getcwd(), child_env.get("PYTHONPATH", "")]
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    out = open(folder / "torchrun.log", "ab")  # noqa: SIM115 - closed by the handle
    proc = _spawn(
        cmd,
        stdout=out,
        stderr=subprocess.STDOUT,
        env=child_env,
        start_new_session=True,  # its own process group: stop() ends all of it
        preexec_fn=_pdeathsig,
    )
    return LaunchHandle(proc, folder, root, run_id, world, out)
