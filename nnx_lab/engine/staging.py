"""Batches staged on the device ahead of time: the next batch's copy overlaps this step.

On CUDA, while the step on batch k runs, batch k+1 is already on its way to the device:
pinned host memory, ``non_blocking=True``, on a stream of its own. ``staged`` keeps one
batch in flight, in the source's order; each phase (an epoch's training, a validation
pass, an evaluation) builds its own and drops it when the phase ends, so training's
and validation's staged batches never coexist. Elsewhere (CPU, MPS) it is the source
itself: no thread, no copy, no extra reference.

The device side is a ``DeviceHook`` (start a copy; make the compute stream wait for it),
so the order and the phase boundaries are tested on CPU with a fake hook.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

import torch

__all__ = ["CudaHook", "DeviceHook", "device_hook", "staged", "staging_note"]


class DeviceHook(Protocol):
    """What staging needs from a device."""

    def start(self, batch: Any) -> Any:
        """Start moving ``batch`` to the device; returns a handle on the copy (the batch
        is not to be used yet)."""
        ...

    def ready(self, moved: Any) -> Any:
        """Order the compute stream after the copy ``moved`` (what ``start`` returned);
        returns the batch on the device, for use."""
        ...


def _each_tensor(batch: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """``fn`` on the tensors of a batch (a tensor, or a tuple / list of them); anything
    else passes through for the step's own checks to name."""
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, tuple | list):
        items = [fn(t) if isinstance(t, torch.Tensor) else t for t in batch]
        if hasattr(batch, "_fields"):  # a named tuple takes its fields one by one
            return type(batch)(*items)
        return items if type(batch) is list else tuple(items)
    return batch


class CudaHook:
    """Copies on a side stream from pinned memory; the compute stream waits for each
    batch's copy (an event recorded after it) before the step that uses it."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device)

    def _move(self, t: torch.Tensor) -> torch.Tensor:
        if t.device.type == "cpu" and not t.is_pinned():
            t = t.pin_memory()
        return t.to(self.device, non_blocking=True)

    def start(self, batch: Any) -> tuple[Any, torch.cuda.Event]:
        with torch.cuda.stream(self.stream):
            moved = _each_tensor(batch, self._move)
            # an event per batch: waiting for the whole side stream would also wait for
            # the batch started after this one, whose copy is meant to overlap the step
            done = torch.cuda.Event()
            done.record(self.stream)
        return moved, done

    def ready(self, moved: tuple[Any, torch.cuda.Event]) -> Any:
        batch, done = moved
        current = torch.cuda.current_stream(self.device)
        current.wait_event(done)
        # the copies were allocated on the side stream: tell the allocator that the
        # compute stream uses them, so their memory is not reused while a step reads it
        _each_tensor(batch, lambda t: t.record_stream(current) if t.is_cuda else None)
        return batch


_hooks: dict[torch.device, CudaHook] = {}


def device_hook(device: Any) -> DeviceHook | None:
    """The hook that stages batches for ``device``: CUDA only (one side stream per
    device, reused by every phase); None elsewhere."""
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if device not in _hooks:
        _hooks[device] = CudaHook(device)
    return _hooks[device]


def staging_note(device: Any) -> str:
    """What staging does on ``device``, in words (the plans' binding report)."""
    kind = torch.device(getattr(device, "value", device)).type
    if kind == "cuda":
        return "cuda: next batch staged on a side stream (pinned memory, non_blocking)"
    return f"off: {kind}"


def staged(source: Iterable[Any], hook: DeviceHook | None) -> Iterator[Any]:
    """``source``'s batches with the next one always started on the device; without a
    hook, ``source``'s own iterator."""
    it = iter(source)
    if hook is None:
        return it
    return _one_ahead(it, hook)


def _one_ahead(it: Iterator[Any], hook: DeviceHook) -> Iterator[Any]:
    try:
        ahead = hook.start(next(it))
    except StopIteration:
        return
    while True:
        # Fetch and start the next batch before handing out this one, so its copy
        # runs during this one's step. A failure fetching it belongs to the next
        # batch: this one is still handed out, the failure raised when asked for it.
        current = ahead
        failure: BaseException | None = None
        try:
            ahead = hook.start(next(it))
            more = True
        except StopIteration:
            more = False
        except Exception as exc:
            failure, more = exc, False
        yield hook.ready(current)
        if failure is not None:
            raise failure
        if not more:
            return
