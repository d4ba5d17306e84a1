"""Issue 29: ``lr_finder`` leaves the caller's model and loader as NNx's does."""

from __future__ import annotations

import engine_factories as f
import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset

from nnx_lab import ConfigError, lr_finder


def _data(n: int = 64):
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(n, 8, generator=g), torch.randint(0, 3, (n,), generator=g))


def test_existing_gradients_come_back_and_none_stays_none():
    model = f.model()
    params = list(model.net.parameters())
    for p in params[::2]:
        p.grad = torch.full_like(p, 0.5)
    before = [None if p.grad is None else p.grad.clone() for p in params]
    lr_finder(model.net, DataLoader(_data(), batch_size=16), num_iter=5)
    for p, g in zip(params, before, strict=True):
        if g is None:
            assert p.grad is None
        else:
            assert torch.equal(p.grad, g)


def test_a_batch_samplers_inner_generator_is_restored():
    gen = torch.Generator().manual_seed(7)
    sampler = BatchSampler(RandomSampler(_data(), generator=gen), batch_size=16, drop_last=False)
    loader = DataLoader(_data(), batch_sampler=sampler)
    state = gen.get_state()
    lr_finder(f.model().net, loader, num_iter=5)
    assert torch.equal(gen.get_state(), state)


def test_non_tensor_extra_state_survives():
    class Tagged(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(8, 3)
            self.tag = {"note": "kept", "n": 1}

        def forward(self, x):
            return self.inner(x)

        def get_extra_state(self):
            return dict(self.tag)

        def set_extra_state(self, state):
            self.tag = dict(state)

    net = Tagged()
    lr_finder(net, DataLoader(_data(), batch_size=16), num_iter=5)
    assert net.tag == {"note": "kept", "n": 1}


def test_a_persistent_worker_loader_is_left_as_an_unswept_one():
    def loader():
        return DataLoader(
            _data(),
            batch_size=16,
            shuffle=True,
            num_workers=1,
            persistent_workers=True,
            generator=torch.Generator().manual_seed(3),
        )

    swept, fresh = loader(), loader()
    lr_finder(f.model().net, swept, num_iter=3)
    assert getattr(swept, "_iterator", None) is None  # the sweep's iterator is gone
    first = [y.tolist() for _, y in swept]
    assert first == [y.tolist() for _, y in fresh]
    with pytest.raises(ConfigError, match="live persistent-worker iterator"):
        lr_finder(f.model().net, swept, num_iter=3)  # our epoch above left one live
