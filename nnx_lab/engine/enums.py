"""The enums of the NNx API. Each value is its lowercase wire name."""

from __future__ import annotations

from enum import Enum
from typing import Any

from ..errors import ConfigError

__all__ = [
    "Activations",
    "Checkpoints",
    "Devices",
    "Losses",
    "Nets",
    "Optims",
    "RunStatus",
    "coerce_enum",
]


class _NamedEnum(str, Enum):
    """A str enum whose members also accept their name (``"ADAM"``) on input."""

    def __str__(self) -> str:
        return self.value


class Activations(_NamedEnum):
    RELU = "relu"
    LEAKY_RELU = "leaky_relu"
    GELU = "gelu"
    TANH = "tanh"
    SIGMOID = "sigmoid"
    SILU = "silu"
    ELU = "elu"


class Devices(_NamedEnum):
    CPU = "cpu"
    CUDA = "cuda"
    MPS = "mps"

    @classmethod
    def get(cls) -> Devices:
        """The best device present: MPS > CUDA > CPU."""
        import torch

        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return cls.MPS
        if torch.cuda.is_available():
            return cls.CUDA
        return cls.CPU

    def torch_device(self) -> Any:
        """This member as a ``torch.device`` (NNx's spelling; present or not)."""
        import torch

        return torch.device(self.value)

    def __call__(self) -> Any:
        """``Devices.CPU()`` is ``Devices.CPU.torch_device()``, as in NNx."""
        return self.torch_device()

    @classmethod
    def get_torch_device(cls) -> Any:
        """The best device present (``get()``) as a ``torch.device``."""
        return cls.get().torch_device()


class Losses(_NamedEnum):
    CROSS_ENTROPY = "cross_entropy"
    NEGATIVE_LOG_LIKELIHOOD = "negative_log_likelihood"
    MEAN_SQUARED_ERROR = "mean_squared_error"
    BINARY_CROSS_ENTROPY = "binary_cross_entropy"

    @property
    def is_classification(self) -> bool:
        return self in (Losses.CROSS_ENTROPY, Losses.NEGATIVE_LOG_LIKELIHOOD)

    def __call__(self, **kwargs: Any) -> Any:
        """A fresh torch loss module, as NNx's members give: ``CrossEntropyLoss``,
        ``NLLLoss`` (it takes log-probabilities), ``MSELoss``, ``BCEWithLogitsLoss``.
        ``NNModelParams(loss=...)`` takes the member itself (its NLL applies
        log_softmax to the logits first)."""
        from torch import nn

        factory = {
            Losses.CROSS_ENTROPY: nn.CrossEntropyLoss,
            Losses.NEGATIVE_LOG_LIKELIHOOD: nn.NLLLoss,
            Losses.MEAN_SQUARED_ERROR: nn.MSELoss,
            Losses.BINARY_CROSS_ENTROPY: nn.BCEWithLogitsLoss,
        }[self]
        return factory(**kwargs)


class Nets(_NamedEnum):
    FEED_FWD = "feed_fwd"
    CONV = "conv"  # NNConvParams: a LeNet-style ConvNN on (N, C, H, W) images
    TRANSFORMER = "transformer"  # NNTransformerParams: a decoder-only TransformerNN
    VIT = "vit"  # NNViTParams: a vision transformer on (N, C, H, W) images
    FEED_FWD_MOE = "feed_fwd_moe"  # NNMoEParams: mixture-of-experts layers
    # NNParams on a graph batch (the graph extra): GCN, GraphSAGE and GAT layers
    GRAPH_CONV = "graph_conv"
    GRAPH_SAGE = "graph_sage"
    GRAPH_ATT = "graph_att"


class Optims(_NamedEnum):
    ADAM = "adam"
    ADAMW = "adamw"
    SGD = "sgd"
    RMSPROP = "rmsprop"


class Checkpoints(_NamedEnum):
    LAST = "last"
    BEST = "best"
    # NNx's phase checkpoints: the weights after the first epoch and at each quarter of
    # the epochs a run plans (engine/phases.py)
    FIRST = "first"
    Q1 = "q1"
    Q2 = "q2"
    Q3 = "q3"


class RunStatus(_NamedEnum):
    CREATED = "created"
    RUNNING = "running"
    STOPPED = "stopped"
    FINISHED = "finished"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # read back only: "running", but its writer is gone


def coerce_enum(cls: type[_NamedEnum], value: object, field: str) -> _NamedEnum:
    """Accept a member, its value (``"adam"``) or its name (``"ADAM"``); refuse the rest."""
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        for member in cls:
            if value.lower() in (member.value, member.name.lower()):
                return member
    choices = ", ".join(f"{cls.__name__}.{m.name}" for m in cls)
    raise ConfigError(field, value, f"use one of {choices}")
