"""Training across processes: what the loop needs from torch.distributed.

A ``Collective`` (``nnx_lab.distributed.DDP()`` is the one users make) gives the rank,
the world size, a summing all-reduce, and the network wrapped in torch's
``DistributedDataParallel``. With it, each optimizer update equals the update on the
union of the ranks' batches, also when the ranks' batches differ in size: every rank
backpropagates its summed loss and, after DDP's averaging of the gradients, divides them
by ``N / world``, where ``N`` is the union's weight (valid targets, output elements or
rows): the gradient of the union's mean loss. One small all-reduce per update carries
the ranks' summed losses, their weights and their stop requests; it starts before the
backward pass and overlaps it, and nothing in it is read on the host but the stop flag,
every ``stop_check_every`` steps (every step on the CPU; on a GPU a read is a sync), so
every rank records the same loss and stops at the same step. Metrics are summed across
ranks before they are finalized.

A rank that fails cannot reach the others through the group (they wait in a collective
it will not join): it announces its failure where every rank can read it
(``announce_failure``; ``DDP`` uses torchrun's store) and leaves. The others'
collectives break when it is gone, and each ends with the first failing rank's reason
(``RankFailedError``), doing no further collective (``rank_failure``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol, runtime_checkable

import torch

from ..errors import NNxError
from .adapters import forward
from .aux_loss import detached, with_term
from .train_step import StepOutput, TrainStep

__all__ = ["Collective", "DistributedTrainStep", "RankFailedError", "rank_failure"]


@runtime_checkable
class Collective(Protocol):
    rank: int
    world_size: int

    def wrap(self, net: torch.nn.Module) -> torch.nn.Module:
        """The network as the ranks train it (DistributedDataParallel)."""

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """All-reduce ``tensor`` in place (SUM across ranks) and return it."""

    def sum_async(self, tensor: torch.Tensor) -> Any:
        """Start an in-place SUM all-reduce; the returned handle's ``wait()`` ends it."""

    def agree(self, message: str | None) -> str | None:
        """Every rank learns the first non-empty ``message`` of any rank (or None)."""

    def barrier(self) -> None: ...

    # Optional (a collective without them announces nothing):
    # announce_failure(error, traceback) -> the first failed rank's record or None,
    # a dict with "rank", "type", "message", "traceback";
    # attach_control(control | None): the loop's control while a run trains.


class RankFailedError(NNxError, RuntimeError):
    """Another rank of a data-parallel run failed first; this rank's own error (a
    collective that broke when that rank left) is its consequence. ``rank``, and
    ``remote_traceback``: the failing rank's traceback."""

    def __init__(self, rank: int, what: str, remote_traceback: str | None = None) -> None:
        super().__init__(f"rank {rank} failed: {what}")
        self.rank, self.what, self.remote_traceback = rank, what, remote_traceback


def rank_failure(
    collective: Any, error: BaseException, traceback: str | None
) -> tuple[BaseException, str | None]:
    """The error (and traceback) this rank's run ends with after ``error``: its own,
    announced to every rank, when it failed first; a ``RankFailedError`` naming the
    rank that failed first (from ``error``) when another one did."""
    announce = getattr(collective, "announce_failure", None)
    if announce is None:
        return error, traceback
    first = announce(error, traceback)
    if first is None or first.get("rank") == int(collective.rank):
        return error, traceback
    cause = RankFailedError(
        int(first["rank"]), f"{first.get('type')}: {first.get('message')}", first.get("traceback")
    )
    cause.__cause__ = error
    return cause, first.get("traceback") or traceback


