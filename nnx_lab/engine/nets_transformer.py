"""``Nets.TRANSFORMER`` (``TransformerNN``, decoder-only) and ``Nets.VIT`` (``ViTNN``):
pre-norm blocks of multi-head self-attention (``scaled_dot_product_attention``) and a
GELU MLP, shared by both.

``TransformerNN.forward`` also takes learned context, for prefix and prompt tuning
(``nnx_lab.peft``) or any caller that conditions a frozen network: ``prompt`` (embeddings
put before the tokens' own, their outputs dropped) and ``prefix`` (one ``(keys,
values)`` pair per block, attended by every token ahead of the causal window). Without
either, the forward is the plain one, operation for operation.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from .transformer_params import NNTransformerParams, NNViTParams

__all__ = ["TransformerNN", "ViTNN"]

KeyValues = tuple[torch.Tensor, torch.Tensor]  # (keys, values) of a block's prefix


def _rope(x: torch.Tensor, base: float) -> torch.Tensor:
    """Rotary positions on ``x`` (N, heads, T, head_dim): pairs rotated by position."""
    t, d = x.shape[-2], x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    angles = torch.arange(t, device=x.device, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class _Attention(nn.Module):
    def __init__(
        self, d_model: int, n_heads: int, dropout: float, causal: bool, rope: float | None
    ):
        super().__init__()
        self.n_heads, self.causal, self.rope, self.dropout = n_heads, causal, rope, dropout
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, prefix: KeyValues | None = None) -> torch.Tensor:
        n, t, d = x.shape
        q, k, v = self.qkv(x).view(n, t, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        if self.rope is not None:
            q, k = _rope(q, self.rope), _rope(k, self.rope)
        p = self.dropout if self.training else 0.0
        if prefix is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, dropout_p=p)
        else:
            pk, pv = (z.expand(n, -1, -1, -1) for z in prefix)  # shared or per sample
            k, v = torch.cat((pk.to(k.dtype), k), dim=2), torch.cat((pv.to(v.dtype), v), dim=2)
            mask = None
            if self.causal:  # every token sees the whole prefix, then its own past
                seen = torch.ones(t, pk.shape[2], dtype=torch.bool, device=x.device)
                mask = torch.cat(
                    (seen, torch.ones(t, t, dtype=torch.bool, device=x.device).tril()), 1
                )
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        return self.out(y.transpose(1, 2).reshape(n, t, d))


class _Block(nn.Module):
    def __init__(
        self,
        d_model: int,
        n_heads: int,
        ffn_mult: int,
        dropout: float,
        causal: bool,
        rope: float | None,
    ):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = _Attention(d_model, n_heads, dropout, causal, rope)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, ffn_mult * d_model),
            nn.GELU(),
            nn.Linear(ffn_mult * d_model, d_model),
            nn.Dropout(dropout),
        )

    def forward(self, x: torch.Tensor, prefix: KeyValues | None = None) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), prefix)
        return x + self.mlp(self.norm2(x))


class TransformerNN(nn.Module):
    """Token ids ``(N, T)`` -> next-token logits ``(N, T, vocab_size)``."""

    def __init__(self, params: NNTransformerParams) -> None:
        super().__init__()
        p = params
        self.embed = nn.Embedding(p.vocab_size, p.d_model)
        self.drop = nn.Dropout(p.dropout_prob)
        self.blocks = nn.ModuleList(
            _Block(p.d_model, p.n_heads, p.ffn_mult, p.dropout_prob, True, p.rope_base)
            for _ in range(p.n_layers)
        )
        self.norm = nn.LayerNorm(p.d_model)
        self.head = nn.Linear(p.d_model, p.vocab_size, bias=False)
        if p.tie_embeddings:
            self.head.weight = self.embed.weight

    def forward(
        self,
        ids: torch.Tensor,
        *,
        prompt: torch.Tensor | None = None,
        prefix: Sequence[KeyValues] | None = None,
    ) -> torch.Tensor:
        """``prompt``: ``(P, d_model)`` or ``(N, P, d_model)`` embeddings put before the
        tokens (the logits keep the tokens' ``T`` positions). ``prefix``: one ``(keys,
        values)`` per block, each ``(n_heads, P, head_dim)`` or ``(N, n_heads, P,
        head_dim)``, already positioned (no rotary applied to them)."""
        if prompt is None and prefix is None:
            x = self.drop(self.embed(ids))
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))
        return self._conditioned(ids, prompt, prefix)

    def _conditioned(
        self,
        ids: torch.Tensor,
        prompt: torch.Tensor | None,
        prefix: Sequence[KeyValues] | None,
    ) -> torch.Tensor:
        x = self.embed(ids)
        if prompt is not None:
            lead = prompt.expand(x.shape[0], -1, -1) if prompt.dim() == 2 else prompt
            x = torch.cat((lead.to(x.dtype), x), dim=1)
        if prefix is not None and len(prefix) != len(self.blocks):
            raise ConfigError(
                "TransformerNN.forward(prefix)",
                f"{len(prefix)} (keys, values) pairs",
                f"the network has {len(self.blocks)} blocks: pass one pair per block",
            )
        x = self.drop(x)
        for i, block in enumerate(self.blocks):
            x = block(x, None if prefix is None else prefix[i])
        logits = self.head(self.norm(x))
        return logits if prompt is None else logits[:, -ids.shape[1] :]


class ViTNN(nn.Module):
    """Images ``(N, C, H, W)`` -> class logits ``(N, output_dim)``."""

    def __init__(self, params: NNViTParams) -> None:
        super().__init__()
        p = params
        self.patch = nn.Conv2d(p.in_channels, p.d_model, p.patch_size, stride=p.patch_size)
        self.cls = nn.Parameter(torch.zeros(1, 1, p.d_model))
        self.pos = nn.Parameter(torch.randn(1, p.n_patches + 1, p.d_model) * 0.02)
        self.drop = nn.Dropout(p.dropout_prob)
        self.blocks = nn.ModuleList(
            _Block(p.d_model, p.n_heads, p.ffn_mult, p.dropout_prob, False, None)
            for _ in range(p.n_layers)
        )
        self.norm = nn.LayerNorm(p.d_model)
        self.head = nn.Linear(p.d_model, p.output_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.patch(x).flatten(2).transpose(1, 2)
        tokens = torch.cat((self.cls.expand(tokens.shape[0], -1, -1), tokens), dim=1)
        h = self.drop(tokens + self.pos)
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h[:, 0]))
