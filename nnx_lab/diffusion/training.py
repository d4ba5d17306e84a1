"""The DDPM training loss on the engine's two hooks (§3.3).

Both forms train ``E ||ε - ε_θ(√ᾱ_t x_0 + √(1-ᾱ_t) ε, t)||²`` (Ho et al. 2020, eq. 14):

- ``diffusion_objective(schedule)``: an ``Objective`` with one term ``"mse"`` (a sum of
  squared errors over its element count), so accumulation is exact and the engine
  brings precision, clipping and the non-finite policy;
- ``diffusion_train_step_factory(schedule)``: a ``train_step_fn`` doing the same update
  itself, in full precision (marked ``full_precision_only``), one update per batch.

The timesteps and the noise come from their own CPU ``torch.Generator`` (never the
global stream, so a sample preview or anything else drawn in between does not move
them), drawn in a fixed order per batch: ``t`` then ``ε``. Its state is a component
(``"diffusion"``), saved with every checkpoint and restored on a stateful resume, so
2 + 2 epochs equal 4 bit for bit.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from ..engine.components import ComponentSpec
from ..engine.custom_step import full_precision_only
from ..engine.data import first_batch
from ..engine.edp import EDP
from ..engine.grad_ops import clip_grad_norm, zero_grad
from ..engine.objective import LossTerm, Objective, ObjectiveResult
from ..engine.params_base import SEED_LIMIT
from ..errors import ConfigError, DataError
from .schedule import NoiseSchedule, check_schedule

__all__ = [
    "DiffusionNoise",
    "DiffusionObjective",
    "DiffusionStep",
    "clean_points",
    "diffusion_objective",
    "diffusion_train_step_factory",
    "noised",
]


def clean_points(batch: Any, field: str = "train_loader") -> torch.Tensor:
    """The clean data ``x_0`` of a batch: a tensor, the first tensor of a tuple or list
    (labels, if any, are not used), or a dict's ``"x"``."""
    if isinstance(batch, Mapping):
        batch = batch.get("x")
    elif isinstance(batch, tuple | list) and batch:
        batch = batch[0]
    if not isinstance(batch, torch.Tensor) or not batch.is_floating_point() or batch.ndim < 2:
        shown = type(batch).__name__ if not isinstance(batch, torch.Tensor) else batch.dtype
        raise DataError(
            field,
            f"a diffusion batch's points are {shown}",
            "yield float tensors of clean points (rows, dims), (x, ...) tuples or {'x': ...}",
        )
    return batch


def check_request(model: Any, params: Any, *, step: bool) -> None:
    """Refuse, before any run directory exists, a network that takes no timestep, a
    first batch whose points are not what the network denoises, and (for the step,
    which takes one update per batch) accumulation."""
    if step and params.accumulation_steps != 1:
        raise ConfigError(
            "NNTrainParams.accumulation_steps",
            params.accumulation_steps,
            "diffusion_train_step_factory takes one update per batch; use objective="
            "diffusion_objective(schedule) to accumulate",
        )
    net = getattr(model, "net", None)
    if net is None:
        return
    try:
        inspect.signature(net.forward).bind(None, None)
    except TypeError:
        raise ConfigError(
            "NNModelParams.net",
            type(net).__name__,
            "a network whose forward(x, t) takes the timestep: "
            "NNModelParams(net=diffusion_mlp_spec(data_dim))",
        ) from None
    x0 = clean_points(first_batch(params.train_loader, "NNTrainParams.train_loader"))
    dim = getattr(net, "data_dim", None)
    if dim is not None and (x0.ndim != 2 or x0.shape[1] != dim):
        raise DataError(
            "NNTrainParams.train_loader",
            f"the first batch's points have shape {tuple(x0.shape)}",
            f"the network denoises points of {dim} dims: (rows, {dim}); or change data_dim",
        )


def _check_seed(seed: object, field: str) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT:
        raise ConfigError(field, seed, f"an int in [0, {SEED_LIMIT})")
    return seed


