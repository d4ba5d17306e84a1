"""A small GAN on a 2-D mixture of Gaussians for the Trainer's tests (§3.2), and an
actor-critic with one optimizer per player for its objective path."""

from __future__ import annotations

import json

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
    NNTrainerParams,
    TrainerStepContext,
)


class GAN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
        self.D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, x):
        return self.D(x)


def mixture(n=48):
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


def gan_model():
    torch.manual_seed(0)
    return NNModel(module=GAN(), params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR))


def optims(d_lr=2e-3, g_glob="G.*", d_glob="D.*"):
    return {
        "G": NNOptimParams(max_lr=1e-3, param_groups=[NNParamGroupSpec(g_glob)]),
        "D": NNOptimParams(max_lr=d_lr, param_groups=[NNParamGroupSpec(d_glob)]),
    }


def trainer_params(root, **kw):
    kw.setdefault("optims", optims())
    kw.setdefault("n_epochs", 2)
    return NNTrainerParams(
        train_loader=mixture(), runs_root=str(root), progress=False, log_every=1, **kw
    )


class ActorCritic(nn.Module):
    """An actor and a critic on the same rows; ``hidden`` gives the actor a hidden
    Tanh layer."""

    def __init__(self, features: int = 2, hidden: int | None = None) -> None:
        super().__init__()
        if hidden is None:
            self.actor = nn.Linear(features, 1)
        else:
            self.actor = nn.Sequential(nn.Linear(features, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        self.critic = nn.Linear(features, 1)

    def forward(self, x):
        return self.actor(x)


def ac_model(features: int = 2, hidden: int | None = None, **kw):
    """An ``ActorCritic`` from seed 0; ``kw`` are more ``NNModelParams`` fields."""
    torch.manual_seed(0)
    return NNModel(
        module=ActorCritic(features, hidden),
        params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR, **kw),
    )


def ac_optims(**kw):
    """The actor's optimizer and the critic's (clipped); ``kw`` go to both."""
    return {
        "actor": NNOptimParams(max_lr=1e-2, param_groups=[NNParamGroupSpec("actor.*")], **kw),
        "critic": NNOptimParams(
            max_lr=1e-3, grad_clip_norm=0.5, param_groups=[NNParamGroupSpec("critic.*")], **kw
        ),
    }


def steps(run):
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    return [x for x in lines if x["event"] == "step"]


def ac_two_terms(net, batch, ctx):
    """The actor-critic's objective: two terms, the critic's a weighted sum."""
    from nnx_lab import LossTerm, ObjectiveResult

    X, y = batch
    actor = ((net.actor(X) - y) ** 2).sum()
    critic = ((net.critic(X) + y) ** 2).sum()
    return ObjectiveResult(
        [LossTerm("actor", actor, len(y)), LossTerm("critic", critic, reduction="sum", weight=0.1)]
    )
