"""The params of the built-in transformers: ``NNTransformerParams`` (``Nets.TRANSFORMER``,
a decoder-only language model on token ids) and ``NNViTParams`` (``Nets.VIT``, a vision
transformer on ``(N, C, H, W)`` images). Every size is checked here, before a network
exists, naming the field and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError, DataError
from .params_base import Params, finite, positive_int, set_dropout, set_field

__all__ = ["NNTransformerParams", "NNViTParams"]


def _heads(obj: Any, owner: str) -> None:
    if obj.d_model % obj.n_heads:
        raise ConfigError(
            f"{owner}.n_heads",
            obj.n_heads,
            f"d_model={obj.d_model} must split evenly into heads: pick a divisor of it",
        )


@dataclass(frozen=True)
class NNTransformerParams(Params):
    """A decoder-only transformer: token embedding, ``n_layers`` pre-norm blocks of
    causal self-attention (rotary positions, base ``rope_base``) and a GELU MLP of
    ``ffn_mult * d_model``, a final LayerNorm, and a head to ``vocab_size`` logits
    (tied to the embedding with ``tie_embeddings``). Inputs: int64 token ids ``(N, T)``
    with ``T <= max_seq_len``; outputs ``(N, T, vocab_size)``."""

    vocab_size: int
    n_layers: int = 2
    d_model: int = 64
    n_heads: int = 4
    max_seq_len: int = 128
    ffn_mult: int = 4
    rope_base: float = 10000.0
    tie_embeddings: bool = True
    dropout_prob: float = 0.0

    def __post_init__(self) -> None:
        f = "NNTransformerParams."
        for name in ("vocab_size", "n_layers", "d_model", "n_heads", "max_seq_len", "ffn_mult"):
            set_field(self, name, positive_int(getattr(self, name), f + name))
        if self.d_model // self.n_heads % 2:
            raise ConfigError(
                f + "n_heads",
                self.n_heads,
                "rotary positions need an even head width (d_model / n_heads)",
            )
        _heads(self, "NNTransformerParams")
        set_field(
            self,
            "rope_base",
            finite(self.rope_base, f + "rope_base", low=1.0, low_open=True, fix="pass > 1"),
        )
        if not isinstance(self.tie_embeddings, bool):
            raise ConfigError(f + "tie_embeddings", self.tie_embeddings, "pass True or False")
        set_dropout(self, f + "dropout_prob")

    @property
    def output_dim(self) -> int:
        return self.vocab_size

    def check_inputs(self, X: Any, field: str, where: str) -> None:
        """Token ids: int64, ``(N, T)``, ``T <= max_seq_len``, ids in the vocabulary."""
        import torch

        if X.dtype != torch.long or X.ndim != 2:
            raise DataError(
                field,
                f"{where}'s inputs are {X.dtype} of shape {tuple(X.shape)}",
                "yield int64 token ids of shape (rows, tokens)",
            )
        if X.shape[1] > self.max_seq_len:
            raise DataError(
                field,
                f"{where} has {X.shape[1]} tokens per row",
                f"at most max_seq_len={self.max_seq_len}: shorten the rows or raise "
                "NNTransformerParams.max_seq_len",
            )
        if X.numel() and (int(X.min()) < 0 or int(X.max()) >= self.vocab_size):
            raise DataError(
                field,
                f"{where}'s token ids span [{int(X.min())}, {int(X.max())}]",
                f"ids must be in [0, {self.vocab_size}) (NNTransformerParams.vocab_size)",
            )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NNTransformerParams:
        return cls(**data)


@dataclass(frozen=True)
class NNViTParams(Params):
    """A vision transformer: ``patch_size`` patches embedded by a strided convolution, a
    class token and learned positions, ``n_layers`` pre-norm encoder blocks, and a
    LayerNorm + linear head on the class token to ``output_dim`` logits. Inputs: float32
    ``(N, in_channels, image_size, image_size)``."""

    output_dim: int
    image_size: int = 28
    patch_size: int = 7
    in_channels: int = 1
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    ffn_mult: int = 4
    dropout_prob: float = 0.0

    def __post_init__(self) -> None:
        f = "NNViTParams."
        for name in (
            "output_dim",
            "image_size",
            "patch_size",
            "in_channels",
            "d_model",
            "n_layers",
            "n_heads",
            "ffn_mult",
        ):
            set_field(self, name, positive_int(getattr(self, name), f + name))
        if self.image_size % self.patch_size:
            raise ConfigError(
                f + "patch_size",
                self.patch_size,
                f"image_size={self.image_size} must be a multiple of the patch size",
            )
        _heads(self, "NNViTParams")
        set_dropout(self, f + "dropout_prob")

    @property
    def sample_shape(self) -> tuple[int, int, int]:
        return (self.in_channels, self.image_size, self.image_size)

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NNViTParams:
        return cls(**data)
