"""``DistributedObjectiveStep``: an objective on one rank of a data-parallel run.

The engine owns the update, so the union's exact loss is kept across ranks too: each
term's window numerator and denominator are summed over the ranks (one small
all-reduce per update, which also carries the stop requests), the backward pass runs on
this rank's share of ``Σ weight · Σ numerator / Σ denominator`` with the union's
denominators, and the gradients are summed across the ranks in one flat all-reduce.
Every rank then holds the gradient of the union batch's loss, whatever the ranks'
batch sizes or masks, and takes the same non-finite decision (the loss it checks is
the union's). The ranks' forwards run on the unwrapped network (its gradients are
synchronized here, not by DDP's hooks); the DDP wrapper still broadcasts rank 0's
initial weights. Buffers (BatchNorm statistics) stay each rank's own.
"""

from __future__ import annotations

from typing import Any

import torch

from .objective_step import ObjectiveStep

__all__ = ["DistributedObjectiveStep"]


class DistributedObjectiveStep(ObjectiveStep):
    def __init__(self, *args: Any, collective: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.collective = collective
        self.world_size = int(collective.world_size)
        self.ddp_net = collective.wrap(self.net)  # broadcasts rank 0's weights
        self.stop_flag = 0.0
        self.stop_agreed = False
        self._since_check = 0
        every = getattr(collective, "stop_check_every", None)
        if every is None:
            every = 1 if next(self.net.parameters()).device.type == "cpu" else 8
        self.stop_check_every = int(every)

    def _union(self, sums: list[tuple[torch.Tensor, Any]]) -> list[tuple[torch.Tensor, Any]]:
        device = self.device
        parts = [n.reshape(()) for n, _ in sums]
        parts += [
            torch.as_tensor(d, dtype=torch.float32, device=device).reshape(()) for _, d in sums
        ]
        parts.append(torch.tensor(self.stop_flag, dtype=torch.float32, device=device))
        packed = self.collective.sum(torch.stack(parts).float())
        self._since_check += 1
        if not self.stop_agreed and self._since_check >= self.stop_check_every:
            self._since_check = 0
            self.stop_agreed = bool(packed[-1] > 0)
        k = len(sums)
        return [(packed[i], packed[k + i]) for i in range(k)]

    def _sync_gradients(self) -> None:
        params = self.updater.params
        for p in params:
            if p.grad is None:  # every rank must send the same layout
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        self.collective.sum(flat)
        offset = 0
        for p in params:
            n = p.grad.numel()
            p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
            offset += n

    def _union_records(self, sums: dict[str, tuple[Any, Any]]) -> dict[str, tuple[Any, Any]]:
        if not sums:
            return sums
        names = list(sums)
        packed = torch.stack(
            [
                torch.as_tensor(v, dtype=torch.float32, device=self.device).reshape(())
                for n in names
                for v in sums[n]
            ]
        )
        packed = self.collective.sum(packed)
        return {n: (packed[2 * i], packed[2 * i + 1]) for i, n in enumerate(names)}