class DiffusionNoise:
    """The generator the timesteps and the noise are drawn from, and its component."""

    def __init__(self, schedule: NoiseSchedule, seed: int) -> None:
        self.schedule = schedule
        self.seed = seed
        self.generator = torch.Generator().manual_seed(seed)

    def draw(self, x0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(t, ε)`` for the rows of ``x0``, on its device and in its dtype."""
        t = torch.randint(0, self.schedule.T, (x0.shape[0],), generator=self.generator)
        eps = torch.randn(x0.shape, generator=self.generator, dtype=x0.dtype)
        return t.to(x0.device), eps.to(x0.device)

    def component_spec(self) -> ComponentSpec:
        return ComponentSpec("diffusion", version=1)

    def component_state(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state(), "seed": self.seed}

    def load_component_state(self, state: dict[str, Any], version: int) -> None:
        self.generator.set_state(state["generator"])

    def check_component_state(self, state: dict[str, Any], version: int) -> list[str]:
        if int(state.get("seed", -1)) != self.seed:
            return [
                f"component 'diffusion': the checkpoint's generator was seeded with "
                f"{state.get('seed')!r}, this objective with {self.seed}; pass seed="
                f"{state.get('seed')!r}"
            ]
        return []

    def identity(self) -> dict[str, Any]:
        return {"schedule": self.schedule.identity(), "seed": self.seed}


def noised(
    schedule: NoiseSchedule, x0: torch.Tensor, t: torch.Tensor, eps: torch.Tensor
) -> torch.Tensor:
    """``x_t = √ᾱ_t x_0 + √(1-ᾱ_t) ε`` (the forward process in one jump)."""
    cols = schedule.columns(x0.device, x0.dtype)
    shape = (-1,) + (1,) * (x0.ndim - 1)
    return (
        cols["sqrt_alpha_bar"][t].view(shape) * x0
        + cols["sqrt_one_minus_alpha_bar"][t].view(shape) * eps
    )


class _OwnsNoise:
    """The component and run-id methods of a step or objective that draws from its own
    ``DiffusionNoise`` (``self.noise``): its generator travels with every checkpoint."""

    noise: DiffusionNoise

    def component_spec(self) -> ComponentSpec:
        return self.noise.component_spec()

    def component_state(self) -> dict[str, Any]:
        return self.noise.component_state()

    def load_component_state(self, state: dict[str, Any], version: int) -> None:
        self.noise.load_component_state(state, version)

    def check_component_state(self, state: dict[str, Any], version: int) -> list[str]:
        return self.noise.check_component_state(state, version)

    def run_identity(self) -> dict[str, Any]:
        return self.noise.identity()

    @property
    def generator(self) -> torch.Generator:
        return self.noise.generator


class DiffusionObjective(_OwnsNoise, Objective):
    """``diffusion_objective(schedule)``: one term ``"mse"``, ε-prediction."""

    def __init__(self, schedule: NoiseSchedule, *, seed: int = 0, nonfinite: str = "fail"):
        super().__init__(nonfinite=nonfinite)
        self.schedule = check_schedule(schedule, "diffusion_objective(schedule)")
        self.noise = DiffusionNoise(self.schedule, _check_seed(seed, "diffusion_objective seed"))

    def compute(self, net: torch.nn.Module, batch: Any, ctx: Any) -> ObjectiveResult:
        x0 = clean_points(batch)
        if x0.device != ctx.device:
            x0 = x0.to(ctx.device)
        t, eps = self.noise.draw(x0)
        pred = net(noised(self.schedule, x0, t, eps), t)
        if ctx.window_size == 1 and ctx.world_size == 1:
            # a lone micro-batch trains on the mean itself, as a hand-written loop does
            return ObjectiveResult([LossTerm("mse", F.mse_loss(pred, eps), 1)])
        squared = F.mse_loss(pred, eps, reduction="sum")
        return ObjectiveResult([LossTerm("mse", squared, eps.numel())])

    def check(self, model: Any, params: Any) -> None:
        check_request(model, params, step=False)


def diffusion_objective(
    schedule: NoiseSchedule, *, seed: int = 0, nonfinite: str = "fail"
) -> DiffusionObjective:
    """The DDPM loss as an ``Objective``: ``model.train(params, objective=...)``.
    ``seed`` seeds its own generator of timesteps and noise."""
    return DiffusionObjective(schedule, seed=seed, nonfinite=nonfinite)


class DiffusionStep(_OwnsNoise):
    """``diffusion_train_step_factory(schedule)``: the update, owned by the step."""

    def __init__(self, schedule: NoiseSchedule, seed: int) -> None:
        self.schedule = check_schedule(schedule, "diffusion_train_step_factory(schedule)")
        self.noise = DiffusionNoise(self.schedule, seed)

    def __repr__(self) -> str:  # how a refusal names the step
        return f"diffusion_train_step_factory({self.schedule!r}, seed={self.noise.seed})"

    def check(self, model: Any, params: Any) -> None:
        check_request(model, params, step=True)

    def __call__(self, ctx: Any) -> EDP:
        x0 = clean_points(ctx.batch)
        if ctx.device is not None and x0.device != ctx.device:
            x0 = x0.to(ctx.device)
        t, eps = self.noise.draw(x0)
        zero_grad(ctx.optimizer)
        loss = F.mse_loss(ctx.model(noised(self.schedule, x0, t, eps), t), eps)
        loss.backward()
        if ctx.grad_clip_norm:
            params = [p for g in ctx.optimizer.param_groups for p in g["params"]]
            clip_grad_norm(params, ctx.grad_clip_norm)
        ctx.optimizer.step()
        ctx.report_update()
        return EDP(loss=float(loss.detach()), samples=int(x0.shape[0]))


def diffusion_train_step_factory(schedule: NoiseSchedule, *, seed: int = 0) -> DiffusionStep:
    """The DDPM loss as a ``train_step_fn`` (fp32 only: a reduced precision policy is
    refused before any run; use ``diffusion_objective`` for one)."""
    return full_precision_only(DiffusionStep(schedule, _check_seed(seed, "seed")))
