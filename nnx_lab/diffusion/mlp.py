"""``DiffusionMLP``: a timestep-conditioned noise predictor for low-dimensional data.

``forward(x, t)`` embeds the integer timestep ``t`` sinusoidally (the transformer's
position code, as in DDPM), concatenates it to ``x`` and returns the predicted noise, of
``x``'s shape. The network is registered as the factory ``"nnx_lab.diffusion_mlp"``
(version 1) when ``nnx_lab.diffusion`` is imported, so ``diffusion_mlp_spec(...)`` names
it as data: the run id, the checkpoint and ``NNModel.from_checkpoint`` rebuild it from
that recipe with no code in any file.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ..engine.registry import ModelSpec, register_model_factory
from ..errors import ConfigError

__all__ = ["FACTORY_ID", "DiffusionMLP", "diffusion_mlp_spec", "timestep_embedding"]

FACTORY_ID = "nnx_lab.diffusion_mlp"
FACTORY_VERSION = 1


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """``(rows, dim)`` sines and cosines of ``t`` at geometrically spaced frequencies."""
    half = dim // 2
    freqs = torch.exp(
        -math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half
    )
    args = t.to(torch.float32)[:, None] * freqs[None, :]
    emb = torch.cat([torch.sin(args), torch.cos(args)], dim=1)
    if dim % 2:
        emb = torch.cat([emb, emb.new_zeros(len(emb), 1)], dim=1)
    return emb


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"DiffusionMLP {name}", value, "a positive int")
    return value


class DiffusionMLP(nn.Module):
    """``data_dim`` inputs plus a ``time_dim`` embedding, ``n_layers`` hidden layers of
    ``hidden_dim`` units (SiLU), ``data_dim`` outputs (the noise ε)."""

    def __init__(
        self, data_dim: int = 2, hidden_dim: int = 128, n_layers: int = 3, time_dim: int = 32
    ) -> None:
        super().__init__()
        self.data_dim = _positive("data_dim", data_dim)
        self.time_dim = _positive("time_dim", time_dim)
        _positive("hidden_dim", hidden_dim)
        _positive("n_layers", n_layers)
        layers: list[nn.Module] = []
        width = data_dim + time_dim
        for _ in range(n_layers):
            layers += [nn.Linear(width, hidden_dim), nn.SiLU()]
            width = hidden_dim
        layers.append(nn.Linear(width, data_dim))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, t: torch.Tensor | int | None = None) -> torch.Tensor:
        # t=None is step 0 (the last denoising step): predict(X) and the engine's
        # one-argument output probe see a plain network of x.
        if t is None:
            t = 0
        if not isinstance(t, torch.Tensor):
            t = torch.full((x.shape[0],), int(t), device=x.device)
        elif t.ndim == 0:
            t = t.expand(x.shape[0])
        emb = timestep_embedding(t, self.time_dim).to(x.dtype)
        return self.layers(torch.cat([x, emb], dim=1))


_KEYS = ("data_dim", "hidden_dim", "n_layers", "time_dim")


def _factory(config: dict[str, Any]) -> DiffusionMLP:
    unknown = sorted(set(config) - set(_KEYS))
    if unknown:
        raise ConfigError(
            "ModelSpec(nnx_lab.diffusion_mlp).config", unknown, f"use only the keys {_KEYS}"
        )
    return DiffusionMLP(**config)


def diffusion_mlp_spec(
    data_dim: int = 2,
    hidden_dim: int = 128,
    n_layers: int = 3,
    time_dim: int = 32,
    *,
    seed: int = 0,
) -> ModelSpec:
    """The ``ModelSpec`` of a ``DiffusionMLP``: ``NNModelParams(net=diffusion_mlp_spec(2))``.
    The sizes are checked here, before any model exists."""
    config = {"data_dim": data_dim, "hidden_dim": hidden_dim, "n_layers": n_layers}
    config["time_dim"] = time_dim
    for name, value in config.items():
        _positive(name, value)
    return ModelSpec(FACTORY_ID, FACTORY_VERSION, config, seed=seed)


register_model_factory(FACTORY_ID, FACTORY_VERSION, _factory)
