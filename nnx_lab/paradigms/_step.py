"""What the paradigms' ``train_step_fn``s share: the fp32 update, the batch's parts on
the device, the step record's terms and a generator that travels as component state.

Each step owns its update (a ``train_step_fn``), so it applies what the engine would:
zero the gradients, one backward pass, the run's ``grad_clip_norm``, the optimizer step,
one ``report_update()``. The steps are marked ``full_precision_only``: they apply no
GradScaler, so a reduced precision policy is refused before any run (docs/precision.md).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..engine.components import ComponentSpec
from ..engine.data import first_batch
from ..engine.grad_ops import clip_grad_norm, zero_grad
from ..errors import ConfigError, DataError

__all__ = [
    "GeneratorStep",
    "apply_update",
    "beta_draw",
    "check_alpha",
    "check_one_batch_per_update",
    "peek_batch",
    "step_device",
    "supervised_pair",
]


def step_device(ctx: Any) -> torch.device:
    return ctx.device if ctx.device is not None else next(ctx.model.parameters()).device


def supervised_pair(batch: Any, where: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(X, y)`` of a batch, or a clear refusal naming what it holds."""
    if isinstance(batch, tuple | list) and len(batch) == 2:
        X, y = batch
        if isinstance(X, torch.Tensor) and isinstance(y, torch.Tensor):
            return X, y
    raise DataError(
        where,
        f"the batch is {_describe(batch)}, not an (inputs, targets) pair of tensors",
        "yield (X, y) batches: X the network's inputs, y the class targets",
    )


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, tuple | list):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"a {type(value).__name__}"


def apply_update(ctx: Any, loss: torch.Tensor) -> None:
    """One fp32 update of ``loss``: the engine's order (zero, backward, clip, step)."""
    zero_grad(ctx.optimizer)
    loss.backward()
    if ctx.grad_clip_norm:
        params = [p for g in ctx.optimizer.param_groups for p in g["params"]]
        clip_grad_norm(params, ctx.grad_clip_norm)
    ctx.optimizer.step()
    ctx.report_update()


def check_alpha(field: str, alpha: Any) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float):
        raise ConfigError(field, alpha, "a positive number: the Beta(alpha, alpha) parameter")
    if not math.isfinite(alpha) or alpha <= 0:
        raise ConfigError(
            field, alpha, "a finite alpha > 0 (Beta(alpha, alpha); 0.2 to 1.0 is usual)"
        )
    return float(alpha)


def check_one_batch_per_update(params: Any, name: str) -> None:
    """The steps take one update per loader batch: accumulation is refused, not ignored."""
    steps = getattr(params, "accumulation_steps", 1)
    if steps != 1:
        raise ConfigError(
            "NNTrainParams.accumulation_steps",
            steps,
            f"{name} takes one optimizer update per batch: pass accumulation_steps=1 "
            "(a larger batch_size gives the larger batch)",
        )


def peek_batch(params: Any) -> Any:
    """The training loader's first batch, read under a saved-and-restored RNG (so the
    check changes no draw of the run)."""
    return first_batch(params.train_loader, "NNTrainParams.train_loader")


def _gamma(shape: float, gen: torch.Generator, buf: torch.Tensor) -> float:
    """A Gamma(shape, 1) draw from ``gen`` (Marsaglia and Tsang; shape < 1 boosted).
    ``buf`` is a 0-d float64 scratch tensor: ``buf.uniform_`` and ``buf.normal_`` are
    what ``torch.rand`` and ``torch.randn`` run on a new tensor (the same draws from
    ``gen``), without an allocation per draw."""
    if shape < 1.0:
        u = float(buf.uniform_(generator=gen))
        return _gamma(shape + 1.0, gen, buf) * u ** (1.0 / shape)
    d = shape - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        x = float(buf.normal_(generator=gen))
        v = (1.0 + c * x) ** 3
        if v <= 0:
            continue
        u = float(buf.uniform_(generator=gen))
        if math.log(max(u, 1e-300)) < 0.5 * x * x + d - d * v + d * math.log(v):
            return d * v


def beta_draw(alpha: float, gen: torch.Generator) -> float:
    """A Beta(alpha, alpha) draw from ``gen``: torch.distributions.Beta takes no
    generator, and the draw must come from the step's own checkpointed one."""
    buf = torch.empty((), dtype=torch.float64)
    a, b = _gamma(alpha, gen, buf), _gamma(alpha, gen, buf)
    return a / (a + b) if a + b > 0 else 0.5


class GeneratorStep:
    """A step whose draws come from its own CPU ``torch.Generator``; the generator's
    state is the step's component state, so a resumed run draws what the uninterrupted
    one would (docs/custom_training.md#components)."""

    component_name = "paradigm"

    def __init__(self, seed: int) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError("seed", seed, "an int: the seed of the step's own generator")
        self.seed = seed
        self.generator = torch.Generator().manual_seed(seed)

    def component_spec(self) -> ComponentSpec:
        return ComponentSpec(self.component_name, version=1, required=True)

    def component_state(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state()}

    def load_component_state(self, state: dict[str, Any], version: int) -> None:
        self.generator.set_state(state["generator"])

    def check_component_state(self, state: Any, version: int) -> list[str]:
        held = state.get("generator") if isinstance(state, dict) else None
        if not isinstance(held, torch.Tensor) or held.dtype != torch.uint8:
            return [f"component {self.component_name!r}: no generator state (a uint8 tensor)"]
        return []
