"""Folding LoRA, DoRA and IA3 layers into plain ``nn.Linear`` layers for inference.

``merge_adapters(module)`` replaces each such layer, in place, by an ``nn.Linear`` whose
weight (and bias) compute what the layer computed: the network then has its original
structure and cost, with the adaptation inside the weights. Merging rounds once per
weight (``W + B @ A`` is formed in the weight's dtype instead of applied per input), so
predictions agree to float tolerance, not bit for bit: the tests hold them to
``torch.testing.assert_close``'s fp32 default, ``|a - b| <= 1e-5 + 1.3e-6 * |b|``
(docs/peft.md). Bottleneck adapters and prefix
or prompt tuners compute something no linear weight holds: they stay as they are.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ._base import net_of, peft_layers

__all__ = ["merge_adapters"]


def merge_adapters(module: Any) -> tuple[str, ...]:
    """Replace every LoRA, DoRA and IA3 layer of ``module`` (an ``nn.Module`` or an
    ``NNModel``) by its merged ``nn.Linear``; the merged names. A module with none to
    merge is refused."""
    net = net_of(module)
    found = [(path, layer) for path, layer in peft_layers(net) if hasattr(layer, "merged")]
    if not found:
        raise ConfigError(
            "merge_adapters(module)",
            type(net).__name__,
            "it has no LoRA, DoRA or IA3 layer to merge (apply_lora_to first; "
            "AdapterLayer and the prefix and prompt tuners do not merge)",
        )
    if any(path == "" for path, _ in found):
        raise ConfigError(
            "merge_adapters(module)",
            type(net).__name__,
            "the module is itself an adapter layer: call its .merged() for the nn.Linear",
        )
    for path, layer in found:
        parent, _, child = path.rpartition(".")
        setattr(net.get_submodule(parent) if parent else net, child, layer.merged())
    return tuple(path for path, _ in found)
