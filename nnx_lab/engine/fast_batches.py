"""The fast path for tensor data: one indexing per batch instead of one per sample.

A ``DataLoader`` over a ``TensorDataset`` with the default collate spends a small step
fetching samples one by one and stacking them. When the engine sees exactly that shape
(``fast_path_applies``), ``batches`` draws the batch indices from the loader's own
batch sampler, in the loader's own order of random draws, and indexes each tensor
once with an index tensor. The batches are the loader's, bit for bit: same values,
dtype, shape and order, and the generators (the loader's, the sampler's and torch's
global stream) are left as iterating the loader leaves them, so a run id, a resume
and a warm start see no difference.

Anything else (a custom collate, workers, an iterable or dict dataset, a ``Subset``,
a custom batch sampler that does not declare ``nnx_index_batches = True``, a
``DataLoader`` subclass) is iterated as it is.
``set_fast_batches(False)`` turns the path off for benchmarks and debugging.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, TensorDataset
from torch.utils.data._utils.collate import default_collate

__all__ = ["batches", "fast_path_applies", "set_fast_batches"]

_enabled = True


def set_fast_batches(enabled: bool | None = None) -> bool:
    """Turn the batched fast path for tensor data on or off (None: only read it);
    returns the value it had before. On by default; the results are the same either
    way, only the time per batch differs."""
    global _enabled
    previous = _enabled
    if enabled is not None:
        if not isinstance(enabled, bool):
            raise TypeError(f"set_fast_batches(enabled={enabled!r}): expected True, False or None")
        _enabled = enabled
    return previous


def fast_path_applies(loader: Any) -> bool:
    """Whether ``loader`` has the one shape whose batches ``batches`` rebuilds exactly."""
    # Exact types only: a subclass may override __iter__, __getitem__ or the batching.
    if type(loader) is not DataLoader:
        return False
    dataset = loader.dataset
    if type(dataset) is not TensorDataset or not dataset.tensors:
        return False
    if loader.collate_fn is not default_collate or loader.num_workers != 0:
        return False
    if loader.timeout != 0:
        return False  # torch's single-process iterator refuses it: let it say so
    if not _index_batches(loader.batch_sampler):
        return False  # None (no automatic batching) or a custom batch sampler
    # default_collate refuses these (nested, sparse) or would not stack them as-is
    return all(t.layout is torch.strided and not t.is_nested for t in dataset.tensors)


def _index_batches(batch_sampler: Any) -> bool:
    """A plain ``BatchSampler``, or a batch sampler whose class declares
    ``nnx_index_batches = True``: it yields lists of dataset indices and nothing else
    (the data-parallel shard samplers do)."""
    if type(batch_sampler) is BatchSampler:
        return True
    return getattr(type(batch_sampler), "nnx_index_batches", False) is True


def batches(loader: Any) -> Any:
    """An iterator over ``loader``'s batches: the fast path when it applies and is on,
    else ``iter(loader)``."""
    if _enabled and fast_path_applies(loader):
        return _indexed(loader)
    return iter(loader)


def _indexed(loader: DataLoader) -> Iterator[list[torch.Tensor]]:
    # iter(loader) does these two things, in this order, before its first batch: it
    # creates the batch sampler's iterator (a generator: no draw yet) and draws the
    # iterator's base seed from the loader's generator, or torch's global stream when
    # there is none. The sampler's own draws (a RandomSampler's seed or permutation)
    # happen at the first batch, as here.
    sampler_iter = iter(loader.batch_sampler)
    torch.empty((), dtype=torch.int64).random_(generator=loader.generator)
    return _fetch(loader, sampler_iter)


def _fetch(loader: DataLoader, sampler_iter: Iterator[Any]) -> Iterator[list[torch.Tensor]]:
    tensors = loader.dataset.tensors
    # The loader pins each batch when it is asked to and an accelerator is present.
    pin = bool(loader.pin_memory) and torch.accelerator.is_available()
    for index in sampler_iter:
        idx = _index_tensor(index)
        # default_collate stacks into a new contiguous tensor; indexing gives the same
        # values in one call (contiguous: the stack's strides, whatever the source's)
        batch = [_take(t, idx) for t in tensors]
        if pin:
            batch = [t.pin_memory() for t in batch]
        yield batch


def _take(t: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    # index_select skips the parsing of a subscript (about a µs a tensor); a tensor
    # away from the indices' device takes the subscript, which moves them
    if t.device == idx.device:
        return torch.index_select(t, 0, idx).contiguous()
    return t[idx].contiguous()


def _index_tensor(index: Any) -> torch.Tensor:
    """The batch's indices as an int64 tensor. A list of Python ints (what torch's
    samplers yield) goes through NumPy, about 2 µs a batch faster than
    ``torch.as_tensor`` on a list (the same tensor); anything else (tensors, NumPy
    integers) as torch converts it."""
    if type(index) is list and all(type(i) is int for i in index):
        return torch.from_numpy(np.array(index, dtype=np.int64))
    return torch.as_tensor(index, dtype=torch.long)
