"""``writer_only(callback)``: a logger that writes on rank 0 only (docs/logging.md).

Every rank of a data-parallel run attaches the same callbacks (EarlyStopping must decide
the same on all of them), so a logger such as ``TensorBoardCallback`` would write one
copy per rank. Wrapped, it hears the stream on rank 0 and nothing elsewhere: the rank is
read when the run attaches its sinks, after the process group exists.
"""

from __future__ import annotations

from typing import Any

from ..engine.events import HOOKS
from ..engine.sinks import NNX_HOOKS, check_callback, overrides
from ._group import rank

__all__ = ["writer_only"]


class _WriterOnly:
    def __init__(self, callback: Any) -> None:
        check_callback(callback)
        self.callback = callback
        self.active = True
        names = [n for n in (*HOOKS, "on_detach") if callable(getattr(callback, n, None))]
        names += [n for n in NNX_HOOKS if overrides(callback, n)]
        for name in names:
            setattr(self, name, self._forward(name))

    def _forward(self, name: str) -> Any:
        target = getattr(self.callback, name)

        def forward(*args: Any) -> None:
            if self.active:
                target(*args)

        forward.__name__ = name
        return forward

    def on_attach(self, control: Any) -> None:
        self.active = rank() == 0
        attach = getattr(self.callback, "on_attach", None)
        if self.active and callable(attach):
            attach(control)

    def __repr__(self) -> str:
        return f"writer_only({self.callback!r})"


def writer_only(callback: Any) -> Any:
    """``callback`` wrapped to hear the event stream on rank 0 only (every hook, NNx's
    included); on a single process it is the callback as it is."""
    return _WriterOnly(callback)
