"""Run ids that tell different runs apart: the loader's generator and collate_fn enter
the data identity.

Part of the hardening review: each test tries to break one promise.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import engine_factories as f
import pytest
import torch
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

ROOT = Path(__file__).resolve().parents[3]


# -- run ids that tell different runs apart ------------------------------------------
def _shuffled(seed: int, **kw):
    X, y, _, _ = f.data()
    return DataLoader(
        TensorDataset(X, y),
        batch_size=32,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
        **kw,
    )


def test_loaders_that_differ_in_their_generators_seed_get_different_ids(runs_root):
    a = f.model().train(f.train_params(runs_root, n_epochs=1, train_loader=_shuffled(1)))
    b = f.model().train(f.train_params(runs_root, n_epochs=1, train_loader=_shuffled(2)))
    assert a.id != b.id
    assert a.status.value == b.status.value == "finished"
    sampler = RandomSampler(
        TensorDataset(*f.data()[:2]), generator=torch.Generator().manual_seed(3)
    )
    c = f.model().train(
        f.train_params(
            runs_root,
            n_epochs=1,
            train_loader=DataLoader(sampler.data_source, batch_size=32, sampler=sampler),
        )
    )
    assert c.id not in (a.id, b.id)


def test_a_collate_fn_enters_the_data_identity(runs_root):
    def scaled(batch):
        X, y = torch.utils.data.default_collate(batch)
        return X * 10, y

    plain = f.model().train(f.train_params(runs_root, n_epochs=1, train_loader=_shuffled(1)))
    scaled_run = f.model().train(
        f.train_params(runs_root, n_epochs=1, train_loader=_shuffled(1, collate_fn=scaled))
    )
    assert scaled_run.id != plain.id
    assert scaled_run.config["data"]["train"]["collate_fn"]["name"].endswith("scaled")


def test_an_unreadable_collate_fn_warns_and_data_id_settles_it(runs_root):
    # A callable whose class has no source file nnx_lab could fingerprint.
    Collate = type("Collate", (), {"__call__": lambda self, b: torch.utils.data.default_collate(b)})
    loader = _shuffled(1, collate_fn=Collate())
    with pytest.warns(UserWarning, match="cannot fingerprint the collate_fn"):
        f.model().train(f.train_params(runs_root / "a", n_epochs=1, train_loader=loader))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f.model().train(
            f.train_params(runs_root / "b", n_epochs=1, train_loader=loader, data_id="toy-v1")
        )
