"""The process group: torchrun's env:// rendezvous, gloo on CPU, NCCL with CUDA."""

from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist

from . import _failure, _sigterm

__all__ = ["init_process_group", "is_initialized", "rank", "shutdown", "world_size"]

_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def _timeout(timeout_s: float, timeout_seconds: float | None, default: float, fn: str) -> float:
    """nnx-lab's ``timeout_s`` or NNx's ``timeout_seconds`` (one value, if both)."""
    if timeout_seconds is None:
        value, name = timeout_s, "timeout_s"
    elif timeout_s not in (default, timeout_seconds):
        raise ValueError(
            f"{fn}: timeout_s={timeout_s!r} and timeout_seconds={timeout_seconds!r} differ; "
            "pass one of them (timeout_seconds is NNx's name for timeout_s)"
        )
    else:
        value, name = timeout_seconds, "timeout_seconds"
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e9:
        raise ValueError(f"{fn}: {name}={value!r} is invalid: pass a number of seconds > 0")
    return float(value)


def init_process_group(
    backend: str | None = None,
    timeout_s: float = 1800.0,
    *,
    timeout_seconds: float | None = None,
) -> tuple[int, int]:
    """Join the group torchrun set up (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
    ``MASTER_PORT`` in the environment). The backend is NCCL when CUDA is present, else
    gloo; on CUDA each rank takes the device ``LOCAL_RANK``. Joining twice is a no-op.
    Returns ``(rank, world_size)``, as NNx's does; ``timeout_seconds`` is NNx's name
    for ``timeout_s``."""
    timeout_s = _timeout(timeout_s, timeout_seconds, 1800.0, "init_process_group")
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    missing = [v for v in _ENV if v not in os.environ]
    if missing:
        raise RuntimeError(
            f"distributed.init_process_group: {', '.join(missing)} not set; start this "
            "script with torchrun (python -m torch.distributed.run --nproc_per_node=N "
            "script.py) or nnx_lab.launch(...)"
        )
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(
        backend=backend, init_method="env://", timeout=datetime.timedelta(seconds=timeout_s)
    )
    _sigterm.install()  # torchrun's SIGTERM ends a training run after its step, recorded
    return dist.get_rank(), dist.get_world_size()


def is_initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if is_initialized() else 0


def world_size() -> int:
    return dist.get_world_size() if is_initialized() else 1


def shutdown(timeout_s: float = 30.0, *, timeout_seconds: float | None = None) -> None:
    """Leave together: a barrier bounded by ``timeout_s`` on every rank, then the group
    is destroyed.

    The barrier is kept in torchrun's store (``_failure``): a rank that never reaches
    it holds the others ``timeout_s`` at most, and once any rank has recorded a failure
    nobody waits. Without that store (a group not started by torchrun), gloo's
    ``monitored_barrier``, which bounds rank 0's wait only. ``timeout_seconds`` is NNx's
    name for ``timeout_s``.
    """
    timeout_s = _timeout(timeout_s, timeout_seconds, 30.0, "shutdown")
    if not is_initialized():
        return
    try:
        notes = _failure.board()
        if notes is not None:
            notes.gather("shutdown", timeout_s)
        elif dist.get_backend() == "gloo":
            dist.monitored_barrier(timeout=datetime.timedelta(seconds=timeout_s))
        else:
            work = dist.barrier(async_op=True)
            work.wait(timeout=datetime.timedelta(seconds=timeout_s))
    except RuntimeError:
        pass  # a rank is gone: leave anyway
    finally:
        if is_initialized():
            dist.destroy_process_group()
        _failure.forget()
