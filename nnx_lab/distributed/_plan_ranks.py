"""A plan's run as one rank of a data-parallel run: the same model, the data shared out.

The plan's training loader gives the data set, the *global* batch size (a launched run
of N processes takes the same batches as the plan's single-process fit would with the
same shard order) and whether it shuffles; each rank gets ``batch / N`` rows a step.
"""

from __future__ import annotations

from typing import Any

from torch.utils.data import DataLoader, RandomSampler

from ..errors import ConfigError
from ._loaders import train_loader, validation_loader

__all__ = ["rank_params"]


def _dataset_and_batch(loader: Any, role: str) -> tuple[Any, int, bool]:
    if not isinstance(loader, DataLoader) or loader.batch_size is None:
        raise ConfigError(
            f"plan data.{role}",
            type(loader).__name__,
            "a launched plan's data factory must return a DataLoader(dataset, batch_size=...) "
            "so its data can be shared out across the processes",
        )
    return loader.dataset, int(loader.batch_size), isinstance(loader.sampler, RandomSampler)


def rank_params(params: Any, world_size: int, rank: int | None = None) -> Any:
    """``params`` with its loaders replaced by this rank's share (see the module)."""
    dataset, batch, shuffle = _dataset_and_batch(params.train_loader, "train")
    if batch % world_size:
        raise ConfigError(
            "nproc (world size)",
            world_size,
            f"the plan's batch of {batch} rows does not split across {world_size} processes; "
            f"pick a batch size divisible by it",
        )
    kw = {} if rank is None else {"rank": rank, "world_size": world_size}
    train = train_loader(dataset, batch // world_size, seed=params.seed, shuffle=shuffle, **kw)
    val = None
    if params.val_loader is not None:
        vset, vbatch, _ = _dataset_and_batch(params.val_loader, "val")
        val = validation_loader(vset, vbatch, **kw)
    return params.replace(train_loader=train, val_loader=val)
