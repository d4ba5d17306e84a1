"""Batch adapters (§2.14): how a batch reaches your module's ``forward`` and how its
output becomes the tensor the loss takes.

An ``(x, y)`` batch reaches ``forward(x)`` with no adapter. ``PositionalInputs(n)``
takes ``(x1, ..., xn, y)`` batches to ``forward(x1, ..., xn)``; ``KeywordInputs(names,
target=...)`` takes dict batches to ``forward(**{name: batch[name]})``. ``output`` picks
the tensor out of what ``forward`` returns (a dict key, an attribute, a tuple index), or
override ``output()`` in a subclass. An adapter is not part of the run id: it moves
tensors, it does not change what is computed.

Inside the engine an adapted batch is ``(Inputs, y)``: ``Inputs`` moves to a device like a
tensor and calls the network (``forward(net, X)``), so the loop, evaluation and
prediction never ask which adapter is in use.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError, DataError
from .params_base import is_int

__all__ = [
    "AdaptedBatches",
    "BatchAdapter",
    "Inputs",
    "KeywordInputs",
    "PositionalInputs",
    "adapt_inputs",
    "adapt_source",
    "describe_output",
    "forward",
    "unwrap_source",
]


def describe_output(out: Any) -> str:
    if isinstance(out, torch.Tensor):
        return f"a tensor of shape {tuple(out.shape)}"
    if isinstance(out, Mapping):
        return f"a {type(out).__name__} with keys {sorted(map(str, out))}"
    if isinstance(out, tuple | list):
        return f"a {type(out).__name__} of {len(out)} items"
    return f"a {type(out).__module__}.{type(out).__qualname__}"


def _check_output_key(output: object) -> object:
    if (
        output is None
        or isinstance(output, str)
        or (is_int(output) and not isinstance(output, bool))
    ):
        return output
    raise ConfigError(
        "output",
        output,
        "pass a dict key or attribute name ('logits'), a tuple index (0), or None",
    )


class BatchAdapter:
    """The base adapter: ``(x, y)`` batches, a tensor output. Subclass it and override
    ``split`` (batch -> (args, kwargs, target)) or ``output`` (forward's result ->
    tensor) for anything else."""

    def __init__(self, *, output: str | int | None = None) -> None:
        self.output_key = _check_output_key(output)

    def split(self, batch: Any) -> tuple[tuple[Any, ...], dict[str, Any], Any]:
        if not isinstance(batch, tuple | list) or len(batch) != 2:
            raise DataError(
                "batch",
                f"is a {type(batch).__name__}, not an (X, y) pair",
                "yield (inputs, targets) pairs, or pass batch_adapter=PositionalInputs(n) / "
                "KeywordInputs(names, target=...)",
            )
        return (batch[0],), {}, batch[1]

    def output(self, out: Any) -> torch.Tensor:
        """The tensor the loss and the metrics take from what ``forward`` returned."""
        key = self.output_key
        if key is not None:
            if isinstance(out, Mapping) and key in out:
                out = out[key]
            elif isinstance(key, str) and hasattr(out, key):
                out = getattr(out, key)
            elif (
                isinstance(key, int)
                and isinstance(out, tuple | list)
                and -len(out) <= key < len(out)
            ):
                out = out[key]
            else:
                raise DataError(
                    "batch_adapter.output",
                    f"forward returned {describe_output(out)}, which has no {key!r}",
                    "name a key, attribute or index it has: output='logits' or output=0",
                )
        if not isinstance(out, torch.Tensor):
            raise DataError(
                "batch_adapter.output",
                f"forward returned {describe_output(out)}, not a tensor",
                "pick the logits: batch_adapter=PositionalInputs(output='logits') (a key or "
                "attribute), output=0 (a tuple index), or a BatchAdapter subclass whose "
                "output(out) returns the tensor",
            )
        return out

    def identity(self) -> dict[str, Any]:
        """How the adapter reads batches, for records (never the run id)."""
        return {"type": type(self).__qualname__, "output": self.output_key}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.identity()})"


class PositionalInputs(BatchAdapter):
    """``(x1, ..., xn, y)`` batches reach ``forward(x1, ..., xn)``."""

    def __init__(self, n_inputs: int = 1, *, output: str | int | None = None) -> None:
        super().__init__(output=output)
        if not is_int(n_inputs) or isinstance(n_inputs, bool) or int(n_inputs) < 1:
            raise ConfigError("PositionalInputs.n_inputs", n_inputs, "pass an integer >= 1")
        self.n_inputs = int(n_inputs)

    def split(self, batch: Any) -> tuple[tuple[Any, ...], dict[str, Any], Any]:
        n = self.n_inputs
        if not isinstance(batch, tuple | list) or len(batch) != n + 1:
            got = f"{len(batch)} items" if isinstance(batch, tuple | list) else type(batch).__name__
            raise DataError(
                "batch",
                f"is {got}, not {n} inputs and a target",
                f"yield (x1, ..., x{n}, y) tuples, or set PositionalInputs(n_inputs=...)",
            )
        return tuple(batch[:n]), {}, batch[n]

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "n_inputs": self.n_inputs}


class KeywordInputs(BatchAdapter):
    """Dict batches: ``forward(**{name: batch[name] for name in names})``, the target
    ``batch[target]``."""

    def __init__(
        self, names: Sequence[str], target: str = "labels", *, output: str | int | None = None
    ) -> None:
        super().__init__(output=output)
        if isinstance(names, str) or not isinstance(names, Sequence) or not names:
            raise ConfigError(
                "KeywordInputs.names", names, "pass a tuple of forward's argument names"
            )
        for name in names:
            if not isinstance(name, str) or not name.isidentifier():
                raise ConfigError(
                    "KeywordInputs.names", list(names), f"{name!r} is not an argument name"
                )
        if not isinstance(target, str) or not target:
            raise ConfigError("KeywordInputs.target", target, "pass the batch key of the targets")
        if target in names:
            raise ConfigError(
                "KeywordInputs.target", target, "the target must not also be an input name"
            )
        self.names, self.target = tuple(names), target

    def split(self, batch: Any) -> tuple[tuple[Any, ...], dict[str, Any], Any]:
        if not isinstance(batch, Mapping):
            raise DataError(
                "batch",
                f"is a {type(batch).__name__}, not a dict",
                "yield dicts of tensors (KeywordInputs reads batches by key)",
            )
        missing = [k for k in (*self.names, self.target) if k not in batch]
        if missing:
            raise DataError(
                "batch",
                f"has keys {sorted(map(str, batch))} but not {missing}",
                "yield every name KeywordInputs(names, target=...) reads",
            )
        return (), {k: batch[k] for k in self.names}, batch[self.target]

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "names": list(self.names), "target": self.target}


def _to(value: Any, device: Any, non_blocking: bool) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=non_blocking)
    return value


class Inputs:
    """One batch's inputs as an adapter read them, bound to it; moves like a tensor."""

    __slots__ = ("adapter", "args", "kwargs")

    def __init__(self, adapter: BatchAdapter, args: tuple[Any, ...], kwargs: dict[str, Any]):
        self.adapter, self.args, self.kwargs = adapter, args, kwargs

    def to(self, device: Any, non_blocking: bool = False) -> Inputs:
        return Inputs(
            self.adapter,
            tuple(_to(a, device, non_blocking) for a in self.args),
            {k: _to(v, device, non_blocking) for k, v in self.kwargs.items()},
        )

    def tensors(self) -> list[torch.Tensor]:
        return [v for v in (*self.args, *self.kwargs.values()) if isinstance(v, torch.Tensor)]

    @property
    def shape(self) -> torch.Size:
        """The first tensor's shape (its rows are the batch's rows)."""
        found = self.tensors()
        return found[0].shape if found else torch.Size([0])

    def rows(self, n: int) -> Inputs:
        """The first ``n`` rows of every tensor input (a probe's sample)."""
        cut = lambda v: v[:n] if isinstance(v, torch.Tensor) and v.ndim else v  # noqa: E731
        return Inputs(
            self.adapter,
            tuple(cut(a) for a in self.args),
            {k: cut(v) for k, v in self.kwargs.items()},
        )

    def call(self, net: torch.nn.Module) -> torch.Tensor:
        return self.adapter.output(net(*self.args, **self.kwargs))


