"""``Nets.TRANSFORMER`` (``TransformerNN``, decoder-only) and ``Nets.VIT`` (``ViTNN``):
pre-norm blocks of multi-head self-attention (``scaled_dot_product_attention``) and a
GELU MLP, shared by both.

``TransformerNN.forward(ids, cache=KVCache())`` keeps each layer's keys and values so
that generation feeds only the new tokens: the cache holds the positions already seen
and the rotary angles continue from there. It also takes learned context, for prefix
and prompt tuning (``nnx_lab.peft``) or any caller that conditions a frozen network:
``prompt`` (embeddings put before the tokens' own, their outputs dropped) and ``prefix``
(one ``(keys, values)`` pair per block, attended by every token ahead of the causal
window). Without a cache, a prompt or a prefix the forward is the one it always was,
operation for operation.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError, DataError
from .transformer_params import NNTransformerParams, NNViTParams

__all__ = ["KVCache", "TransformerNN", "ViTNN"]

KeyValues = tuple[torch.Tensor, torch.Tensor]  # (keys, values) of a block's prefix


class KVCache:
    """Each attention layer's keys and values so far, ``(N, heads, length, head_dim)``.

    Pass a fresh one to ``TransformerNN.forward(ids, cache=...)`` with the prompt, then
    the same one with each new token; ``length`` is the positions it holds. A cache
    belongs to one batch of sequences: ``reorder(index)`` keeps the rows named (beam
    search, dropping finished rows)."""

    def __init__(self) -> None:
        self.layers: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.length = 0

    def __repr__(self) -> str:
        return f"KVCache(layers={len(self.layers)}, length={self.length})"

    def append(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Add one layer's new keys and values; returns all of them so far."""
        if layer == len(self.layers):
            self.layers.append((k, v))
        else:
            old_k, old_v = self.layers[layer]
            self.layers[layer] = (torch.cat((old_k, k), dim=2), torch.cat((old_v, v), dim=2))
        return self.layers[layer]

    def reorder(self, index: torch.Tensor) -> None:
        self.layers = [(k[index], v[index]) for k, v in self.layers]


def _rope(x: torch.Tensor, base: float, start: int = 0) -> torch.Tensor:
    """Rotary positions on ``x`` (N, heads, T, head_dim): pairs rotated by position
    (``start`` onwards: the positions a cache already holds come first)."""
    t, d = x.shape[-2], x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    positions = torch.arange(start, start + t, device=x.device, dtype=torch.float32)
    angles = positions[:, None] * inv[None, :]
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

    def forward(
        self,
        x: torch.Tensor,
        cache: KVCache | None = None,
        layer: int = 0,
        prefix: KeyValues | None = None,
    ) -> torch.Tensor:
        n, t, d = x.shape
        q, k, v = self.qkv(x).view(n, t, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        if cache is not None:
            return self._cached(q, k, v, cache, layer)
        if self.rope is not None:
            q, k = _rope(q, self.rope), _rope(k, self.rope)
        if prefix is not None:
            return self._prefixed(q, k, v, prefix)
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=self.causal, dropout_p=self.dropout if self.training else 0.0
        )
        return self.out(y.transpose(1, 2).reshape(n, t, d))

    def _prefixed(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, prefix: KeyValues
    ) -> torch.Tensor:
        n, _, t, _ = q.shape
        pk, pv = (z.expand(n, -1, -1, -1) for z in prefix)  # shared or per sample
        k, v = torch.cat((pk.to(k.dtype), k), dim=2), torch.cat((pv.to(v.dtype), v), dim=2)
        mask = None
        if self.causal:  # every token sees the whole prefix, then its own past
            seen = torch.ones(t, pk.shape[2], dtype=torch.bool, device=q.device)
            own = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
            mask = torch.cat((seen, own), 1)
        drop = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop)
        return self.out(y.transpose(1, 2).reshape(n, t, -1))

    def _cached(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: KVCache, layer: int
    ) -> torch.Tensor:
        n, _, t, _ = q.shape
        start = cache.length
        if self.rope is not None:
            q, k = _rope(q, self.rope, start), _rope(k, self.rope, start)
        k, v = cache.append(layer, k, v)
        mask = None
        if self.causal and t > 1:  # new token i sees the cache and new tokens up to i
            total = k.shape[2]
            rows = torch.arange(t, device=q.device)[:, None] + start
            mask = torch.arange(total, device=q.device)[None, :] <= rows
        drop = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop)
        return self.out(y.transpose(1, 2).reshape(n, t, -1))


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

    def forward(
        self,
        x: torch.Tensor,
        cache: KVCache | None = None,
        layer: int = 0,
        prefix: KeyValues | None = None,
    ) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cache, layer, prefix)
        return x + self.mlp(self.norm2(x))


class TransformerNN(nn.Module):
    """Token ids ``(N, T)`` -> next-token logits ``(N, T, vocab_size)``."""

    def __init__(self, params: NNTransformerParams) -> None:
        super().__init__()
        p = params
        self.max_seq_len = p.max_seq_len
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
        cache: KVCache | None = None,
        *,
        prompt: torch.Tensor | None = None,
        prefix: Sequence[KeyValues] | None = None,
    ) -> torch.Tensor:
        """Logits of ``ids``; with ``cache``, ``ids`` are the tokens after those the
        cache holds (the whole prompt first, then one or more at a time). ``prompt``:
        ``(P, d_model)`` or ``(N, P, d_model)`` embeddings put before the tokens (the
        logits keep the tokens' ``T`` positions). ``prefix``: one ``(keys, values)`` per
        block, each ``(n_heads, P, head_dim)`` or ``(N, n_heads, P, head_dim)``, already
        positioned (no rotary applied to them). Neither goes with a cache (yet)."""
        if prompt is not None or prefix is not None:
            if cache is not None:
                raise ConfigError(
                    "TransformerNN.forward(cache)",
                    cache,
                    "a prompt or prefix with a KV cache is not supported: run without one",
                )
            return self._conditioned(ids, prompt, prefix)
        x = self.drop(self.embed(ids))
        if cache is None:
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))
        if cache.length + ids.shape[1] > self.max_seq_len:
            raise DataError(
                "TransformerNN.forward(cache)",
                f"the cache holds {cache.length} positions and {ids.shape[1]} more were given",
                f"at most max_seq_len={self.max_seq_len} in all: start a new cache on a "
                "cropped context",
            )
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i)
        cache.length += ids.shape[1]
        return self.head(self.norm(x))

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
            x = block(x, None, i, None if prefix is None else prefix[i])
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
