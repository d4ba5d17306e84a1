"""Prefix and prompt tuning of a frozen built-in ``TransformerNN``.

``PrefixTuner(net, n_prefix)`` learns, for every block, ``n_prefix`` keys and values
that every token attends to before its own causal window (``2 * n_layers * n_prefix *
d_model`` values). ``PromptTuner(net, n_prompt)`` learns ``n_prompt`` input embeddings
put before the tokens' own (``n_prompt * d_model`` values). Both freeze every parameter
of ``net`` and call its forward with ``prefix=`` / ``prompt=`` (the network's general
conditioning arguments); the network is kept as ``.base``.
The logits keep the tokens' ``(N, T, vocab)`` shape, so the
tuner trains as the network would (``NNModel(module=tuner)``, ``CausalLMTask``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..engine.nets_transformer import TransformerNN
from ..errors import ConfigError
from ._base import PeftLayer
from .lora import generator_of

__all__ = ["PrefixTuner", "PromptTuner"]


def _check(net: Any, n: Any, field: str) -> tuple[TransformerNN, int]:
    net = getattr(net, "net", net)
    if not isinstance(net, TransformerNN):
        raise ConfigError(
            f"{field}.net", type(net).__name__, "pass a built-in TransformerNN (Nets.TRANSFORMER)"
        )
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ConfigError(f"{field}.n_tokens", n, "pass a positive int (e.g. 8)")
    return net, n


def _draw(shape: tuple[int, ...], like: torch.Tensor, seed: Any) -> torch.Tensor:
    # the embeddings' own scale, so a prompt starts among the tokens it sits beside
    std = float(like.detach().float().std())
    fresh = torch.randn(shape, generator=generator_of(seed)) * std
    return fresh.to(device=like.device, dtype=like.dtype)


class _Tuner(PeftLayer):
    holds_network = True

    def __init__(self, net: TransformerNN, n: int) -> None:
        super().__init__()
        self.base, self.n_tokens = net, n
        net.requires_grad_(False)
        attn = net.blocks[0].attn
        self.n_layers, self.n_heads = len(net.blocks), attn.n_heads
        self.head_dim = net.embed.embedding_dim // attn.n_heads

    def base_tensors(self) -> dict[str, torch.Tensor]:
        return dict(self.base.named_parameters(prefix="base"))

    def adapter_config(self) -> dict[str, Any]:
        return {"n_tokens": self.n_tokens}


class PrefixTuner(_Tuner):
    """``PrefixTuner(net, n_prefix=8, *, seed=None)``: ``prefix_keys`` and
    ``prefix_values``, each ``(n_layers, n_heads, n_prefix, head_dim)``."""

    adapter_kind = "Prefix"

    def __init__(self, net: Any, n_prefix: int = 8, *, seed: Any = None) -> None:
        net, n = _check(net, n_prefix, "PrefixTuner")
        generator_of(seed)  # refuse a bad seed before the net is frozen
        super().__init__(net, n)
        shape = (self.n_layers, self.n_heads, n, self.head_dim)
        generator = generator_of(seed)
        self.prefix_keys = nn.Parameter(_draw(shape, net.embed.weight, generator))
        self.prefix_values = nn.Parameter(_draw(shape, net.embed.weight, generator))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pairs = list(zip(self.prefix_keys, self.prefix_values, strict=True))
        return self.base(ids, prefix=pairs)

    def adapter_tensors(self) -> dict[str, torch.Tensor]:
        return {"prefix_keys": self.prefix_keys, "prefix_values": self.prefix_values}


class PromptTuner(_Tuner):
    """``PromptTuner(net, n_prompt=8, *, seed=None)``: ``prompt`` ``(n_prompt, d_model)``."""

    adapter_kind = "Prompt"

    def __init__(self, net: Any, n_prompt: int = 8, *, seed: Any = None) -> None:
        net, n = _check(net, n_prompt, "PromptTuner")
        generator_of(seed)
        super().__init__(net, n)
        shape = (n, net.embed.embedding_dim)
        self.prompt = nn.Parameter(_draw(shape, net.embed.weight, seed))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.base(ids, prompt=self.prompt)

    def adapter_tensors(self) -> dict[str, torch.Tensor]:
        return {"prompt": self.prompt}
