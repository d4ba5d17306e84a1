"""SimCLR (Chen et al. 2020): a contrastive step on paired views, NT-Xent loss (§3.4).

**The batch** is ``(view_a, view_b)``, ``(view_a, view_b, *rest)`` or
``((view_a, view_b), *rest)``, whose rest (labels, ids) the step ignores: two tensors
of one shape ``(N, ...)``, row ``i`` of each a different augmentation of the same
item (the data pipeline makes the views, so the step draws nothing). The network
maps a view to an embedding ``(N, d)`` (encoder plus projection head). NT-Xent, over
the ``2N`` embeddings ``z`` normalized to unit length:

    loss = mean over i of  −log( exp(z_i·z_p(i) / τ) / Σ_{k ≠ i} exp(z_i·z_k / τ) )

where ``p(i)`` is the other view of ``i``'s item: each embedding's positive is its
partner and its negatives are the other ``2N − 2`` embeddings of the batch.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
import torch.nn.functional as F

from ..engine.adapters import forward
from ..engine.custom_step import full_precision_only
from ..engine.edp import EDP
from ..errors import ConfigError, DataError
from ._step import apply_update, check_one_batch_per_update, peek_batch, step_device

__all__ = ["nt_xent_loss", "paired_views", "simclr_train_step_factory"]


def paired_views(batch: Any, where: str = "batch") -> tuple[torch.Tensor, torch.Tensor]:
    """The two views of a SimCLR batch, or a refusal naming what the batch holds."""
    if isinstance(batch, tuple | list) and batch and isinstance(batch[0], tuple | list):
        batch = batch[0]  # ((view_a, view_b), labels)
    if isinstance(batch, tuple | list) and len(batch) >= 2:
        a, b = batch[0], batch[1]
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape or a.dim() < 2 or a.shape[0] < 2:
                raise DataError(
                    where,
                    f"the views have shapes {tuple(a.shape)} and {tuple(b.shape)}",
                    "two views of one shape (N, ...) with N >= 2: row i of each is an "
                    "augmentation of item i",
                )
            return a, b
    kind = type(batch).__name__
    size = f" of {len(batch)} items" if isinstance(batch, tuple | list) else ""
    raise DataError(
        where,
        f"the batch is a {kind}{size}, not paired views",
        "yield (view_a, view_b), (view_a, view_b, labels) or ((view_a, view_b), labels): "
        "two augmentations of the "
        "same N items, one tensor each",
    )


def nt_xent_loss(z_a: torch.Tensor, z_b: torch.Tensor, temperature: float) -> torch.Tensor:
    """The NT-Xent loss of two ``(N, d)`` embedding batches (the mean over 2N rows)."""
    n = z_a.shape[0]
    z = F.normalize(torch.cat([z_a, z_b]).float(), dim=1)
    sim = (z @ z.T) / temperature
    self_pairs, partner = _pairs(n, z.device)
    return F.cross_entropy(sim.masked_fill(self_pairs, float("-inf")), partner)


@functools.lru_cache(maxsize=8)
def _pairs(n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The diagonal mask and each row's partner for 2n embeddings: the same for every
    batch of n items, so made once (read only: masked_fill and cross_entropy copy)."""
    self_pairs = torch.eye(2 * n, dtype=torch.bool, device=device)
    partner = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(device)
    return self_pairs, partner


class SimCLRStep:
    """The SimCLR ``train_step_fn``: both views in one forward, NT-Xent, one update."""

    owns_batches = True  # (view_a, view_b) is two views, not inputs and targets

    def __init__(self, temperature: Any) -> None:
        ok = isinstance(temperature, int | float) and not isinstance(temperature, bool)
        if not ok or not math.isfinite(temperature) or temperature <= 0:
            raise ConfigError(
                "simclr_train_step_factory(temperature)",
                temperature,
                "a finite temperature > 0 (0.1 to 0.5 is usual)",
            )
        self.temperature = float(temperature)
        full_precision_only(self)

    def __call__(self, ctx: Any) -> EDP:
        device = step_device(ctx)
        a, b = paired_views(ctx.batch, "NNTrainParams.train_loader")
        n = a.shape[0]
        # one forward of both views: BatchNorm sees the 2N rows together, as in SimCLR
        z = forward(ctx.model, torch.cat([a, b]).to(device))
        if z.dim() != 2:
            raise DataError(
                "the network's output",
                f"a tensor of shape {tuple(z.shape)}",
                "SimCLR needs embeddings (N, d): end the network with a projection head",
            )
        loss = nt_xent_loss(z[:n], z[n:], self.temperature)
        apply_update(ctx, loss)
        return EDP(loss=float(loss.detach()), samples=n)

    def run_identity(self) -> dict[str, Any]:
        return {"temperature": self.temperature}

    def check(self, model: Any, params: Any) -> None:
        check_one_batch_per_update(params, "simclr_train_step_factory")
        paired_views(peek_batch(params), "NNTrainParams.train_loader")


def simclr_train_step_factory(temperature: float = 0.5) -> SimCLRStep:
    """A ``train_step_fn`` training the network's embeddings with NT-Xent at
    ``temperature`` on ``(view_a, view_b[, ...])`` batches."""
    return SimCLRStep(temperature)
