"""The paradigms' steps in real runs (§3.4): the mixing generators are checkpointed,
so 2 + 2 epochs equal 4 bit for bit; distillation logs its soft and hard terms and
leaves the teacher as it was."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from step_factories import mlp_model, step_lines, tabular_params
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    Losses,
    Nets,
    NNConvParams,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
)
from nnx_lab.paradigms import (
    cutmix_train_step_factory,
    kd_objective,
    kd_train_step_factory,
    mixup_train_step_factory,
    simclr_train_step_factory,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _tabular(root, n_epochs, **kw):
    return tabular_params(root, n_epochs, n=96, **kw)


def _images(root, n_epochs, **kw):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(48, 1, 8, 8, generator=g)
    y = (X.mean(dim=(1, 2, 3)) > 0.5).long() + (X[:, 0, :4, :4].mean(dim=(1, 2)) > 0.5).long()
    loader = DataLoader(
        TensorDataset(X, y), batch_size=12, shuffle=True, generator=torch.Generator().manual_seed(1)
    )
    return NNTrainParams(
        n_epochs=n_epochs,
        seed=3,
        train_loader=loader,
        optim=NNOptimParams(max_lr=1e-2),
        runs_root=str(root),
        **kw,
    )


def _conv_model():
    conv = NNConvParams(output_dim=3, in_channels=1, image_size=8, conv_channels=(4,))
    return NNModel(conv, NNModelParams(net=Nets.CONV, loss=Losses.CROSS_ENTROPY))


CASES = {
    "mixup": (mixup_train_step_factory, mlp_model, _tabular),
    "cutmix": (cutmix_train_step_factory, _conv_model, _images),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_split_run_equals_the_uninterrupted_one_bit_for_bit(tmp_path, name):
    factory, make_model, make_params = CASES[name]
    full_model = make_model()
    full = full_model.train(make_params(tmp_path, 4), train_step_fn=factory(alpha=0.4, seed=7))

    first = make_model().train(make_params(tmp_path, 2), train_step_fn=factory(alpha=0.4, seed=7))
    resumed_model = make_model()
    resumed = resumed_model.train(
        make_params(tmp_path, 2, resume_from_run_id=first.id),
        train_step_fn=factory(alpha=0.4, seed=7),
    )
    assert name in resumed.resume_status["restored"]
    steps = step_lines(full)
    assert len(steps) == 4 * len(make_params(tmp_path, 1).train_loader)
    assert step_lines(resumed) == steps  # the parent's steps, then its own: the same draws
    assert len({s[2]["lam"] for s in steps}) > 3  # fresh draws (CutMix's lam: whole pixels)
    for key, weight in full_model.net.state_dict().items():
        assert torch.equal(weight, resumed_model.net.state_dict()[key]), key
    # the generator's state travels in safetensors, never pickle
    files = {p.suffix for p in first.run_dir.rglob("*") if p.is_file()}
    assert ".safetensors" in files
    assert not files & {".pt", ".pkl", ".pickle"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_resume_without_the_generator_state_would_draw_otherwise(tmp_path, name):
    """The control for the test above: a fresh generator at epoch 3 trains differently."""
    factory, make_model, make_params = CASES[name]
    full = make_model().train(make_params(tmp_path, 4), train_step_fn=factory(alpha=0.4, seed=7))
    other = make_model().train(make_params(tmp_path, 4), train_step_fn=factory(alpha=0.4, seed=8))
    assert other.id != full.id  # the seed enters the run id
    assert step_lines(other)[0][2] != step_lines(full)[0][2]


def _teacher(tmp_path):
    teacher = NNModel(net_params=NNParams(input_dim=6, output_dim=3, hidden_dims=[32]))
    teacher.train(_tabular(tmp_path / "teacher", 3))
    return teacher


@pytest.mark.parametrize("form", ["step", "objective"])
def test_distillation_logs_soft_and_hard_and_leaves_the_teacher_alone(tmp_path, form):
    teacher = _teacher(tmp_path)
    before = copy.deepcopy(teacher.net.state_dict())
    student = mlp_model()
    if form == "step":
        hook = {"train_step_fn": kd_train_step_factory(teacher, alpha=0.6, temperature=3.0)}
    else:
        hook = {"objective": kd_objective(teacher, alpha=0.6, temperature=3.0)}
    run = student.train(_tabular(tmp_path, 2), **hook)
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [x for x in lines if x["event"] == "step"]
    assert steps
    assert all(set(x["terms"]) >= {"soft", "hard"} for x in steps)
    for x in steps:
        expected = 0.6 * x["terms"]["soft"] + 0.4 * x["terms"]["hard"]
        assert x["loss"] == pytest.approx(expected, rel=1e-5)
    assert steps[-1]["terms"]["soft"] < steps[0]["terms"]["soft"]  # the student learns the teacher
    for key, value in teacher.net.state_dict().items():
        assert torch.equal(value, before[key]), key
    assert not teacher.net.training
    assert not any(p.requires_grad for p in teacher.net.parameters())


def test_the_kd_settings_and_the_teacher_enter_the_run_id(tmp_path):
    teacher = _teacher(tmp_path)
    other = copy.deepcopy(teacher)
    with torch.no_grad():
        next(other.net.parameters()).add_(1e-3)  # another teacher's weights
    params = _tabular(tmp_path, 1)
    ids = {
        mlp_model().preflight(params, **{hook: factory(t, alpha=a)}).run_id
        for hook, factory in (
            ("train_step_fn", kd_train_step_factory),
            ("objective", kd_objective),
        )
        for a in (0.3, 0.7)
        for t in (teacher, other)
    }
    assert len(ids) == 8


@pytest.mark.parametrize("with_labels", [False, True])
def test_simclr_trains_on_paired_views(tmp_path, with_labels):
    g = torch.Generator().manual_seed(0)
    items = torch.randn(64, 6, generator=g)
    a = items + 0.05 * torch.randn(64, 6, generator=g)
    b = items + 0.05 * torch.randn(64, 6, generator=g)
    tensors = (a, b, torch.arange(64)) if with_labels else (a, b)  # (a, b): views, not (X, y)
    loader = DataLoader(TensorDataset(*tensors), batch_size=16)
    model = NNModel(net_params=NNParams(input_dim=6, output_dim=4, hidden_dims=[16]))
    step = simclr_train_step_factory(temperature=0.5)
    run = model.train(
        NNTrainParams(
            n_epochs=6,
            seed=0,
            train_loader=loader,
            optim=NNOptimParams(max_lr=1e-2),
            runs_root=str(tmp_path),
        ),
        train_step_fn=step,
    )
    losses = [s[1] for s in step_lines(run)]
    assert len(losses) == 24
    assert sum(losses[-4:]) < sum(losses[:4])  # the views of an item move together
    # the step's loss is NT-Xent of the trained network on a batch
    from nnx_lab.paradigms import nt_xent_loss

    with torch.no_grad():
        z = model.net(torch.cat([a[:16], b[:16]]))
        floor = float(nt_xent_loss(z[:16], z[16:], 0.5))
    assert floor < losses[0]
