"""Noise schedules (§3.3): the betas of a DDPM forward process and what follows from them.

``NoiseSchedulers.LINEAR(T, beta_start=1e-4, beta_end=0.02)`` spaces the betas evenly
(Ho et al. 2020); ``NoiseSchedulers.COSINE(T, s=0.008)`` derives them from
``alpha_bar(t) = f(t) / f(0)``, ``f(t) = cos(((t / T + s) / (1 + s)) · π / 2)²`` (Nichol &
Dhariwal 2021), each beta clipped at ``max_beta`` so the last steps stay invertible.

Everything is computed in float64: ``alpha_bar`` is a product of up to thousands of
factors, and float32 loses the small ``1 - alpha_bar`` of the first steps. The training
and sampling code casts the few columns it reads to the data's dtype once per device.
Index ``t`` runs ``0 .. T-1``: ``alpha_bar[t]`` is the signal kept after ``t + 1``
noising steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch

from ..errors import ConfigError

__all__ = ["NoiseSchedule", "NoiseSchedulers"]


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _steps(T: object) -> int:
    if isinstance(T, bool) or not isinstance(T, int) or T < 1:
        raise ConfigError("NoiseSchedulers T", T, "pass the number of diffusion steps, an int >= 1")
    return T


@dataclass(frozen=True, eq=False)
class NoiseSchedule:
    """One schedule: ``betas``, ``alphas = 1 - betas``, ``alpha_bar`` (their running
    product) and ``posterior_variance`` (the variance of q(x_{t-1} | x_t, x_0)), each a
    float64 tensor of ``T`` values. ``config`` is the JSON recipe."""

    kind: str
    T: int
    betas: torch.Tensor
    config: dict[str, Any]
    alphas: torch.Tensor = field(init=False)
    alpha_bar: torch.Tensor = field(init=False)
    posterior_variance: torch.Tensor = field(init=False)
    _cast: dict[Any, dict[str, torch.Tensor]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        alphas = 1.0 - self.betas
        alpha_bar = torch.cumprod(alphas, dim=0)
        previous = torch.cat([alpha_bar.new_ones(1), alpha_bar[:-1]])
        posterior = self.betas * (1.0 - previous) / (1.0 - alpha_bar)
        for name, value in (
            ("alphas", alphas),
            ("alpha_bar", alpha_bar),
            ("posterior_variance", posterior),
        ):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_cast", {})

    def columns(self, device: torch.device, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        """The per-step coefficients the loss and the sampler read, cast once per
        (device, dtype) and kept."""
        key = (str(device), dtype)
        held = self._cast.get(key)
        if held is None:
            f64 = {
                "sqrt_alpha_bar": self.alpha_bar.sqrt(),
                "sqrt_one_minus_alpha_bar": (1.0 - self.alpha_bar).sqrt(),
                "recip_sqrt_alpha": self.alphas.rsqrt(),
                "eps_coef": self.betas / (1.0 - self.alpha_bar).sqrt(),
                "sigma_posterior": self.posterior_variance.sqrt(),
                "sigma_beta": self.betas.sqrt(),
            }
            held = {k: v.to(device=device, dtype=dtype) for k, v in f64.items()}
            self._cast[key] = held
        return held

    def identity(self) -> dict[str, Any]:
        """What a run id records of the schedule: its recipe."""
        return {"kind": self.kind, **self.config}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config.items())
        return f"NoiseSchedule({self.kind}, {args})"


def _linear(T: int, beta_start: float, beta_end: float) -> NoiseSchedule:
    for name, value in (("beta_start", beta_start), ("beta_end", beta_end)):
        if not _is_number(value) or not 0.0 < value < 1.0:
            raise ConfigError(f"NoiseSchedulers.LINEAR {name}", value, "a number in (0, 1)")
    if not beta_start < beta_end:
        raise ConfigError(
            "NoiseSchedulers.LINEAR beta_end",
            beta_end,
            f"a value above beta_start={beta_start} (the noise grows along the chain)",
        )
    betas = torch.linspace(beta_start, beta_end, T, dtype=torch.float64)
    config = {"T": T, "beta_start": float(beta_start), "beta_end": float(beta_end)}
    return NoiseSchedule("linear", T, betas, config)


def cosine_alpha_bar(T: int, s: float) -> torch.Tensor:
    """``alpha_bar`` at ``t = 0 .. T`` (T + 1 values, the first 1) of the cosine schedule."""
    t = torch.arange(T + 1, dtype=torch.float64)
    f = torch.cos((t / T + s) / (1.0 + s) * (math.pi / 2)) ** 2
    return f / f[0]


def _cosine(T: int, s: float, max_beta: float) -> NoiseSchedule:
    if not _is_number(s) or not 0.0 <= s < 1.0:
        raise ConfigError("NoiseSchedulers.COSINE s", s, "a small offset in [0, 1), e.g. 0.008")
    if not _is_number(max_beta) or not 0.0 < max_beta < 1.0:
        raise ConfigError("NoiseSchedulers.COSINE max_beta", max_beta, "a number in (0, 1)")
    bar = cosine_alpha_bar(T, s)
    betas = (1.0 - bar[1:] / bar[:-1]).clamp(max=max_beta)
    config = {"T": T, "s": float(s), "max_beta": float(max_beta)}
    return NoiseSchedule("cosine", T, betas, config)


class NoiseSchedulers(Enum):
    """The schedules, as factories (like ``Nets``): ``NoiseSchedulers.LINEAR(T=1000)``,
    ``NoiseSchedulers.COSINE(T=1000, s=0.008)``."""

    LINEAR = "linear"
    COSINE = "cosine"

    def __str__(self) -> str:
        return self.value

    def __call__(
        self,
        T: int = 1000,
        *,
        beta_start: float = 1e-4,
        beta_end: float = 0.02,
        s: float = 0.008,
        max_beta: float = 0.999,
    ) -> NoiseSchedule:
        steps = _steps(T)
        if self is NoiseSchedulers.LINEAR:
            return _linear(steps, beta_start, beta_end)
        return _cosine(steps, s, max_beta)


def check_schedule(schedule: object, field_name: str) -> NoiseSchedule:
    if not isinstance(schedule, NoiseSchedule):
        raise ConfigError(
            field_name,
            type(schedule).__name__,
            "pass a schedule: NoiseSchedulers.LINEAR(T) or NoiseSchedulers.COSINE(T)",
        )
    return schedule
