"""``DDP()``: the collective a rank trains with: ``model.train(..., distributed=DDP())``."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ..errors import ConfigError
from . import _failure, _sigterm
from ._group import is_initialized

__all__ = ["DDP"]

_MESSAGE_BYTES = 2048


class DDP:
    """Data parallelism over the initialized process group (torch's
    ``DistributedDataParallel``); rank 0 writes the run, every rank returns it."""

    def __init__(
        self, find_unused_parameters: bool = False, stop_check_every: int | None = None
    ) -> None:
        """``stop_check_every``: how often (in updates) the ranks read whether any of
        them was asked to stop; a read is a host sync on a GPU. ``None``: every update
        on the CPU, every 8 on a GPU (a stop then lands up to 7 updates later)."""
        if not is_initialized():
            raise RuntimeError(
                "DDP(): call nnx_lab.distributed.init_process_group() first (under torchrun)"
            )
        if stop_check_every is not None and (
            isinstance(stop_check_every, bool)
            or not isinstance(stop_check_every, int)
            or stop_check_every < 1
        ):
            raise ConfigError(
                "DDP.stop_check_every", stop_check_every, "pass a positive integer, or None"
            )
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.find_unused_parameters = find_unused_parameters
        self.stop_check_every = stop_check_every
        self.backend = dist.get_backend()

    def __repr__(self) -> str:
        return f"DDP(rank={self.rank}, world_size={self.world_size}, backend={self.backend})"

    def wrap(self, net: torch.nn.Module) -> torch.nn.Module:
        device = next(net.parameters()).device
        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(
            net, device_ids=ids, find_unused_parameters=self.find_unused_parameters
        )

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def sum_async(self, tensor: torch.Tensor) -> Any:
        return dist.all_reduce(tensor, op=dist.ReduceOp.SUM, async_op=True)

    def agree(self, message: str | None) -> str | None:
        """Every rank learns the first rank's message, if any rank has one (no pickle:
        the text travels as UTF-8 bytes in a tensor)."""
        device = self._device()
        data = (message or "").encode("utf-8")[:_MESSAGE_BYTES]
        mine = torch.zeros(_MESSAGE_BYTES + 1, dtype=torch.uint8, device=device)
        if message is not None:
            mine[0] = 1
            mine[1 : 1 + len(data)] = torch.tensor(list(data), dtype=torch.uint8)
        gathered = [torch.zeros_like(mine) for _ in range(self.world_size)]
        dist.all_gather(gathered, mine)
        for part in gathered:
            if int(part[0]):
                raw = bytes(part[1:].cpu().tolist()).rstrip(b"\x00")
                return raw.decode("utf-8", errors="replace")
        return None

    def barrier(self) -> None:
        dist.barrier()

    def announce_failure(self, error: BaseException, traceback: str | None) -> dict | None:
        """Tell every rank this one failed, unless another rank failed first: the first
        failure's record (rank, type, message, traceback), or None without torchrun's
        store. The others' collectives break when this rank leaves; they read it."""
        _sigterm.set_failing()  # torchrun's SIGTERM must not cut its records short
        notes = _failure.board()
        return None if notes is None else notes.announce(error, traceback)

    def attach_control(self, control: Any) -> None:
        """The loop's control while a run trains (None after): torchrun's SIGTERM ends
        the run through it, after the current step, records written."""
        _sigterm.set_control(control)

    def first_failure(self) -> dict | None:
        """The first failed rank's record, or None."""
        notes = _failure.board()
        return None if notes is None else notes.first()

    def _device(self) -> Any:
        if self.backend == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")
