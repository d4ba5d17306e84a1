"""``NNOptimParams(fused=True)``: torch's fused Adam, AdamW and SGD on request.

The fused kernel rounds in its own way, so a fused run is another run (its id), built
with torch's own fused optimizer (the same bits as one made by hand), resumed bit for
bit, and refused before any side effect where torch has no kernel for the parameters.
"""

from __future__ import annotations

import sys

import engine_factories as f
import pytest
import torch

from nnx_lab import NNOptimParams, Optims, Trainer
from nnx_lab.engine import optim as optim_module
from nnx_lab.engine.optim import build_optimizer, load_optimizer_state
from nnx_lab.errors import ConfigError

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SHAPES = [(32, 8), (32,), (3, 32), (3,)]


def _params(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return [torch.nn.Parameter(torch.randn(*s, generator=g).to(dtype)) for s in SHAPES]


def _fused_optim(name, **kw):
    return NNOptimParams(name=name, max_lr=3e-3, fused=True, **kw)


@pytest.mark.parametrize("name", [Optims.ADAM, Optims.ADAMW, Optims.SGD])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_fused_optimizer_is_torchs_fused_one_bit_for_bit(name, dtype):
    optim = _fused_optim(name, weight_decay=0.01)
    ours_p, ref_p = _params(dtype), _params(dtype)
    ours = build_optimizer([ours_p], optim)
    assert all(group["fused"] is True for group in ours.param_groups)
    if name is Optims.SGD:
        ref = torch.optim.SGD(ref_p, lr=3e-3, momentum=0.9, weight_decay=0.01, fused=True)
    else:
        kind = torch.optim.Adam if name is Optims.ADAM else torch.optim.AdamW
        ref = kind(ref_p, lr=3e-3, betas=(0.9, 0.999), weight_decay=0.01, fused=True)
    g = torch.Generator().manual_seed(1)
    for _ in range(200):
        for a, b in zip(ours_p, ref_p, strict=True):
            grad = torch.randn(a.shape, generator=g).to(dtype)
            a.grad, b.grad = grad.clone(), grad.clone()
        ours.step()
        ref.step()
    for a, b in zip(ours_p, ref_p, strict=True):
        assert torch.equal(a, b)


def test_fused_is_another_run_and_the_default_keeps_its_id(runs_root):
    assert "fused" not in NNOptimParams().to_json()  # the ids of existing runs stay
    base = f.train_params(runs_root, n_epochs=1)
    fused = base.replace(optim=base.optim.replace(fused=True))
    plain_run = f.model().train(base)
    fused_model = f.model()
    fused_run = fused_model.train(fused)
    assert fused_run.id != plain_run.id
    assert fused_run.config["train"]["optim"]["fused"] is True
    assert NNOptimParams.from_json(fused.optim.to_json()) == fused.optim
    built = NNOptimParams.builder().adam(max_lr=1e-2).fused().build()
    assert built.fused is True
    assert built == NNOptimParams(max_lr=1e-2, fused=True)


def test_a_fused_run_resumes_bit_for_bit(runs_root):
    def params(epochs, **kw):
        base = f.train_params(runs_root, n_epochs=epochs, **kw)
        return base.replace(optim=base.optim.replace(fused=True))

    full_model = f.model()
    full = full_model.train(params(4))
    first = f.model().train(params(2))
    resumed_model = f.model()
    resumed = resumed_model.train(params(2, resume_from_run_id=first.id))
    assert resumed.resume_status["mode"] == "stateful"
    for (name, a), b in zip(
        full_model.net.state_dict().items(), resumed_model.net.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name
    assert [p.train_edp.loss for p in full.idps] == [p.train_edp.loss for p in resumed.idps]


def test_rmsprop_and_a_non_bool_are_refused_by_name():
    with pytest.raises(ConfigError, match=r"NNOptimParams\.fused.*no fused RMSprop"):
        NNOptimParams(name=Optims.RMSPROP, fused=True)
    with pytest.raises(ConfigError, match=r"NNOptimParams\.fused=1 .*True .*or False"):
        NNOptimParams(fused=1)


def test_parameters_torch_has_no_fused_kernel_for_are_refused_before_the_run(
    runs_root, monkeypatch
):
    # a torch with fused kernels for CUDA only: this model's CPU parameters are refused
    monkeypatch.setattr(optim_module, "_fused_devices", lambda: ["cuda"])
    base = f.train_params(runs_root, n_epochs=1)
    params = base.replace(optim=base.optim.replace(fused=True))
    with pytest.raises(ConfigError, match=r"NNOptimParams\.fused.*torch\.float32 on cpu"):
        f.model().train(params)
    assert f.runs_in(runs_root) == []  # refused before the run directory


def test_a_trainers_optimizers_are_fused_when_asked(runs_root, monkeypatch):
    from trainer_factories import gan_model, gan_step, optims, trainer_params

    fused = {k: o.replace(fused=True) for k, o in optims().items()}
    trainer = Trainer(gan_model())
    trainer.train(trainer_params(runs_root, optims=fused), trainer_step_fn=gan_step)
    for opt in trainer.last_step.optimizers.values():
        assert all(group["fused"] is True for group in opt.param_groups)
    monkeypatch.setattr(optim_module, "_fused_devices", lambda: ["cuda"])
    before = f.runs_in(runs_root)
    with pytest.raises(ConfigError, match=r"NNOptimParams\.fused"):
        Trainer(gan_model()).check(
            trainer_params(runs_root, optims=fused, n_epochs=3), trainer_step_fn=gan_step
        )
    assert f.runs_in(runs_root) == before


def test_a_loaded_state_keeps_this_optimizers_fused_choice():
    writer_p = _params()
    writer = build_optimizer([writer_p], NNOptimParams(fused=True))
    for p in writer_p:
        p.grad = torch.ones_like(p)
    writer.step()
    reader = build_optimizer([_params()], NNOptimParams())
    load_optimizer_state(reader, writer.state_dict())
    assert not reader.param_groups[0]["fused"]
    assert reader.param_groups[0]["foreach"] is True
    back = build_optimizer([_params()], NNOptimParams(fused=True))
    load_optimizer_state(back, reader.state_dict())
    assert back.param_groups[0]["fused"] is True
    assert not back.param_groups[0]["foreach"]
    assert torch.equal(
        back.state_dict()["state"][0]["exp_avg"], writer.state[writer_p[0]]["exp_avg"]
    )


def test_a_plan_carries_fused_into_its_run_and_refuses_it_with_rmsprop(runs_root):
    import json

    import plan_factories as pf

    from nnx_lab import ExperimentPlan
    from nnx_lab.plans import set_config_report

    before = set_config_report(False)
    try:
        base = pf.toy_plan(runs_root, n_epochs=1)
        plan = base.with_optim(fused=True)
        back = ExperimentPlan.from_json(json.loads(json.dumps(plan.to_json()))).resolve()
        assert back.expected_run_id() == plan.expected_run_id() != base.expected_run_id()
        _model, params, _ = back.materialize()
        assert params.optim.fused is True
        problems = base.with_optim(name="rmsprop", fused=True).validate()
        assert "train.optim.fused" in problems.fields
        assert "no fused RMSprop" in problems.get("train.optim.fused").fix
    finally:
        set_config_report(before)


def test_a_torch_without_the_device_helper_falls_back_to_its_devices(monkeypatch):
    from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

    real = set(_get_fused_kernels_supported_devices())
    # a None entry makes ``from torch.utils._foreach_utils import ...`` raise ImportError
    monkeypatch.setitem(sys.modules, "torch.utils._foreach_utils", None)
    fallback = optim_module._fused_devices()
    assert {"cpu", "cuda"} <= set(fallback) <= real  # no device this torch lacks
    opt = build_optimizer([{"params": _params()}], _fused_optim(Optims.ADAM))
    assert opt.param_groups[0]["fused"] is True
