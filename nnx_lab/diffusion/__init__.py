"""Denoising diffusion (DDPM) on the step and objective hooks (§3.3): issue 25.

``NoiseSchedulers`` (linear, cosine), ``DiffusionMLP`` (registered as a model factory
on import, named by ``diffusion_mlp_spec``), the loss as ``diffusion_objective`` and as
``diffusion_train_step_factory``, and ``sample`` / ``denoising_chain``. See
docs/diffusion.md.
"""

from .mlp import DiffusionMLP, diffusion_mlp_spec, timestep_embedding
from .sampling import DenoisingChain, denoising_chain, sample
from .schedule import NoiseSchedule, NoiseSchedulers
from .training import (
    DiffusionObjective,
    DiffusionStep,
    diffusion_objective,
    diffusion_train_step_factory,
)

__all__ = [
    "DenoisingChain",
    "DiffusionMLP",
    "DiffusionObjective",
    "DiffusionStep",
    "NoiseSchedule",
    "NoiseSchedulers",
    "denoising_chain",
    "diffusion_mlp_spec",
    "diffusion_objective",
    "diffusion_train_step_factory",
    "sample",
    "timestep_embedding",
]
