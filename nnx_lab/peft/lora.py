"""LoRA: a frozen ``nn.Linear`` plus a trainable low-rank residual.

``y = base(x) + (alpha / r) * B(A(dropout(x)))`` with ``A`` (r, in) drawn like an
``nn.Linear`` weight (Kaiming-uniform) and ``B`` (out, r) zero, so a fresh adapter
changes nothing. The base keeps its parameters under ``<layer>.base.*`` and is frozen;
``lora_A`` and ``lora_B`` are the only trainable tensors of the layer: ``r * (in + out)``
values.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ._base import PeftLayer, check_rank, wrap_linears

__all__ = ["LoRALinear", "apply_lora_to"]


def generator_of(seed: Any) -> torch.Generator | None:
    """A generator for ``seed`` (an int, a ``torch.Generator`` used as it is, or None:
    torch's global stream)."""
    if seed is None or isinstance(seed, torch.Generator):
        return seed
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError("seed", seed, "pass an int, or None for torch's global stream")
    return torch.Generator().manual_seed(seed)


def init_down(weight: torch.Tensor, generator: torch.Generator | None) -> None:
    """``nn.Linear``'s own weight draw (Kaiming-uniform, a=sqrt(5)), as peft's LoRA does."""
    with torch.no_grad():
        fresh = torch.empty(weight.shape, dtype=weight.dtype)
        nn.init.kaiming_uniform_(fresh, a=math.sqrt(5), generator=generator)
        weight.copy_(fresh)


class LoRALinear(PeftLayer):
    """``LoRALinear(base, r=8, alpha=16, dropout=0.0, *, seed=None)``: ``base`` (an
    ``nn.Linear``) is frozen and kept as ``.base``; ``seed`` (an int or a
    ``torch.Generator``) draws ``lora_A`` from its own stream (None: torch's global one)."""

    adapter_kind = "LoRA"

    def __init__(
        self,
        base: nn.Linear,
        r: int = 8,
        alpha: float = 16,
        dropout: float = 0.0,
        *,
        seed: Any = None,
    ) -> None:
        if not isinstance(base, nn.Linear):
            raise ConfigError(
                f"{type(self).__name__}.base", type(base).__name__, "pass an nn.Linear"
            )
        r, alpha, dropout = check_rank(r, alpha, dropout, type(self).__name__)
        generator = generator_of(seed)
        super().__init__()
        self.base = base
        base.requires_grad_(False)
        self.r, self.alpha, self.scaling = r, alpha, alpha / r
        kw = {"device": base.weight.device, "dtype": base.weight.dtype}
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features, **kw))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r, **kw))
        init_down(self.lora_A, generator)
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    def delta(self) -> torch.Tensor:
        """The low-rank update of the weight, ``(alpha / r) * B @ A``."""
        return (self.lora_B @ self.lora_A) * self.scaling

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        low = F.linear(F.linear(self.dropout(x), self.lora_A), self.lora_B)
        return self.base(x) + low * self.scaling

    def merged(self) -> nn.Linear:
        """A plain ``nn.Linear`` whose weight is ``base.weight + delta()``."""
        out = _copy_linear(self.base)
        with torch.no_grad():
            out.weight.add_(self.delta())
        return out

    def adapter_tensors(self) -> dict[str, torch.Tensor]:
        return {"lora_A": self.lora_A, "lora_B": self.lora_B}

    def base_tensors(self) -> dict[str, torch.Tensor]:
        return dict(self.base.named_parameters(prefix="base"))

    def adapter_config(self) -> dict[str, Any]:
        return {"r": self.r, "alpha": self.alpha}

    def extra_repr(self) -> str:
        return f"r={self.r}, alpha={self.alpha:g}"


def _copy_linear(base: nn.Linear) -> nn.Linear:
    kw = {"device": base.weight.device, "dtype": base.weight.dtype}
    out = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None, **kw)
    with torch.no_grad():
        out.weight.copy_(base.weight)
        if base.bias is not None:
            out.bias.copy_(base.bias)
    out.requires_grad_(base.weight.requires_grad)
    return out


def apply_lora_to(
    module: Any,
    target_patterns: Any,
    r: int = 8,
    alpha: float = 16,
    dropout: float = 0.0,
    *,
    seed: Any = None,
) -> tuple[str, ...]:
    """Wrap every ``nn.Linear`` of ``module`` (an ``nn.Module`` or an ``NNModel``) whose
    dotted name matches one of ``target_patterns`` (``fnmatch`` globs on
    ``named_modules()`` names, ``*`` crosses dots) in a ``LoRALinear``, in place; the
    wrapped names. Only each wrapped layer's base is frozen: ``freeze(module)`` first to
    train the adapters alone. A pattern that matches no linear is refused, naming the
    linears it could match, before any layer changes."""
    r, alpha, dropout = check_rank(r, alpha, dropout, "apply_lora_to")
    generator = generator_of(seed)  # one stream for the call: each layer its own draw
    return wrap_linears(
        module,
        target_patterns,
        "apply_lora_to",
        lambda linear: LoRALinear(linear, r, alpha, dropout, seed=generator),
    )
