"""DDPM ancestral sampling (Ho et al. 2020, algorithm 2), and the chain it walks.

``sample(model, schedule, n, generator=...)`` starts from ``x_T ~ N(0, I)`` and takes
``T`` denoising steps, ``x_{t-1} = (x_t - β_t / √(1-ᾱ_t) · ε_θ(x_t, t)) / √α_t + σ_t z``
(no noise on the last). Every draw comes from ``generator`` (a CPU ``torch.Generator``;
a fresh one seeded 0 when omitted), never from the global stream nor from an objective's
own generator: a preview in a callback leaves the training exactly as it was. The
network runs under ``torch.no_grad()`` in eval mode and every module's mode is put
back. ``denoising_chain`` keeps every ``x_t`` of the batch, for a slider.

The precision policy does not reach sampling (§2.2): it runs in the network's dtype.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import ConfigError
from .schedule import NoiseSchedule, check_schedule

__all__ = ["DenoisingChain", "denoising_chain", "sample"]

_VARIANCES = ("posterior", "beta")


@dataclass(frozen=True)
class DenoisingChain:
    """``states[k]`` is ``x_{timesteps[k]}``: ``timesteps`` runs ``T, T-1, ..., 0``
    (``states[0]`` the starting noise, ``states[-1]`` the samples); ``states`` is a
    CPU tensor ``(T + 1, n, *shape)``."""

    timesteps: tuple[int, ...]
    states: torch.Tensor

    @property
    def samples(self) -> torch.Tensor:
        return self.states[-1]

    def at(self, t: int) -> torch.Tensor:
        """``x_t`` of the batch."""
        if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t <= self.timesteps[0]:
            raise ConfigError("DenoisingChain.at(t)", t, f"an int in [0, {self.timesteps[0]}]")
        return self.states[self.timesteps[0] - t]


def _network(model: Any) -> torch.nn.Module:
    net = model if isinstance(model, torch.nn.Module) else getattr(model, "net", model)
    if not isinstance(net, torch.nn.Module):
        raise ConfigError("sample(model)", type(model).__name__, "pass an NNModel or an nn.Module")
    return net


@contextmanager
def _evaluating(net: torch.nn.Module) -> Iterator[None]:
    modes = [(m, m.training) for m in net.modules()]
    net.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        for module, mode in modes:
            module.train(mode)


def _arguments(
    net: torch.nn.Module, n: object, generator: object, shape: object, variance: object
) -> tuple[torch.Generator, tuple[int, ...]]:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError("sample n", n, "the number of samples, an int >= 1")
    if generator is None:
        generator = torch.Generator().manual_seed(0)
    if not isinstance(generator, torch.Generator) or generator.device.type != "cpu":
        raise ConfigError(
            "sample generator",
            generator,
            "a CPU torch.Generator of its own (torch.Generator().manual_seed(k)), not the "
            "objective's: a preview must not move the training's draws",
        )
    if shape is None:
        dim = getattr(net, "data_dim", None)
        if dim is None:
            raise ConfigError(
                "sample shape", None, "pass shape=(dims,): the network does not say its data_dim"
            )
        shape = (int(dim),)
    if isinstance(shape, int):
        shape = (shape,)
    if not isinstance(shape, tuple | list) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in shape
    ):
        raise ConfigError("sample shape", shape, "a tuple of positive ints, one point's shape")
    if variance not in _VARIANCES:
        raise ConfigError("sample variance", variance, f"one of {_VARIANCES}")
    return generator, tuple(shape)


def _walk(
    net: torch.nn.Module,
    schedule: NoiseSchedule,
    n: int,
    generator: torch.Generator,
    shape: tuple[int, ...],
    variance: str,
    keep: bool,
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    first = next(iter(net.parameters()), None)
    device = first.device if first is not None else torch.device("cpu")
    dtype = first.dtype if first is not None else torch.float32
    cols = schedule.columns(device, dtype)
    sigma = cols["sigma_posterior" if variance == "posterior" else "sigma_beta"]
    x = torch.randn((n, *shape), generator=generator, dtype=dtype).to(device)
    kept = [x.cpu()] if keep else []
    with _evaluating(net):
        for t in range(schedule.T - 1, -1, -1):
            steps = torch.full((n,), t, dtype=torch.long, device=device)
            eps = net(x, steps)
            x = cols["recip_sqrt_alpha"][t] * (x - cols["eps_coef"][t] * eps)
            if t > 0:
                z = torch.randn((n, *shape), generator=generator, dtype=dtype).to(device)
                x = x + sigma[t] * z
            if keep:
                kept.append(x.cpu())
    return x, kept


def sample(
    model: Any,
    schedule: NoiseSchedule,
    n: int,
    *,
    generator: torch.Generator | None = None,
    shape: tuple[int, ...] | None = None,
    variance: str = "posterior",
) -> torch.Tensor:
    """``n`` samples ``x_0`` (on the network's device), by ``T`` ancestral steps.
    ``variance``: ``"posterior"`` (σ² = β̃_t) or ``"beta"`` (σ² = β_t); ``shape`` is one
    point's shape (default: the network's ``data_dim``)."""
    net = _network(model)
    schedule = check_schedule(schedule, "sample(schedule)")
    gen, shape = _arguments(net, n, generator, shape, variance)
    x, _ = _walk(net, schedule, n, gen, shape, variance, keep=False)
    return x


def denoising_chain(
    model: Any,
    schedule: NoiseSchedule,
    n: int,
    *,
    generator: torch.Generator | None = None,
    shape: tuple[int, ...] | None = None,
    variance: str = "posterior",
) -> DenoisingChain:
    """``sample``'s walk with every ``x_t`` kept: ``chain.states[-1]`` equals
    ``sample(...)`` with an equal generator."""
    net = _network(model)
    schedule = check_schedule(schedule, "denoising_chain(schedule)")
    gen, shape = _arguments(net, n, generator, shape, variance)
    _, kept = _walk(net, schedule, n, gen, shape, variance, keep=True)
    return DenoisingChain(tuple(range(schedule.T, -1, -1)), torch.stack(kept))
