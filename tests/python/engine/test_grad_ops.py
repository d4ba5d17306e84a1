"""The update's gradient chores and optimizer choice change host time, never a number.

``build_optimizer`` takes torch's multi-tensor Adam/AdamW on CPU, ``clip_grad_norm``
and ``zero_grad`` skip torch's grouping and profiler scope: each is held here to torch's
own result bit for bit, over many steps, dtypes, weight decay and rate changes.
"""

from __future__ import annotations

import math

import pytest
import torch

from nnx_lab import NNOptimParams, Optims
from nnx_lab.engine.grad_ops import clip_grad_norm, zero_grad
from nnx_lab.engine.optim import build_optimizer, load_optimizer_state

SHAPES = [(32, 8), (32,), (16, 32), (16,), (3, 16), (3,)]


def _params(dtype=torch.float32, shapes=SHAPES, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*s, generator=g).to(dtype)) for s in shapes]


def _grads(params, g, step):
    # magnitudes over five decades and an all-zero gradient now and then
    out = []
    for p in params:
        gr = torch.randn(p.shape, generator=g) * 10 ** (step % 5 - 2)
        out.append((gr * 0 if step % 37 == 5 else gr).to(p.dtype))
    return out


@pytest.mark.parametrize("name", [Optims.ADAM, Optims.ADAMW])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_built_adam_equals_torch_default_bit_for_bit(name, dtype, weight_decay):
    optim = NNOptimParams(name=name, max_lr=3e-3, weight_decay=weight_decay)
    ours_p, ref_p = _params(dtype), _params(dtype)
    # two groups with their own rates: the multi-tensor path batches per group
    ours = build_optimizer([ours_p[:2], {"params": ours_p[2:], "lr": 1e-3}], optim)
    assert all(group["foreach"] is True for group in ours.param_groups)
    kind = torch.optim.Adam if name is Optims.ADAM else torch.optim.AdamW
    ref = kind(
        [{"params": ref_p[:2]}, {"params": ref_p[2:], "lr": 1e-3}],
        lr=3e-3,
        betas=optim.momentum,
        weight_decay=weight_decay,
    )
    assert ref.param_groups[0]["foreach"] is None  # torch's CPU default: single-tensor
    g = torch.Generator().manual_seed(1)
    for step in range(300):
        for a, b, gr in zip(ours_p, ref_p, _grads(ours_p, g, step), strict=True):
            a.grad, b.grad = gr.clone(), gr.clone()
        ours.step()
        ref.step()
        if step % 60 == 30:  # a scheduler's cut, mid-run
            for group in (*ours.param_groups, *ref.param_groups):
                group["lr"] *= 0.5
    for a, b in zip(ours_p, ref_p, strict=True):
        assert torch.equal(a, b)
    for i, state in ref.state_dict()["state"].items():
        for key, value in state.items():
            assert torch.equal(ours.state_dict()["state"][i][key], value), key


@pytest.mark.parametrize("name", [Optims.SGD, Optims.RMSPROP])
def test_sgd_and_rmsprop_keep_torch_default(name):
    # their multi-tensor kernels round differently in bf16 and are slower on CPU
    opt = build_optimizer([_params()], NNOptimParams(name=name, momentum=0.9))
    assert opt.param_groups[0]["foreach"] is None


def test_adam_on_a_tensor_subclass_keeps_torch_default():
    class Tagged(torch.Tensor):
        pass

    p = torch.zeros(3).as_subclass(Tagged).requires_grad_()
    opt = build_optimizer([[p]], NNOptimParams())
    assert opt.param_groups[0]["foreach"] is None


def test_loaded_state_keeps_this_optimizers_choice():
    params = _params()
    writer = torch.optim.Adam(params, lr=1e-3)  # an older checkpoint: foreach None
    for p in params:
        p.grad = torch.ones_like(p)
    writer.step()
    reader = build_optimizer([_params()], NNOptimParams(max_lr=1e-3))
    load_optimizer_state(reader, writer.state_dict())
    assert reader.param_groups[0]["foreach"] is True
    loaded = reader.state_dict()["state"][0]["exp_avg"]
    assert torch.equal(loaded, writer.state[params[0]]["exp_avg"])


@pytest.mark.parametrize("max_norm", [1.0, 1e-3, 1e6, math.inf])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_clip_equals_torch_bit_for_bit(max_norm, dtype):
    g = torch.Generator().manual_seed(2)
    ours, ref = _params(dtype), _params(dtype)
    for step in range(40):
        for a, b, gr in zip(ours, ref, _grads(ours, g, step), strict=True):
            a.grad, b.grad = gr.clone(), gr.clone()
        ours[1].grad = ref[1].grad = None  # a parameter without a gradient is passed over
        total = clip_grad_norm(ours, max_norm)
        expected = torch.nn.utils.clip_grad_norm_(ref, max_norm)
        assert torch.equal(total, expected)
        for a, b in zip(ours, ref, strict=True):
            assert (a.grad is None and b.grad is None) or torch.equal(a.grad, b.grad)


def test_clip_of_mixed_dtypes_goes_through_torch():
    ours = [
        torch.nn.Parameter(torch.ones(4)),
        torch.nn.Parameter(torch.ones(4, dtype=torch.float64)),
    ]
    ref = [p.detach().clone().requires_grad_() for p in ours]
    for a, b in zip(ours, ref, strict=True):
        a.grad = torch.full_like(a, 3.0)
        b.grad = torch.full_like(b, 3.0)
    assert torch.equal(clip_grad_norm(ours, 1.0), torch.nn.utils.clip_grad_norm_(ref, 1.0))
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(ours, ref, strict=True))
    assert float(ours[0].grad.norm()) < 3.0  # clipped, not passed over


def test_clip_without_gradients_returns_zero():
    assert float(clip_grad_norm([torch.nn.Parameter(torch.ones(2))], 1.0)) == 0.0


def test_zero_grad_sets_every_gradient_to_none():
    params = _params()
    opt = build_optimizer([params[:3], params[3:]], NNOptimParams())
    for p in params:
        p.grad = torch.ones_like(p)
    zero_grad(opt)
    assert all(p.grad is None for p in params)


def test_zero_grad_calls_a_users_own_zero_grad():
    calls = []

    class Counting(torch.optim.SGD):
        def zero_grad(self, set_to_none=True):
            calls.append(set_to_none)
            super().zero_grad(set_to_none=set_to_none)

    p = torch.nn.Parameter(torch.ones(2))
    p.grad = torch.ones(2)
    zero_grad(Counting([p], lr=0.1))
    assert calls == [True]
    assert p.grad is None
