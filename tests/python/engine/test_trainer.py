"""The multi-optimizer Trainer (§3.2): a small GAN on a 2-D mixture of Gaussians, each
optimizer on the parameters it owns, named schedulers, every optimizer in the run id and
the checkpoints (a 2 + 2 = 4 warm resume, bit for bit), ``lrs`` in the log, and the
refusals before any run directory exists."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from nnx_lab import (
    EDP,
    Losses,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNSchedulerParams,
    NNTrainerParams,
    Trainer,
    TrainerStepContext,
)
from nnx_lab.errors import ComponentRestoreError, ConfigError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class GAN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
        self.D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, x):
        return self.D(x)


def _mixture(n=48):
    g = torch.Generator().manual_seed(0)
    centers = torch.tensor([[2.0, 0.0], [-2.0, 0.0], [0.0, 2.0]])
    X = centers[torch.randint(0, 3, (n,), generator=g)] + 0.1 * torch.randn(n, 2, generator=g)
    y = torch.zeros(n, 1)  # the loader's pair; the GAN step ignores it
    return [(X[i : i + 12], y[i : i + 12]) for i in range(0, n, 12)]


def gan_step(ctx: TrainerStepContext) -> EDP:
    real, _ = ctx.batch
    net, n = ctx.model, len(real)
    z = torch.randn(n, 2)  # the run's seeded, checkpointed RNG
    ones, zeros = torch.ones(n, 1), torch.zeros(n, 1)
    fake = net.G(z)
    d_loss = F.binary_cross_entropy_with_logits(net.D(real), ones)
    d_loss = d_loss + F.binary_cross_entropy_with_logits(net.D(fake.detach()), zeros)
    ctx.update("D", d_loss)
    g_loss = F.binary_cross_entropy_with_logits(net.D(net.G(z)), ones)
    ctx.optimizers["G"].zero_grad(set_to_none=True)  # the long way, as update() does
    g_loss.backward()
    ctx.optimizers["G"].step()
    ctx.report_update("G")
    return EDP(loss=float(d_loss.detach() + g_loss.detach()), samples=n)


def _model():
    torch.manual_seed(0)
    return NNModel(module=GAN(), params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR))


def _optims(d_lr=2e-3, g_glob="G.*", d_glob="D.*"):
    return {
        "G": NNOptimParams(max_lr=1e-3, param_groups=[NNParamGroupSpec(g_glob)]),
        "D": NNOptimParams(max_lr=d_lr, param_groups=[NNParamGroupSpec(d_glob)]),
    }


def _params(root, **kw):
    kw.setdefault("optims", _optims())
    kw.setdefault("n_epochs", 2)
    return NNTrainerParams(
        train_loader=_mixture(), runs_root=str(root), progress=False, log_every=1, **kw
    )


def _steps(run):
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    return [x for x in lines if x["event"] == "step"]


def _empty(root):
    return not root.exists() or not any(root.iterdir())


def test_each_optimizer_trains_only_the_parameters_it_owns(runs_root):
    model = _model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    trainer = Trainer(model)

    # D alone steps: G's parameters must stay as they were
    def d_only(ctx):
        real, _ = ctx.batch
        fake = ctx.model.G(torch.randn(len(real), 2))
        loss = F.binary_cross_entropy_with_logits(ctx.model.D(fake), torch.ones(len(real), 1))
        ctx.update("D", loss)
        return EDP(loss=float(loss.detach()), samples=len(real))

    run = trainer.train(_params(runs_root, n_epochs=1), trainer_step_fn=d_only)
    after = model.net.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before if k.startswith("G."))
    assert all(not torch.equal(before[k], after[k]) for k in before if k.startswith("D."))
    assert [s["step"] for s in _steps(run)] == [1, 2, 3, 4]
    owned = {
        k: [p for g in o.param_groups for p in g["params"]]
        for k, o in trainer.last_step.optimizers.items()
    }
    assert {id(p) for p in owned["G"]} == {id(p) for p in model.net.G.parameters()}


def test_a_gan_run_logs_every_optimizers_rate_and_counts_every_update(runs_root):
    model = _model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    run = Trainer(model).train(_params(runs_root), trainer_step_fn=gan_step)
    steps = _steps(run)
    assert [s["step"] for s in steps] == [2, 4, 6, 8, 10, 12, 14, 16]  # D and G per batch
    assert all(s["lrs"] == {"G": 1e-3, "D": 2e-3} for s in steps)
    after = model.net.state_dict()
    assert all(not torch.equal(before[k], after[k]) for k in before)
    config = run.config["train_step"]["config"]
    assert config["optims"]["D"]["max_lr"] == 2e-3
    assert config["step"]["name"].endswith("gan_step")


def test_every_optimizer_enters_the_run_id(runs_root):
    a = Trainer(_model()).train(_params(runs_root, n_epochs=1), trainer_step_fn=gan_step)
    b = Trainer(_model()).train(
        _params(runs_root, n_epochs=1, optims=_optims(d_lr=3e-3)), trainer_step_fn=gan_step
    )
    c = Trainer(_model()).train(_params(runs_root / "c", n_epochs=1), trainer_step_fn=gan_step)
    assert a.id != b.id
    assert a.id == c.id


def test_a_named_scheduler_lowers_only_its_optimizers_rate(runs_root):
    # threshold=1.0 (relative): no epoch counts as an improvement, so with patience 0
    # the end of every epoch halves G's rate
    sched = {"G": NNSchedulerParams(patience=0, factor=0.5, threshold=1.0)}
    run = Trainer(_model()).train(
        _params(runs_root, n_epochs=3, schedulers=sched), trainer_step_fn=gan_step
    )
    by_epoch = {s["epoch"]: s["lrs"] for s in _steps(run)}
    assert by_epoch[1] == {"G": 1e-3, "D": 2e-3}
    assert by_epoch[2] == {"G": 5e-4, "D": 2e-3}
    assert by_epoch[3] == {"G": 2.5e-4, "D": 2e-3}


def test_a_warm_resume_2_plus_2_equals_4_bit_for_bit(tmp_path):
    sched = {"D": NNSchedulerParams(patience=0, factor=0.5, threshold=1.0)}
    whole = _model()
    full = Trainer(whole).train(
        _params(tmp_path / "a", n_epochs=4, schedulers=sched), trainer_step_fn=gan_step
    )
    half = _model()
    first = Trainer(half).train(
        _params(tmp_path / "b", n_epochs=2, schedulers=sched), trainer_step_fn=gan_step
    )
    resumed_model = _model()
    second = Trainer(resumed_model).train(
        _params(tmp_path / "b", n_epochs=2, schedulers=sched, resume_from_run_id=first.id),
        trainer_step_fn=gan_step,
    )
    for name, weight in whole.net.state_dict().items():
        assert torch.equal(weight, resumed_model.net.state_dict()[name]), name
    tail = [(s["step"], s["loss"], s["lrs"]) for s in _steps(full)][8:]
    assert [(s["step"], s["loss"], s["lrs"]) for s in _steps(second)][-8:] == tail


def test_a_stateful_resume_with_other_optimizer_settings_is_refused(tmp_path):
    first = Trainer(_model()).train(_params(tmp_path, n_epochs=1), trainer_step_fn=gan_step)
    before = sorted(p.name for p in tmp_path.iterdir())
    params = _params(tmp_path, n_epochs=1, optims=_optims(d_lr=5e-3), resume_from_run_id=first.id)
    with pytest.raises(ComponentRestoreError, match="optims"):
        Trainer(_model()).train(params, trainer_step_fn=gan_step)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_an_overlap_is_refused_naming_the_parameter_and_both_optimizers(runs_root):
    with pytest.raises(ConfigError, match=r"'G\.0\.weight' is selected by both optimizer 'G'"):
        Trainer(_model()).train(
            _params(runs_root, optims=_optims(d_glob="*")), trainer_step_fn=gan_step
        )
    assert _empty(runs_root)


def test_a_trainable_parameter_no_optimizer_owns_is_refused_unless_frozen(runs_root):
    with pytest.raises(ConfigError, match=r"no optimizer owns \(first: 'D\.2\.weight'\)"):
        Trainer(_model()).train(
            _params(runs_root, optims=_optims(d_glob="D.0.*")), trainer_step_fn=gan_step
        )
    assert _empty(runs_root)
    model = _model()
    model.freeze("D.2.*")
    frozen = model.net.D[2].weight.clone()
    Trainer(model).train(
        _params(runs_root, optims=_optims(d_glob="D.0.*")), trainer_step_fn=gan_step
    )
    assert torch.equal(model.net.D[2].weight, frozen)


def test_bad_trainer_params_are_refused_before_any_run(runs_root):
    with pytest.raises(ConfigError, match=r"NNTrainerParams\.optims"):
        NNTrainerParams(optims={})
    with pytest.raises(ConfigError, match=r"optims\['G'\].param_groups"):
        NNTrainerParams(optims={"G": NNOptimParams()})
    with pytest.raises(ConfigError, match="named after an optimizer"):
        NNTrainerParams(optims=_optims(), schedulers={"H": NNSchedulerParams()})
    with pytest.raises(ConfigError, match=r"optims\['D'\].param_groups\[0\]"):
        Trainer(_model()).train(
            _params(runs_root, optims=_optims(d_glob="disc.*")), trainer_step_fn=gan_step
        )
    torch.manual_seed(0)
    bf16 = NNModel(
        module=GAN(), params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR, precision="bf16")
    )
    with pytest.raises(ConfigError, match="full_precision_only"):
        Trainer(bf16).train(_params(runs_root), trainer_step_fn=gan_step)
    with pytest.raises(ConfigError, match="trainer_step_fn"):
        Trainer(_model()).train(_params(runs_root), trainer_step_fn=gan_step, objective=object())
    assert _empty(runs_root)
