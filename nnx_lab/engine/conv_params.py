"""``NNConvParams``: the shape of ``Nets.CONV``, a LeNet-style convolutional network
(conv -> activation -> max-pool blocks, then a feed-forward head) on ``(N, C, H, W)``
images. Every size is checked here, before a network exists: a stack that pools an image
down to nothing is refused naming the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .enums import Activations, coerce_enum
from .params_base import Params, is_int, positive_int, set_dropout, set_field

__all__ = ["NNConvParams"]


def _int_list(value: object, field: str, example: str, *, allow_empty: bool) -> tuple[int, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigError(field, value, f"pass a list of positive integers, e.g. {example}")
    if not value and not allow_empty:
        raise ConfigError(field, list(value), f"pass at least one channel count, e.g. {example}")
    for v in value:
        if not is_int(v) or int(v) < 1:
            raise ConfigError(field, list(value), f"every entry must be a positive integer ({v!r})")
    return tuple(int(v) for v in value)


def _size(value: object, field: str) -> tuple[int, int]:
    if is_int(value):
        value = (value, value)
    if (
        isinstance(value, str | bytes)
        or not isinstance(value, Sequence)
        or len(value) != 2
        or not all(is_int(v) and int(v) >= 1 for v in value)
    ):
        raise ConfigError(field, value, "pass a positive integer or (height, width), e.g. 28")
    return int(value[0]), int(value[1])


@dataclass(frozen=True)
class NNConvParams(Params):
    """A ``Nets.CONV`` network: for each of ``conv_channels``, ``Conv2d(kernel_size,
    stride, padding)`` -> activation -> ``MaxPool2d(pool_size)`` (1: no pooling); then
    ``hidden_dims`` linear layers (with dropout) and ``output_dim`` logits."""

    output_dim: int
    in_channels: int = 1
    image_size: Any = 28  # an int or (height, width)
    conv_channels: Sequence[int] = (16, 32)
    kernel_size: int = 3
    stride: int = 1
    padding: int = 1
    pool_size: int = 2
    hidden_dims: Sequence[int] = (64,)
    dropout_prob: float = 0.0
    activation: Activations = Activations.RELU

    def __post_init__(self) -> None:
        f = "NNConvParams."
        set_field(self, "output_dim", positive_int(self.output_dim, f + "output_dim"))
        set_field(self, "in_channels", positive_int(self.in_channels, f + "in_channels"))
        set_field(self, "image_size", _size(self.image_size, f + "image_size"))
        set_field(
            self,
            "conv_channels",
            _int_list(self.conv_channels, f + "conv_channels", "[16, 32]", allow_empty=False),
        )
        set_field(self, "kernel_size", positive_int(self.kernel_size, f + "kernel_size"))
        set_field(self, "stride", positive_int(self.stride, f + "stride"))
        set_field(self, "padding", positive_int(self.padding, f + "padding", minimum=0))
        set_field(self, "pool_size", positive_int(self.pool_size, f + "pool_size"))
        set_field(
            self,
            "hidden_dims",
            _int_list(self.hidden_dims, f + "hidden_dims", "[64]", allow_empty=True),
        )
        set_dropout(self, f + "dropout_prob")
        set_field(self, "activation", coerce_enum(Activations, self.activation, f + "activation"))
        self.feature_size()  # refuses a stack that leaves no pixel

    def feature_size(self) -> tuple[int, int]:
        """The feature map's (height, width) after the last block."""
        h, w = self.image_size
        k, s, p, pool = self.kernel_size, self.stride, self.padding, self.pool_size
        for i in range(len(self.conv_channels)):
            h, w = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
            if pool > 1:
                h, w = h // pool, w // pool
            if h < 1 or w < 1:
                raise ConfigError(
                    "NNConvParams.conv_channels",
                    list(self.conv_channels),
                    f"block {i + 1} leaves no pixel of a {self.image_size[0]}x"
                    f"{self.image_size[1]} image: use fewer blocks, a smaller kernel_size or "
                    "pool_size, or more padding",
                )
        return h, w

    @property
    def sample_shape(self) -> tuple[int, int, int]:
        return (self.in_channels, *self.image_size)

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        data["image_size"] = list(self.image_size)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NNConvParams:
        return cls(**data)