class DistributedTrainStep(TrainStep):
    """``TrainStep`` for one rank of a data-parallel run."""

    def __init__(self, *args: Any, collective: Collective, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.collective = collective
        self.ddp_net = collective.wrap(self.net)
        self.stop_flag = 0.0  # set by the loop when this rank was asked to stop
        self.stop_agreed = False  # any rank asked; read at the same steps on every rank
        self._since_check = 0
        every = getattr(collective, "stop_check_every", None)
        if every is None:
            every = 1 if next(self.net.parameters()).device.type == "cpu" else 8
        self.stop_check_every = int(every)

    def _weight(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = self.loss
        if loss.per == "target":
            return loss.valid_targets(y).to(torch.float32)
        if loss.per == "element":
            return torch.tensor(float(out.numel()), device=out.device)
        return torch.tensor(float(y.shape[0]), device=out.device)

    def _total(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = self.loss
        return loss.total(out, y) if loss.per != "row" else loss(out, y) * y.shape[0]

    def _start_exchange(self, total: torch.Tensor, weight: torch.Tensor) -> tuple[Any, Any]:
        stats = torch.stack(
            [
                total.detach().float().reshape(()),
                weight.reshape(()).float(),
                torch.tensor(self.stop_flag, device=weight.device),
            ]
        )
        return stats, self.collective.sum_async(stats)

    def _finish_exchange(self, stats: torch.Tensor, work: Any) -> tuple[Any, Any]:
        work.wait()
        self._since_check += 1
        if not self.stop_agreed and self._since_check >= self.stop_check_every:
            self._since_check = 0
            self.stop_agreed = bool(stats[2] > 0)  # the same value on every rank
        return stats[0], stats[1].clamp_min(1.0)

    def __call__(self, X: torch.Tensor, y: torch.Tensor, step_number: int = 0) -> StepOutput:
        self.updater.zero_grad()
        with self._autocast():
            out = forward(self.ddp_net, X)
            total = self._total(out, y)
        weight = self._weight(out, y)
        stats, work = self._start_exchange(total, weight)
        term = self._aux() if self._aux is not None else None
        # DDP averages: sum over ranks / world; the term weighs as this rank's loss does
        self.updater.backward(with_term(total, term, weight))
        union_sum, union_weight = self._finish_exchange(stats, work)
        self.updater.step(union_weight / self.collective.world_size, step_number=step_number)
        preds = self.task.decode(out.detach()) if self._decode else None
        kept = out.detach().float() if self.keep_outputs else None  # declared metrics
        loss = (union_sum / union_weight).detach()
        return StepOutput(loss, preds, y, int(y.shape[0]), kept, detached(term))

    def accumulated(
        self, window: list[tuple[torch.Tensor, torch.Tensor]], step_number: int = 0
    ) -> StepOutput:
        self.updater.zero_grad()
        outs, totals, weights, aux_sum = [], [], [], None
        for i, (X, y) in enumerate(window):
            # gradients are synchronized once, on the window's last micro-batch
            sync = i == len(window) - 1
            context = contextlib.nullcontext() if sync else self.ddp_net.no_sync()
            with context:
                with self.precision.autocast():
                    out = forward(self.ddp_net, X)
                    total = self._total(out, y)
                # weights are known before the exchange: scale after it, unscale nothing
                weight = self._weight(out, y)
                term = self._aux() if self._aux is not None else None
                totals.append(total)
                weights.append(weight)
                outs.append(out)
                if term is not None:  # this rank's records: the row-weighted mean term
                    value = term.value.detach().float() * y.shape[0]
                    aux_sum = {term.name: value if aux_sum is None else aux_sum[term.name] + value}
                if not sync:
                    self.updater.backward(with_term(total, term, weight))
        stats, work = self._start_exchange(
            torch.stack([t.detach().float() for t in totals]).sum(), torch.stack(weights).sum()
        )
        self.updater.backward(with_term(totals[-1], term, weight))
        union_sum, union_weight = self._finish_exchange(stats, work)
        self.updater.step(union_weight / self.collective.world_size, step_number=step_number)
        preds = torch.cat([self.task.decode(o.detach()) for o in outs]) if self._decode else None
        kept = torch.cat([o.detach().float() for o in outs]) if self.keep_outputs else None
        y_all = torch.cat([y for _, y in window])
        aux = None if aux_sum is None else {k: v / y_all.shape[0] for k, v in aux_sum.items()}
        return StepOutput(
            (union_sum / union_weight).detach(), preds, y_all, int(y_all.shape[0]), kept, aux
        )
