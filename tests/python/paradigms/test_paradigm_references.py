"""Each paradigm's step against a hand-written reference on the same batch: equal
losses, equal gradients, equal weights after the update (§3.4)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from nnx_lab import TrainStepContext
from nnx_lab.errors import ConfigError
from nnx_lab.paradigms import (
    cutmix_train_step_factory,
    kd_objective,
    kd_train_step_factory,
    mixup_train_step_factory,
    simclr_train_step_factory,
)
from nnx_lab.paradigms._step import beta_draw

pytestmark = pytest.mark.usefixtures("one_torch_thread")

close = {"rtol": 1e-5, "atol": 1e-6}


def _ctx(net, batch, updates, clip=None):
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    return TrainStepContext(
        model=net,
        batch=batch,
        optimizer=opt,
        scaler=None,
        grad_clip_norm=clip,
        extra_metrics=None,
        accumulate_grad_batches=1,
        batch_idx=0,
        epoch_idx=0,
        is_last_batch=None,
        accumulation_state={},
        precision=None,
        report_update=lambda: updates.append(1),
        loss_fn=F.cross_entropy,
        device=torch.device("cpu"),
    )


def _reference_update(net, loss, clip=None):
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    opt.zero_grad()
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(list(net.parameters()), clip)
    opt.step()


def _same(net_a, net_b):
    for (name, a), b in zip(net_a.named_parameters(), net_b.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, **close, msg=name)
        torch.testing.assert_close(a.detach(), b.detach(), **close, msg=name)


def _mlp(seed, d_in=6, k=3, hidden=16):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(d_in, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, k)
    )


def _tabular(n=24, d=6, k=3):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, d, generator=g)
    return X, torch.randint(0, k, (n,), generator=g)


# -- distillation ---------------------------------------------------------------------------


def _kd_reference(student, teacher, X, y, alpha, T):
    s = student(X)
    with torch.no_grad():
        p_t = torch.softmax(teacher(X) / T, dim=1)
    log_p_s = torch.log_softmax(s / T, dim=1)
    # KL(p_t || p_s) row by row, then the batch mean, scaled by T²
    soft = (p_t * (torch.log(p_t) - log_p_s)).sum(dim=1).mean() * T**2
    hard = F.cross_entropy(s, y)
    return alpha * soft + (1 - alpha) * hard, soft, hard


@pytest.mark.parametrize(("alpha", "T"), [(0.5, 4.0), (0.9, 2.0), (0.0, 1.0)])
def test_kd_step_equals_the_hand_written_loss_and_update(alpha, T):
    X, y = _tabular()
    teacher, student = _mlp(1, hidden=32), _mlp(2)
    ref = copy.deepcopy(student)
    teacher_before = copy.deepcopy(teacher.state_dict())
    updates: list[int] = []
    step = kd_train_step_factory(teacher, alpha=alpha, temperature=T)
    edp = step(_ctx(student, (X, y), updates, clip=0.5))
    loss, soft, hard = _kd_reference(ref, teacher, X, y, alpha, T)
    _reference_update(ref, loss, clip=0.5)
    assert updates == [1]
    assert edp.samples == 24
    assert math.isclose(edp.loss, float(loss.detach()), rel_tol=1e-5)
    values, sums = step.current_terms()
    assert math.isclose(float(values["soft"]), float(soft.detach()), rel_tol=1e-5)
    assert math.isclose(float(values["hard"]), float(hard.detach()), rel_tol=1e-5)
    assert sums["soft"][1] == 24
    _same(student, ref)
    # the teacher: frozen, in eval mode, its weights unchanged
    assert not any(p.requires_grad for p in teacher.parameters())
    assert not teacher.training
    assert all(p.grad is None for p in teacher.parameters())
    for name, value in teacher.state_dict().items():
        assert torch.equal(value, teacher_before[name]), name


@pytest.mark.parametrize("change", ["train_one", "add_one"])
def test_a_teacher_put_back_in_training_mode_is_distilled_in_eval_mode(change):
    X, y = _tabular()
    torch.manual_seed(3)
    teacher = torch.nn.Sequential(
        torch.nn.Linear(6, 16), torch.nn.Dropout(0.5), torch.nn.Linear(16, 3)
    )
    step = kd_train_step_factory(teacher, alpha=1.0, temperature=2.0)
    with torch.no_grad():
        expected = teacher(X)  # eval mode: no dropout
    if change == "train_one":
        teacher[1].train()  # one submodule back in training mode, after the factory
    else:
        teacher.append(torch.nn.Dropout(0.5))  # one added after it: a new module trains
    student = _mlp(2)
    ref = copy.deepcopy(student)
    step(_ctx(student, (X, y), [], clip=None))
    assert not any(m.training for m in teacher.modules())
    soft = (
        F.kl_div(
            F.log_softmax(ref(X) / 2.0, 1),
            F.log_softmax(expected / 2.0, 1),
            reduction="sum",
            log_target=True,
        )
        * 4.0
        / 24
    )
    assert math.isclose(float(step.current_terms()[0]["soft"]), float(soft.detach()), rel_tol=1e-5)


def test_kd_objective_has_the_step_s_terms_and_gradients():
    from nnx_lab import NNModel, NNParams, ObjectiveContext

    X, y = _tabular()
    teacher = _mlp(1, hidden=32)
    model = NNModel(net_params=NNParams(input_dim=6, output_dim=3, hidden_dims=[16]))
    ref = copy.deepcopy(model.net)
    objective = kd_objective(teacher, alpha=0.7, temperature=3.0)
    ctx = ObjectiveContext(1, 0, 0, 1, None, torch.device("cpu"), model.loss_fn)
    result = objective(model.net, (X, y), ctx)
    terms = {t.name: t for t in result.terms}
    assert set(terms) == {"soft", "hard"}
    assert terms["soft"].weight == 0.7
    assert math.isclose(terms["hard"].weight, 0.3)
    total = sum(t.weight * t.numerator / t.denominator for t in result.terms)
    total.backward()
    loss, soft, hard = _kd_reference(ref, teacher, X, y, 0.7, 3.0)
    loss.backward()
    torch.testing.assert_close(terms["soft"].numerator / 24, soft, **close)
    torch.testing.assert_close(terms["hard"].numerator / terms["hard"].denominator, hard, **close)
    for a, b in zip(model.net.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, **close)
    torch.testing.assert_close(result.outputs, ref(X), **close)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"alpha": 1.5}, "alpha"),
        ({"alpha": -0.1}, "alpha"),
        ({"temperature": 0.0}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
    ],
)
def test_kd_refuses_bad_weights_at_factory_time(kwargs, field):
    for factory in (kd_train_step_factory, kd_objective):
        with pytest.raises(ConfigError, match=field):
            factory(_mlp(1), **kwargs)
    with pytest.raises(ConfigError, match="teacher"):
        kd_train_step_factory("not a model")


# -- SimCLR ---------------------------------------------------------------------------------


def _nt_xent_by_hand(z_a, z_b, tau):
    """Row by row: −log(exp(sim(i, partner)) / Σ_{k≠i} exp(sim(i, k)))."""
    z = torch.cat([z_a, z_b])
    z = z / z.norm(dim=1, keepdim=True)
    n2 = z.shape[0]
    n = n2 // 2
    losses = []
    for i in range(n2):
        partner = i + n if i < n else i - n
        sims = torch.stack([z[i] @ z[k] / tau for k in range(n2) if k != i])
        pos = z[i] @ z[partner] / tau
        losses.append(torch.logsumexp(sims, 0) - pos)
    return torch.stack(losses).mean()


@pytest.mark.parametrize("tau", [0.5, 0.1])
def test_simclr_step_equals_nt_xent_written_row_by_row(tau):
    g = torch.Generator().manual_seed(3)
    base = torch.randn(10, 6, generator=g)
    a = base + 0.1 * torch.randn(10, 6, generator=g)
    b = base + 0.1 * torch.randn(10, 6, generator=g)
    labels = torch.arange(10)
    net = _mlp(4, k=5)
    ref = copy.deepcopy(net)
    updates: list[int] = []
    edp = simclr_train_step_factory(temperature=tau)(_ctx(net, (a, b, labels), updates))
    loss = _nt_xent_by_hand(ref(a), ref(b), tau)
    _reference_update(ref, loss)
    assert updates == [1]
    assert edp.samples == 10
    assert math.isclose(edp.loss, float(loss.detach()), rel_tol=1e-5)
    _same(net, ref)


def test_simclr_refuses_a_batch_that_is_not_paired_views():
    from nnx_lab.errors import DataError

    step = simclr_train_step_factory()
    with pytest.raises(DataError, match="paired views"):
        step(_ctx(_mlp(0), torch.randn(4, 6), []))
    with pytest.raises(DataError, match="shapes"):
        step(_ctx(_mlp(0), (torch.randn(4, 6), torch.randn(5, 6)), []))
    with pytest.raises(ConfigError, match="temperature"):
        simclr_train_step_factory(temperature=-1)


# -- Mixup and CutMix -----------------------------------------------------------------------


def test_mixup_step_equals_the_hand_written_blend():
    X, y = _tabular()
    net = _mlp(5)
    ref = copy.deepcopy(net)
    updates: list[int] = []
    step = mixup_train_step_factory(alpha=0.4, seed=11)
    edp = step(_ctx(net, (X, y), updates))
    # the documented draws, in order, from a generator seeded alike
    g = torch.Generator().manual_seed(11)
    lam = beta_draw(0.4, g)
    perm = torch.randperm(24, generator=g)
    out = ref(lam * X + (1 - lam) * X[perm])
    loss = lam * F.cross_entropy(out, y) + (1 - lam) * F.cross_entropy(out, y[perm])
    _reference_update(ref, loss)
    assert updates == [1]
    assert math.isclose(edp.loss, float(loss.detach()), rel_tol=1e-5)
    assert math.isclose(float(step.current_terms()[0]["lam"]), lam, rel_tol=1e-6)
    _same(net, ref)
    # the next batch draws afresh: another lambda
    step(_ctx(net, (X, y), updates))
    assert float(step.current_terms()[0]["lam"]) != pytest.approx(lam)


def _conv(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 64, 3),
    )


def test_cutmix_step_equals_the_hand_written_box_paste():
    g = torch.Generator().manual_seed(2)
    X = torch.rand(12, 1, 8, 8, generator=g)
    y = torch.randint(0, 3, (12,), generator=g)
    net = _conv(6)
    ref = copy.deepcopy(net)
    updates: list[int] = []
    step = cutmix_train_step_factory(alpha=1.0, seed=9)
    edp = step(_ctx(net, (X, y), updates))
    g = torch.Generator().manual_seed(9)
    lam0 = beta_draw(1.0, g)
    perm = torch.randperm(12, generator=g)
    cy = int(torch.randint(0, 8, (), generator=g))
    cx = int(torch.randint(0, 8, (), generator=g))
    side_h = side_w = int(8 * math.sqrt(1 - lam0))
    mixed = X.clone()
    kept = 0
    for r in range(8):  # pixel by pixel: inside the clipped box, the partner's pixel
        for c in range(8):
            inside = (
                cy - side_h // 2 <= r < cy + side_h // 2
                and cx - side_w // 2 <= c < cx + side_w // 2
            )
            if inside:
                mixed[:, :, r, c] = X[perm, :, r, c]
            else:
                kept += 1
    lam = kept / 64
    out = ref(mixed)
    loss = lam * F.cross_entropy(out, y) + (1 - lam) * F.cross_entropy(out, y[perm])
    _reference_update(ref, loss)
    assert updates == [1]
    assert math.isclose(edp.loss, float(loss.detach()), rel_tol=1e-5)
    assert math.isclose(float(step.current_terms()[0]["lam"]), lam, rel_tol=1e-6)
    _same(net, ref)


@pytest.mark.parametrize("factory", [mixup_train_step_factory, cutmix_train_step_factory])
@pytest.mark.parametrize("alpha", [0, -1.0, float("inf"), True, "1"])
def test_mixing_refuses_alpha_not_above_zero_at_factory_time(factory, alpha):
    with pytest.raises(ConfigError, match="alpha"):
        factory(alpha=alpha)


def test_cutmix_refuses_inputs_that_are_not_images():
    from nnx_lab.errors import DataError

    X, y = _tabular()
    with pytest.raises(DataError, match=r"\(N, C, H, W\)"):
        cutmix_train_step_factory()(_ctx(_mlp(0), (X, y), []))


@pytest.mark.parametrize("alpha", [0.2, 1.0, 3.0])
def test_the_beta_draws_have_beta_moments(alpha):
    g = torch.Generator().manual_seed(0)
    draws = torch.tensor([beta_draw(alpha, g) for _ in range(4000)], dtype=torch.float64)
    var = 1 / (4 * (2 * alpha + 1))  # Beta(a, a): mean 1/2, variance 1 / (4 (2a + 1))
    assert ((draws >= 0) & (draws <= 1)).all()
    assert abs(float(draws.mean()) - 0.5) < 4 * math.sqrt(var / 4000)
    assert abs(float(draws.var()) - var) < 0.15 * var


def test_simclr_reads_nested_views_as_flat_ones():
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(8, 6, generator=g), torch.randn(8, 6, generator=g)
    losses = []
    for batch in ((a, b), (a, b, torch.arange(8)), ((a, b), torch.arange(8))):
        net = _mlp(4, k=5)
        losses.append(simclr_train_step_factory(0.5)(_ctx(net, batch, [])).loss)
    assert losses[0] == losses[1] == losses[2]