def forward(net: torch.nn.Module, X: Any) -> Any:
    """``net(X)`` for a tensor; the adapter's call for adapted inputs."""
    if type(X) is Inputs:
        return X.call(net)
    return net(X)


class AdaptedBatches:
    """A batch source read through an adapter: yields ``(Inputs, y)``.

    Everything else (its length, generator, sampler, dataset) is the source's, so the
    resume contract, the first-batch checks and the data identity see the source.
    """

    def __init__(self, source: Iterable[Any], adapter: BatchAdapter) -> None:
        self.source, self.adapter = source, adapter

    def __iter__(self) -> Iterator[tuple[Inputs, Any]]:
        adapter = self.adapter
        for batch in self.source:
            args, kwargs, target = adapter.split(batch)
            yield Inputs(adapter, args, kwargs), target

    def __len__(self) -> int:
        return len(self.source)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        if name in ("source", "adapter"):  # not set yet (copy, unpickle): no recursion
            raise AttributeError(name)
        return getattr(self.source, name)


def adapt_source(source: Any, adapter: BatchAdapter | None) -> Any:
    """``source`` read through ``adapter`` (unchanged without one, or when it is a
    tensor, an array or already adapted)."""
    if adapter is None or source is None or isinstance(source, AdaptedBatches):
        return source
    if isinstance(source, torch.Tensor) or not isinstance(source, Iterable):
        return source
    if isinstance(source, str | bytes):
        return source
    return AdaptedBatches(source, adapter)


def adapt_inputs(X: Any, adapter: BatchAdapter | None, chunk: int = 4096) -> Any:
    """What to predict on, read through ``adapter``: a tensor (or array) is one input,
    split into chunks; a loader yields batches the adapter reads."""
    if adapter is None or not isinstance(X, torch.Tensor | np.ndarray):
        return adapt_source(X, adapter)
    if isinstance(adapter, KeywordInputs) or getattr(adapter, "n_inputs", 1) != 1:
        raise ConfigError(
            "X",
            f"a {type(X).__name__}",
            f"{adapter!r} reads several inputs: pass a loader (or a list) of the batches it reads",
        )
    rows = torch.as_tensor(X)
    return AdaptedBatches([(part, None) for part in rows.split(chunk)], adapter)


def unwrap_source(source: Any) -> Any:
    return source.source if isinstance(source, AdaptedBatches) else source
