"""What ``launch`` passes to torchrun, checked before any process exists.

Each refusal is a ``ConfigError`` naming the argument, its value and the fix: the
number of processes against what this machine has (CPUs for gloo, CUDA devices for
NCCL: one process each), the node rank within the number of nodes, the rendezvous
endpoint as ``host:port``, the ids and ports torchrun would otherwise refuse (or
misread) after it started.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

__all__ = ["LaunchArgs", "check_endpoint", "check_launch_args", "machine_capacity"]

_HOST = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)$")
_RDZV_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True)
class LaunchArgs:
    nproc_per_node: int
    nnodes: int
    node_rank: int
    rdzv_endpoint: str | None
    rdzv_id: str | None
    master_port: int | None
    env: dict[str, str]

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes

    def torchrun(self, run_id: str) -> list[str]:
        """torchrun's arguments: one node ``--standalone``; several, a c10d rendezvous."""
        args = [f"--nproc_per_node={self.nproc_per_node}"]
        if self.nnodes == 1:
            args.append("--standalone")
            if self.master_port is not None:
                args += ["--master_port", str(self.master_port)]
            return args
        return [
            *args,
            f"--nnodes={self.nnodes}",
            f"--node_rank={self.node_rank}",
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint={self.rdzv_endpoint}",
            f"--rdzv_id={self.rdzv_id or run_id}",
        ]


def machine_capacity() -> tuple[int, str]:
    """How many processes this machine runs, one each: (count, what is counted)."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.device_count(), "CUDA devices (NCCL: one process per device)"
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return cpus, "CPUs this process may use (gloo: one process per CPU)"


def _int(value: Any, field: str, minimum: int, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(field, value, fix)
    return value


def _port(value: Any, field: str) -> int:
    port = _int(value, field, 1, "pass a TCP port from 1 to 65535")
    if port > 65535:
        raise ConfigError(field, value, "pass a TCP port from 1 to 65535")
    return port


def check_endpoint(value: Any) -> str:
    """``host:port`` (a name, an IPv4 address or a bracketed IPv6 one, and a port)."""
    fix = "pass 'host:port', e.g. 'node0.cluster:29400' or '10.0.0.1:29400'"
    if not isinstance(value, str) or value.count(":") < 1:
        raise ConfigError("rdzv_endpoint", value, fix)
    host, _, port = value.rpartition(":")
    if not _HOST.match(host) or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ConfigError("rdzv_endpoint", value, fix)
    return value


def check_launch_args(
    nproc_per_node: Any,
    nnodes: Any,
    node_rank: Any,
    rdzv_endpoint: Any,
    rdzv_id: Any,
    master_port: Any,
    env: Any,
) -> LaunchArgs:
    nproc = _int(nproc_per_node, "nproc_per_node", 1, "pass an integer >= 1")
    capacity, what = machine_capacity()
    if nproc > capacity:
        raise ConfigError(
            "nproc_per_node",
            nproc,
            f"this machine has {capacity} {what}; pass at most {capacity}, or train on "
            "several nodes (nnodes=, node_rank=, rdzv_endpoint=)",
        )
    nnodes = _int(nnodes, "nnodes", 1, "pass an integer >= 1")
    node_rank = _int(node_rank, "node_rank", 0, "pass an integer >= 0")
    if node_rank >= nnodes:
        raise ConfigError(
            "node_rank",
            node_rank,
            f"with nnodes={nnodes} the nodes are numbered 0 to {nnodes - 1}: pass one of "
            "them (each node's launch its own)",
        )
    if nnodes > 1:
        if rdzv_endpoint is None:
            raise ConfigError(
                "rdzv_endpoint",
                rdzv_endpoint,
                "several nodes meet at an endpoint: pass 'host:port' (the same on every node)",
            )
        check_endpoint(rdzv_endpoint)
        if master_port is not None:
            raise ConfigError(
                "master_port",
                master_port,
                "several nodes meet at rdzv_endpoint: put the port there, not here",
            )
        if rdzv_id is not None and (not isinstance(rdzv_id, str) or not _RDZV_ID.match(rdzv_id)):
            raise ConfigError(
                "rdzv_id",
                rdzv_id,
                "pass letters, digits, '_', '.' or '-' (at most 128), the same on every "
                "node, or None (the run id)",
            )
    else:
        for field, value in (("rdzv_endpoint", rdzv_endpoint), ("rdzv_id", rdzv_id)):
            if value is not None:
                raise ConfigError(
                    field,
                    value,
                    "one node meets itself (torchrun --standalone): drop it, or pass "
                    "nnodes > 1 for several nodes",
                )
        if master_port is not None:
            _port(master_port, "master_port")
    if env is None:
        env = {}
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise ConfigError("env", env, "pass a dict of str to str (added to the workers' env)")
    return LaunchArgs(nproc, nnodes, node_rank, rdzv_endpoint, rdzv_id, master_port, dict(env))
