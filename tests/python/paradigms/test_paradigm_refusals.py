"""The paradigms refuse before any run directory exists (§3.4): a teacher of another
class count or inside the student, CutMix on inputs that are not images, SimCLR on
batches that are not paired views, accumulation, a reduced precision policy."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import NNModel, NNModelParams, NNOptimParams, NNParams, NNTrainParams
from nnx_lab.errors import ConfigError, DataError
from nnx_lab.paradigms import (
    cutmix_train_step_factory,
    kd_objective,
    kd_train_step_factory,
    mixup_train_step_factory,
    simclr_train_step_factory,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _params(root, loader, **kw):
    return NNTrainParams(
        n_epochs=1, train_loader=loader, optim=NNOptimParams(max_lr=1e-2), runs_root=str(root), **kw
    )


def _rows(n=32, d=6, k=3):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, d, generator=g)
    return X, torch.randint(0, k, (n,), generator=g)


def _model(out=3, **kw):
    return NNModel(net_params=NNParams(input_dim=6, output_dim=out, hidden_dims=[8]), **kw)


def _refused(root, model, params, error, match, **hook):
    with pytest.raises(error, match=match) as info:
        model.train(params, **hook)
    assert list(root.iterdir()) == [], "a refused request left something on disk"
    return info.value


@pytest.mark.parametrize("form", [kd_train_step_factory, kd_objective])
def test_a_teacher_with_another_class_count_is_refused(tmp_path, form):
    root = tmp_path / "runs"
    root.mkdir()
    loader = DataLoader(TensorDataset(*_rows()), batch_size=8)
    hook = "train_step_fn" if form is kd_train_step_factory else "objective"
    err = _refused(
        root,
        _model(),
        _params(root, loader),
        ConfigError,
        "class count",
        **{hook: form(_model(out=5).net, alpha=0.5)},
    )
    assert err.field == "teacher"
    assert "(5,)" in str(err)
    assert "(3,)" in str(err)


def test_a_teacher_inside_the_student_is_refused(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    student = _model()
    loader = DataLoader(TensorDataset(*_rows()), batch_size=8)
    for teacher in (student.net, student.net.layers[2]):  # the student, a part of it
        step = kd_train_step_factory(teacher, alpha=0.5)
        _refused(root, student, _params(root, loader), ConfigError, "optimizer", train_step_fn=step)


def test_cutmix_on_tabular_batches_is_refused(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    loader = DataLoader(TensorDataset(*_rows()), batch_size=8)
    err = _refused(
        root,
        _model(),
        _params(root, loader),
        DataError,
        r"\(N, C, H, W\)",
        train_step_fn=cutmix_train_step_factory(alpha=1.0),
    )
    assert err.field == "NNTrainParams.train_loader"


def test_mixup_on_token_ids_is_refused(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    X, y = _rows()
    tokens = torch.randint(0, 10, X.shape, generator=torch.Generator().manual_seed(1))
    loader = DataLoader(TensorDataset(tokens, y), batch_size=8)
    model = NNModel(
        module=torch.nn.Sequential(
            torch.nn.Embedding(10, 4), torch.nn.Flatten(), torch.nn.Linear(24, 3)
        )
    )
    _refused(
        root,
        model,
        _params(root, loader),
        DataError,
        "floating-point",
        train_step_fn=mixup_train_step_factory(0.2),
    )


def test_simclr_on_batches_without_views_is_refused(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    X, _ = _rows()
    loader = DataLoader(TensorDataset(X), batch_size=8)  # one tensor a batch: no views
    _refused(
        root,
        _model(out=4),
        _params(root, loader),
        DataError,
        "paired views",
        train_step_fn=simclr_train_step_factory(0.5),
    )


@pytest.mark.parametrize(
    "step",
    [
        lambda: mixup_train_step_factory(0.2),
        lambda: kd_train_step_factory(_model().net),
    ],
)
def test_accumulation_is_refused_not_ignored(tmp_path, step):
    root = tmp_path / "runs"
    root.mkdir()
    loader = DataLoader(TensorDataset(*_rows()), batch_size=8)
    err = _refused(
        root,
        _model(),
        _params(root, loader, accumulation_steps=2),
        ConfigError,
        "accumulation_steps=1",
        train_step_fn=step(),
    )
    assert err.field == "NNTrainParams.accumulation_steps"


def test_the_steps_refuse_a_reduced_precision_policy(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    loader = DataLoader(TensorDataset(*_rows()), batch_size=8)
    model = NNModel(
        net_params=NNParams(input_dim=6, output_dim=3, hidden_dims=[8]),
        params=NNModelParams(precision="bf16"),
    )
    _refused(
        root,
        model,
        _params(root, loader),
        ConfigError,
        "full_precision_only",
        train_step_fn=mixup_train_step_factory(0.2),
    )
