"""What every adapter layer shares, and how adapters are put in place.

An adapter layer (LoRA, DoRA, IA3, the bottleneck ``AdapterLayer``, the prefix and
prompt tuners) is an ``nn.Module`` that subclasses ``PeftLayer``: it names its own
trainable tensors (``adapter_tensors``), the base tensors they were trained against
(``base_tensors``: what a saved file's fingerprint covers) and the cells it adds to the
ModelSummary (``summary_columns``, the engine's generic per-module hook).

``wrap_linears`` is the one place a pattern list becomes wrapped layers: every check
(the numbers, each pattern matches an ``nn.Linear``, nothing is wrapped twice) runs
before the first layer is replaced, so a refused call leaves the module as it was.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from fnmatch import fnmatchcase
from typing import Any

import torch
from torch import nn

from ..engine.param_groups import near_names
from ..errors import ConfigError

__all__ = ["PeftLayer", "check_rank", "net_of", "peft_layers", "wrap_linears"]


class PeftLayer(nn.Module):
    """The base of every adapter layer (not used on its own)."""

    adapter_kind = "adapter"
    holds_network = False  # True: the layer wraps a whole network, whose linears stay open

    def adapter_tensors(self) -> dict[str, torch.Tensor]:
        """The trainable adapter tensors, by their names inside this layer."""
        raise NotImplementedError

    def base_tensors(self) -> dict[str, torch.Tensor]:
        """The frozen tensors the adapter modifies, by their names inside this layer."""
        return {}

    def adapter_config(self) -> dict[str, Any]:
        """The layer's settings, as JSON (saved beside its tensors)."""
        return {}

    def summary_columns(self) -> dict[str, str]:
        config = ", ".join(f"{k}={v:g}" for k, v in self.adapter_config().items())
        trained = sum(t.numel() for t in self.adapter_tensors().values())
        return {
            "adapter": f"{self.adapter_kind}({config})" if config else self.adapter_kind,
            "adapter params": f"{trained:,}",
        }


def net_of(module: Any, field: str = "module") -> nn.Module:
    """The network of an ``NNModel`` (its ``.net``) or a bare ``nn.Module``."""
    net = module if isinstance(module, nn.Module) else getattr(module, "net", module)
    if not isinstance(net, nn.Module):
        raise ConfigError(field, type(module).__name__, "pass an nn.Module or an NNModel")
    return net


def peft_layers(module: Any) -> Iterator[tuple[str, PeftLayer]]:
    """Every adapter layer of ``module`` with its dotted path, outermost first."""
    for path, sub in net_of(module).named_modules():
        if isinstance(sub, PeftLayer):
            yield path, sub


def check_rank(r: Any, alpha: Any, dropout: Any, where: str) -> tuple[int, float, float]:
    if not isinstance(r, int) or isinstance(r, bool) or r < 1:
        raise ConfigError(f"{where}.r", r, "pass the rank as a positive int (e.g. 8)")
    if (
        not isinstance(alpha, int | float)
        or isinstance(alpha, bool)
        or not math.isfinite(alpha)
        or alpha <= 0
    ):
        raise ConfigError(f"{where}.alpha", alpha, "pass a positive number (often 2 * r)")
    if not isinstance(dropout, int | float) or isinstance(dropout, bool) or not 0 <= dropout < 1:
        raise ConfigError(f"{where}.dropout", dropout, "pass a probability in [0, 1)")
    return r, float(alpha), float(dropout)


def _linear_names(net: nn.Module) -> list[str]:
    """The names of the plain linears an adapter may wrap: not a wrapped base, not a
    bottleneck's own (a tuner's network is fair game: LoRA inside prefix tuning)."""
    closed = [p for p, m in net.named_modules() if isinstance(m, PeftLayer) and not m.holds_network]
    return [
        name
        for name, m in net.named_modules()
        if isinstance(m, nn.Linear) and not any(p == "" or name.startswith(p + ".") for p in closed)
    ]


def wrap_linears(
    module: Any,
    target_patterns: Any,
    where: str,
    make: Callable[[nn.Linear], nn.Module],
) -> tuple[str, ...]:
    """Replace each ``nn.Linear`` whose dotted module name matches a pattern by
    ``make(linear)``; the wrapped names, in module order."""
    net = net_of(module)
    if isinstance(target_patterns, str):
        target_patterns = (target_patterns,)
    if not isinstance(target_patterns, list | tuple) or not target_patterns:
        raise ConfigError(
            f"{where}.target_patterns",
            target_patterns,
            "pass globs on module names, e.g. ['*.qkv']",
        )
    linears = _linear_names(net)
    modules = dict(net.named_modules())
    chosen: list[str] = []
    for pattern in target_patterns:
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError(
                f"{where}.target_patterns", pattern, "pass globs on module names, e.g. 'layers.*'"
            )
        wrapped = [
            n for n, m in modules.items() if isinstance(m, PeftLayer) and fnmatchcase(n, pattern)
        ]
        if wrapped:
            raise ConfigError(
                f"{where}.target_patterns",
                pattern,
                f"matches {wrapped[0]!r}, which already holds an adapter; "
                "target the plain nn.Linear layers only",
            )
        hits = [n for n in linears if fnmatchcase(n, pattern)]
        if not hits:
            near = ", ".join(near_names(pattern, linears)) or "(the module has no nn.Linear)"
            raise ConfigError(
                f"{where}.target_patterns",
                pattern,
                f"matches no nn.Linear module; the linears it could match: {near} "
                "(globs on named_modules() names; '*' crosses dots)",
            )
        chosen += [n for n in hits if n not in chosen]
    chosen.sort(key=linears.index)
    if "" in chosen:  # the module itself is the linear: nothing holds it to replace
        raise ConfigError(
            f"{where}.module", type(net).__name__, "pass a module that contains the linear"
        )
    for name in chosen:
        parent_name, _, child = name.rpartition(".")
        parent = net.get_submodule(parent_name) if parent_name else net
        setattr(parent, child, make(getattr(parent, child)))
    return tuple(chosen)
