"""The mixing steps' Beta draw: the same numbers, and the same generator state after,
as the Marsaglia-Tsang sampler written with ``torch.rand`` / ``torch.randn`` per draw
(the form a resumed run's checkpointed generator was advanced by)."""

from __future__ import annotations

import math

import pytest
import torch

from nnx_lab.paradigms._step import beta_draw


def _gamma_ref(shape: float, gen: torch.Generator) -> float:
    if shape < 1.0:
        u = float(torch.rand((), generator=gen, dtype=torch.float64))
        return _gamma_ref(shape + 1.0, gen) * u ** (1.0 / shape)
    d = shape - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        x = float(torch.randn((), generator=gen, dtype=torch.float64))
        v = (1.0 + c * x) ** 3
        if v <= 0:
            continue
        u = float(torch.rand((), generator=gen, dtype=torch.float64))
        if math.log(max(u, 1e-300)) < 0.5 * x * x + d - d * v + d * math.log(v):
            return d * v


def _beta_ref(alpha: float, gen: torch.Generator) -> float:
    a, b = _gamma_ref(alpha, gen), _gamma_ref(alpha, gen)
    return a / (a + b) if a + b > 0 else 0.5


@pytest.mark.parametrize("alpha", [0.1, 0.4, 1.0, 3.0])
def test_beta_draw_matches_the_per_draw_sampler(alpha):
    mine, ref = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    for _ in range(300):
        assert beta_draw(alpha, mine) == _beta_ref(alpha, ref)
        # the steps draw a permutation between two Beta draws
        assert torch.equal(torch.randperm(9, generator=mine), torch.randperm(9, generator=ref))
    assert torch.equal(mine.get_state(), ref.get_state())
