"""What the data checks know of a network: the shape of one input row and the width of
its outputs (``NetShape``), the topology a wrapped module is identified by, and the
probe that learns an own module's output width from one no-grad forward.

A built-in MLP's shape comes from ``NNParams``. A registered or wrapped module says
nothing of its shapes, so its output width is read from its first batch, under no grad,
in eval mode (each module's own mode restored) and with every random stream as it was:
the probe changes nothing a run depends on. A module that returns something other than
a tensor is refused there, naming what it returned.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from ..errors import ConfigError, DataError
from .adapters import Inputs, describe_output, forward
from .evaluate import inference
from .training_state import preserved_rng

__all__ = ["NetShape", "module_topology", "probe_output_dim", "shape_of"]


@dataclass(frozen=True)
class NetShape:
    """One input row's shape (``None``: not checked) and the outputs' width (``None``:
    not known until a batch has gone through). ``float_inputs``: inputs must be float32
    (the MLP's contract; an own module may take token ids). ``owner`` names where the
    shape is set, for the fix in an error."""

    sample_shape: tuple[int, ...] | None
    output_dim: int | None
    float_inputs: bool = False
    owner: str = "the network"
    check: Callable[[Any, str, str], None] | None = None  # the net's own input check

    @property
    def tabular(self) -> bool:
        """Rows of ``input_dim`` float columns (the MLP's and the MoE's contract)."""
        return self.float_inputs and self.sample_shape is not None and len(self.sample_shape) == 1

    @property
    def input_dim(self) -> int | None:
        return self.sample_shape[-1] if self.sample_shape else None

    def with_output_dim(self, k: int) -> NetShape:
        return replace(self, output_dim=k)

    def known_output_dim(self, net: Any) -> int:
        if self.output_dim is None:
            raise ConfigError(
                "model",
                repr(net),
                "its output width is read from a first batch: train, evaluate or predict "
                "once (or call model.task(y) with a batch's targets after one)",
            )
        return self.output_dim


def shape_of(net_params: Any) -> NetShape:
    """The shape of ``NNParams`` (anything else with ``input_dim``/``output_dim``), or
    a ``NetShape`` as it is."""
    if isinstance(net_params, NetShape):
        return net_params
    owner = type(net_params).__name__
    check = getattr(net_params, "check_inputs", None)  # NNTransformerParams: token ids
    if callable(check):
        return NetShape(None, int(net_params.output_dim), False, owner, check)
    sample = getattr(net_params, "sample_shape", None)  # NNConvParams, NNViTParams: (C, H, W)
    if sample is not None:
        return NetShape(tuple(sample), int(net_params.output_dim), True, owner)
    return NetShape((int(net_params.input_dim),), int(net_params.output_dim), True, owner)


def module_topology(module: torch.nn.Module) -> dict[str, Any]:
    """What a wrapped module is, for its run id: its type, every parameter's and
    buffer's name, shape and dtype, which parameters train, and its repr's digest.
    Never its weights: the same architecture trained twice from the same start is one
    configuration."""
    return {
        "type": f"{type(module).__module__}.{type(module).__qualname__}",
        "parameters": [
            [name, list(p.shape), str(p.dtype).removeprefix("torch."), bool(p.requires_grad)]
            for name, p in module.named_parameters()
        ],
        "buffers": [
            [name, list(b.shape), str(b.dtype).removeprefix("torch.")]
            for name, b in module.named_buffers()
        ],
        "repr": hashlib.sha256(repr(module).encode()).hexdigest(),
    }


def _sample(X: Any, n: int = 2) -> Any:
    if type(X) is Inputs:
        return X.rows(n)
    if isinstance(X, torch.Tensor):
        return X[:n]
    return X


def probe_output_dim(
    net: torch.nn.Module, X: Any, device: torch.device, field: str, where: str = "the first batch"
) -> int:
    """The width of ``net``'s outputs on a sample of ``X`` (the last axis; 1 for 1-D
    outputs). Refuses a non-tensor output, or one with no row axis."""
    with preserved_rng(), inference(net, None, "probe"):
        sample = _sample(X)
        sample = sample.to(device) if hasattr(sample, "to") else sample
        try:
            out = forward(net, sample)
        except DataError:
            raise
        except Exception as exc:
            raise DataError(
                field,
                f"{where} does not go through the network ({type(exc).__name__}: {exc})",
                "yield batches the module's forward takes, or pass batch_adapter="
                "PositionalInputs(n) / KeywordInputs(names, target=...)",
            ) from exc
    if not isinstance(out, torch.Tensor):
        raise DataError(
            field,
            f"on {where} the module returned {describe_output(out)}, not a tensor",
            "pass batch_adapter=PositionalInputs(output='logits') (a key or attribute), "
            "output=0 (a tuple index), or a BatchAdapter whose output(out) returns the tensor",
        )
    if out.ndim == 0:
        raise DataError(
            field,
            f"on {where} the module returned a scalar",
            "return one output row per input row: shape (rows, outputs) or (rows,)",
        )
    return 1 if out.ndim == 1 else int(out.shape[-1])
