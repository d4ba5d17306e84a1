"""Loaders that partition data across ranks.

``train_loader``: each epoch one seeded permutation of the whole data set is cut into
*global* batches of ``batch_size x world_size`` rows, and each rank takes its slice of
each. The union of the ranks' batches at every step is then exactly the global batch a
single process with ``batch_size x world_size`` would take from the same permutation,
so with the engine's union weighting the updates are the same. The final, incomplete
global batch is shared out as evenly as possible ("pad": a rank that would get no row
repeats one, the only case that departs from the union) or dropped ("drop").

``validation_loader``: contiguous shards, no padding, so the summed metrics count every
sample exactly once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader

from ..errors import ConfigError
from ._group import rank as _rank
from ._group import world_size as _world_size

__all__ = ["ShardBatchSampler", "ValidationShardSampler", "train_loader", "validation_loader"]

POLICIES = ("pad", "drop")


class ShardBatchSampler:
    """Yields this rank's slice of each global batch of a seeded permutation."""

    nnx_index_batches = True  # lists of dataset indices only: the engine's fast path

    def __init__(
        self,
        n: int,
        batch_size: int,
        rank: int,
        world: int,
        policy: str,
        seed: int,
        shuffle: bool = True,
    ) -> None:
        self.n, self.batch_size, self.rank, self.world = n, batch_size, rank, world
        self.policy, self.shuffle = policy, shuffle
        self.generator = torch.Generator().manual_seed(seed)

    def _global_batches(self) -> int:
        size = self.batch_size * self.world
        return self.n // size if self.policy == "drop" else math.ceil(self.n / size)

    def __len__(self) -> int:
        return self._global_batches()

    def __iter__(self) -> Iterator[list[int]]:
        order = (
            torch.randperm(self.n, generator=self.generator).tolist()
            if self.shuffle
            else list(range(self.n))
        )
        size = self.batch_size * self.world
        for b in range(self._global_batches()):
            chunk = order[b * size : (b + 1) * size]
            if len(chunk) == size:
                yield chunk[self.rank * self.batch_size : (self.rank + 1) * self.batch_size]
                continue
            # the last, incomplete global batch: sizes differ by at most one row
            base, extra = divmod(len(chunk), self.world)
            start = self.rank * base + min(self.rank, extra)
            mine = chunk[start : start + base + (1 if self.rank < extra else 0)]
            yield mine or chunk[:1]


class ValidationShardSampler:
    """Contiguous batches of this rank's shard; shards cover every index once."""

    nnx_index_batches = True  # lists of dataset indices only: the engine's fast path

    def __init__(self, n: int, batch_size: int, rank: int, world: int) -> None:
        per, extra = divmod(n, world)
        start = rank * per + min(rank, extra)
        self.indices = list(range(start, start + per + (1 if rank < extra else 0)))
        self.batch_size = batch_size

    def __len__(self) -> int:
        return math.ceil(len(self.indices) / self.batch_size)

    def __iter__(self) -> Iterator[list[int]]:
        for i in range(0, len(self.indices), self.batch_size):
            yield self.indices[i : i + self.batch_size]


def _dataset_size(dataset: Any, field: str) -> int:
    try:
        return len(dataset)
    except TypeError:
        raise ConfigError(field, type(dataset).__name__, "pass a map-style dataset") from None


def _positive(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(field, value, "pass a positive integer")
    return value


def train_loader(
    dataset: Any,
    batch_size: int,
    policy: str = "pad",
    seed: int = 0,
    *,
    shuffle: bool = True,
    rank: int | None = None,
    world_size: int | None = None,
    **loader_kwargs: Any,
) -> DataLoader:
    """This rank's training loader: ``batch_size`` rows per rank and step (the global
    batch is ``batch_size x world_size``). Call after ``init_process_group``;
    ``rank`` / ``world_size`` default to the group's (given, they describe a rank of a
    run that has not started, e.g. to compute its id)."""
    _positive(batch_size, "distributed.train_loader.batch_size")
    if policy not in POLICIES:
        raise ConfigError("distributed.train_loader.policy", policy, "use 'pad' or 'drop'")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError("distributed.train_loader.seed", seed, "pass an integer seed")
    n = _dataset_size(dataset, "distributed.train_loader.dataset")
    world = _world_size() if world_size is None else world_size
    me = _rank() if rank is None else rank
    sampler = ShardBatchSampler(n, batch_size, me, world, policy, seed, shuffle)
    loader = DataLoader(dataset, batch_sampler=sampler, **loader_kwargs)
    # What the run id knows of it: the whole data set (hashed by the engine), and the
    # global batch, the policy and the seed; not the rank, nor the world size.
    loader.nnx_identity = {  # type: ignore[attr-defined]
        "distributed": "train",
        "global_batch": batch_size * world,
        "policy": policy,
        "seed": seed,
        "shuffle": shuffle,
    }
    loader.nnx_distributed = True  # type: ignore[attr-defined]
    return loader


def validation_loader(
    dataset: Any,
    batch_size: int,
    *,
    rank: int | None = None,
    world_size: int | None = None,
    **loader_kwargs: Any,
) -> DataLoader:
    """This rank's validation shard (no padding: every sample is counted once)."""
    _positive(batch_size, "distributed.validation_loader.batch_size")
    n = _dataset_size(dataset, "distributed.validation_loader.dataset")
    world = _world_size() if world_size is None else world_size
    me = _rank() if rank is None else rank
    sampler = ValidationShardSampler(n, batch_size, me, world)
    loader = DataLoader(dataset, batch_sampler=sampler, **loader_kwargs)
    loader.nnx_identity = {"distributed": "validation", "batch_size": batch_size}  # type: ignore[attr-defined]
    loader.nnx_distributed = True  # type: ignore[attr-defined]
    return loader
