"""Content-addressed run ids and determinism."""

from __future__ import annotations

import engine_factories as f
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    Activations,
    Losses,
    NNOptimParams,
    NNSchedulerParams,
    Optims,
    PrecisionPolicy,
)


def _run_id_and_weights(root, model_kw=None, **train_kw):
    model = f.model(**(model_kw or {}))
    run = model.train(f.train_params(root, n_epochs=2, **train_kw))
    return run.id, {k: v.clone() for k, v in model.net.state_dict().items()}


def test_same_seed_and_data_give_the_same_weights_bit_for_bit_and_the_same_id(tmp_path):
    id_a, w_a = _run_id_and_weights(tmp_path / "a")
    id_b, w_b = _run_id_and_weights(tmp_path / "b")
    assert id_a == id_b
    assert w_a.keys() == w_b.keys()
    for k in w_a:
        assert torch.equal(w_a[k], w_b[k]), k


def test_a_different_seed_gives_different_weights(tmp_path):
    _, w_a = _run_id_and_weights(tmp_path / "a")
    _, w_b = _run_id_and_weights(tmp_path / "b", seed=7)
    assert any(not torch.equal(w_a[k], w_b[k]) for k in w_a)


def _id(root, model_kw=None, **train_kw):
    model = f.model(**(model_kw or {}))
    params = f.train_params(root, **{"n_epochs": 1, **train_kw})
    return model.train(params).id


CHANGES = {
    "n_epochs": ({}, {"n_epochs": 2}),
    "seed": ({}, {"seed": 1}),
    "optim.name": ({}, {"optim": NNOptimParams(name=Optims.SGD, max_lr=1e-2)}),
    "optim.max_lr": (
        {},
        {
            "optim": NNOptimParams(
                name=Optims.ADAM, max_lr=2e-2, weight_decay=5e-5, grad_clip_norm=1.0
            )
        },
    ),
    "optim.weight_decay": ({}, {"optim": NNOptimParams(max_lr=1e-2, grad_clip_norm=1.0)}),
    "optim.grad_clip_norm": ({}, {"optim": NNOptimParams(max_lr=1e-2, weight_decay=5e-5)}),
    "optim.momentum": (
        {},
        {
            "optim": NNOptimParams(
                max_lr=1e-2, momentum=(0.8, 0.99), weight_decay=5e-5, grad_clip_norm=1.0
            )
        },
    ),
    "scheduler.factor": (
        {},
        {
            "scheduler": NNSchedulerParams(
                min_lr=1e-7, factor=0.2, patience=3, cooldown=1, threshold=1e-3
            )
        },
    ),
    "scheduler.none": ({}, {"scheduler": None}),
    "accumulation_steps": ({}, {"accumulation_steps": 2}),
    "net.hidden_dims": ({"net": {"hidden_dims": [16]}}, {}),
    "net.dropout_prob": ({"net": {"dropout_prob": 0.2}}, {}),
    "net.activation": ({"net": {"activation": Activations.TANH}}, {}),
    "model.loss": ({"loss": Losses.NEGATIVE_LOG_LIKELIHOOD}, {}),
    "model.precision": ({"precision": PrecisionPolicy("bf16")}, {}),
    "data_id": ({}, {"data_id": "toy-v2"}),
}


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_the_id_changes_with_every_result_affecting_field(tmp_path, field):
    base = _id(tmp_path / "base")
    model_kw, train_kw = CHANGES[field]
    assert _id(tmp_path / "changed", model_kw, **train_kw) != base


def test_the_id_changes_with_the_data(tmp_path):
    base = _id(tmp_path / "a")
    train, val = f.loaders(seed=1)  # same shapes, other values
    assert _id(tmp_path / "b", train_loader=train, val_loader=val) != base
    train, val = f.loaders(batch=16)  # same values, other batching
    assert _id(tmp_path / "c", train_loader=train, val_loader=val) != base
    train, val = f.loaders(shuffle=False)  # same values, other order
    assert _id(tmp_path / "d", train_loader=train, val_loader=val) != base
    train, _ = f.loaders()
    assert _id(tmp_path / "e", train_loader=train, val_loader=None) != base


def test_one_changed_value_in_the_data_changes_the_id(tmp_path):
    X, y, _Xv, _yv = f.data()
    base = _id(
        tmp_path / "a", train_loader=DataLoader(TensorDataset(X, y), batch_size=32), val_loader=None
    )
    X2 = X.clone()
    X2[100, 3] += 1e-6
    other = _id(
        tmp_path / "b",
        train_loader=DataLoader(TensorDataset(X2, y), batch_size=32),
        val_loader=None,
    )
    assert other != base


def test_paths_progress_and_logging_never_change_the_id(tmp_path):
    base = _id(tmp_path / "a")
    assert _id(tmp_path / "b", progress=False, log_every=3) == base
    assert _id(tmp_path / "c", overwrite_existing=True) == base


def test_explicit_fp32_keeps_the_default_id(tmp_path):
    base = _id(tmp_path / "a")
    assert _id(tmp_path / "b", {"precision": PrecisionPolicy("fp32")}) == base


def test_list_of_batches_is_hashed_by_content(tmp_path):
    X, y, _, _ = f.data()
    batches = [(X[i : i + 32], y[i : i + 32]) for i in range(0, 256, 32)]
    a = _id(tmp_path / "a", train_loader=batches, val_loader=None)
    batches2 = [(b[0].clone(), b[1].clone()) for b in batches]
    assert _id(tmp_path / "b", train_loader=batches2, val_loader=None) == a
    batches2[0][0][0, 0] += 1.0
    assert _id(tmp_path / "c", train_loader=batches2, val_loader=None) != a


def test_an_opaque_dataset_warns_and_data_id_names_it(tmp_path):
    X, y, _, _ = f.data()

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return 256

        def __getitem__(self, i):
            return X[i], y[i]

    loader = DataLoader(Rows(), batch_size=32)
    with pytest.warns(UserWarning, match="data_id"):
        _id(tmp_path / "a", train_loader=loader, val_loader=None)
    a = _id(tmp_path / "b", train_loader=loader, val_loader=None, data_id="rows-v1")
    b = _id(tmp_path / "c", train_loader=loader, val_loader=None, data_id="rows-v2")
    assert a != b
