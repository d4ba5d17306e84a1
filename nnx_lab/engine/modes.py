"""Each module's own train/eval mode, captured and put back.

``net.train(was_training)`` would set every submodule to one mode and lose a deliberate
mix (a frozen BatchNorm in eval inside a training network); these helpers restore each
module exactly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

__all__ = ["module_modes", "preserved_modes", "restore_modes"]


def module_modes(net: torch.nn.Module) -> list[bool]:
    return [m.training for m in net.modules()]


def restore_modes(net: torch.nn.Module, modes: list[bool]) -> None:
    for module, training in zip(net.modules(), modes, strict=True):
        module.training = training


@contextlib.contextmanager
def preserved_modes(net: torch.nn.Module) -> Iterator[None]:
    modes = module_modes(net)
    try:
        yield
    finally:
        restore_modes(net, modes)
