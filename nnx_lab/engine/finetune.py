"""Freezing parameters by glob (§3.1): ``freeze``, ``unfreeze``, ``frozen``.

Patterns are ``fnmatch.fnmatchcase`` globs on the dotted names of
``named_parameters()`` (``*`` crosses dots). A pattern that matches no parameter is
refused with the nearest names, before any parameter changes. What is frozen is part
of what a run trains, so ``NNModel.train`` puts the frozen names into the run id.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

import torch

from ..errors import ConfigError
from .param_groups import near_names

__all__ = ["freeze", "frozen", "unfreeze"]


def _matched(module: torch.nn.Module, patterns: tuple[str, ...], verb: str) -> list[torch.Tensor]:
    net = getattr(module, "net", module)  # an NNModel, or the module itself
    if not isinstance(net, torch.nn.Module):
        raise ConfigError("module", type(module).__name__, "pass an nn.Module or an NNModel")
    named = dict(net.named_parameters())
    if not patterns:
        return list(named.values())
    chosen: dict[str, torch.Tensor] = {}
    for pattern in patterns:
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError(
                f"{verb}(pattern)", pattern, "pass globs on dotted names, e.g. 'encoder.*'"
            )
        hits = [n for n in named if fnmatchcase(n, pattern)]
        if not hits:
            near = ", ".join(near_names(pattern, list(named))) or "(the module has none)"
            raise ConfigError(
                f"{verb}(pattern)",
                pattern,
                f"matches no parameter; the nearest names: {near} "
                "(check named_parameters(); '*' crosses dots)",
            )
        chosen.update((n, named[n]) for n in hits)
    return list(chosen.values())


def freeze(module: torch.nn.Module, *patterns: str) -> int:
    """Set ``requires_grad=False`` on the parameters matching any of ``patterns`` (none
    given: every parameter); how many parameters the patterns matched."""
    params = _matched(module, patterns, "freeze")
    for p in params:
        p.requires_grad_(False)
    return len(params)


def unfreeze(module: torch.nn.Module, *patterns: str) -> int:
    """Set ``requires_grad=True`` on the parameters matching any of ``patterns`` (none
    given: every parameter); how many parameters the patterns matched."""
    params = _matched(module, patterns, "unfreeze")
    for p in params:
        p.requires_grad_(True)
    return len(params)


def frozen(module: torch.nn.Module) -> tuple[str, ...]:
    """The dotted names of the frozen parameters, in ``named_parameters()`` order."""
    net = getattr(module, "net", module)
    return tuple(n for n, p in net.named_parameters() if not p.requires_grad)
