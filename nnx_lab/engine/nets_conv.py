"""``Nets.CONV``: ``ConvNN``, a LeNet-style convolutional network on ``(N, C, H, W)``."""

from __future__ import annotations

import itertools

from torch import nn

from .conv_params import NNConvParams
from .nets import activation_module

__all__ = ["ConvNN"]


class ConvNN(nn.Module):
    """[Conv2d -> activation -> MaxPool2d] per ``conv_channels`` -> flatten ->
    [Linear -> activation -> Dropout] per ``hidden_dims`` -> Linear (raw logits)."""

    def __init__(self, params: NNConvParams) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        channels = [params.in_channels, *params.conv_channels]
        for c_in, c_out in itertools.pairwise(channels):
            blocks.append(nn.Conv2d(c_in, c_out, params.kernel_size, params.stride, params.padding))
            blocks.append(activation_module(params.activation))
            if params.pool_size > 1:
                blocks.append(nn.MaxPool2d(params.pool_size))
        self.features = nn.Sequential(*blocks)
        h, w = params.feature_size()
        dims = [channels[-1] * h * w, *params.hidden_dims]
        head: list[nn.Module] = [nn.Flatten()]
        for d_in, d_out in itertools.pairwise(dims):
            head.append(nn.Linear(d_in, d_out))
            head.append(activation_module(params.activation))
            if params.dropout_prob > 0:
                head.append(nn.Dropout(params.dropout_prob))
        head.append(nn.Linear(dims[-1], params.output_dim))
        self.head = nn.Sequential(*head)

    def forward(self, x):
        return self.head(self.features(x))
