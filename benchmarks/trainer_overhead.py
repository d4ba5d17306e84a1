"""What the Trainer costs against a hand-written two-optimizer loop (run by hand, not a test).

The same GAN, data and update two ways, in one process, rounds alternating their order:
a plain PyTorch loop with two Adam optimizers (D then G per batch), and
``Trainer(model).train(NNTrainerParams(optims={"G": ..., "D": ...}), trainer_step_fn=...)``
doing that very update (the run recorded: log, checkpoints, ``lrs`` per step). G 16 ->
256 -> 256 -> 2, D 2 -> 256 -> 256 -> 1, on 20,000 points of a 2-D mixture of eight
Gaussians, batch 128, no validation, no progress bar.

    python benchmarks/trainer_overhead.py [--rounds 3] [--epochs 2] [--objective]

``--objective`` races the Trainer's ``objective=`` path instead: an actor and a critic
(2 -> 256 -> 256 -> 1 each, an Adam each) on two mean-reduced terms with gradient
accumulation over 2 micro-batches, against the hand-written loop of that update (the
window's numerators summed, one backward, both optimizers step, the loss read once
per window as the engine's non-finite check does); both read one list of batches,
drawn from the loader once, so neither pays the DataLoader's collate.

Prints each kind's fastest and median seconds and the throughput ratio
hand-written / Trainer (target >= 0.95) from the fastest runs and from the medians.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from typing import Any

os.environ["NNX_TQDM_DISABLE"] = "1"

import torch
import torch.nn.functional as F
from _compare import alternate, bench_args, report  # benchmarks/ is on the path
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    EDP,
    Losses,
    LossTerm,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNTrainerParams,
    Objective,
    ObjectiveResult,
    Trainer,
)

Z = 16


class GAN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.G = nn.Sequential(
            nn.Linear(Z, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2)
        )
        self.D = nn.Sequential(
            nn.Linear(2, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1)
        )

    def forward(self, x):
        return self.D(x)


def make_loader() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    angles = torch.arange(8) * (2 * math.pi / 8)
    centers = torch.stack([2 * torch.cos(angles), 2 * torch.sin(angles)], 1)
    X = centers[torch.randint(0, 8, (20_000,), generator=g)]
    X = X + 0.05 * torch.randn(20_000, 2, generator=g)
    return DataLoader(TensorDataset(X, torch.zeros(20_000, 1)), batch_size=128, shuffle=True)


def gan_update(net, real, opt_d, opt_g, report=None):
    """One batch: D on real and detached fake, then G through D."""
    n = real.shape[0]
    z = torch.randn(n, Z)
    ones, zeros = torch.ones(n, 1), torch.zeros(n, 1)
    fake = net.G(z)
    d_loss = F.binary_cross_entropy_with_logits(net.D(real), ones)
    d_loss = d_loss + F.binary_cross_entropy_with_logits(net.D(fake.detach()), zeros)
    opt_d.zero_grad(set_to_none=True)
    d_loss.backward()
    opt_d.step()
    if report:
        report("D")
    g_loss = F.binary_cross_entropy_with_logits(net.D(fake), ones)
    opt_g.zero_grad(set_to_none=True)
    g_loss.backward()
    opt_g.step()
    if report:
        report("G")
    return d_loss.detach() + g_loss.detach()


def trainer_step(ctx):
    real, _ = ctx.batch
    opts = ctx.optimizers
    loss = gan_update(ctx.model, real, opts["D"], opts["G"], ctx.report_update)
    return EDP(loss=float(loss), samples=real.shape[0])


def hand_written(loader: DataLoader, epochs: int, salt: int) -> float:
    torch.manual_seed(0)
    net = GAN()
    opt_g = torch.optim.Adam(net.G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(net.D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    t0 = time.perf_counter()
    for _ in range(epochs):
        for real, _ in loader:
            loss = gan_update(net, real, opt_d, opt_g)
            float(loss)  # the Trainer's step reads its loss once per batch too
    return time.perf_counter() - t0


def trainer(loader: DataLoader, epochs: int, salt: int) -> float:
    torch.manual_seed(0)
    model = NNModel(module=GAN(), params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR))
    adam = {"max_lr": 2e-4, "momentum": (0.5, 0.999)}
    optims = {
        "G": NNOptimParams(**adam, param_groups=[NNParamGroupSpec("G.*")]),
        "D": NNOptimParams(**adam, param_groups=[NNParamGroupSpec("D.*")]),
    }
    with tempfile.TemporaryDirectory() as root:
        params = NNTrainerParams(
            optims=optims, n_epochs=epochs, train_loader=loader, runs_root=root, progress=False
        )
        t0 = time.perf_counter()
        Trainer(model).train(params, trainer_step_fn=trainer_step, salt=str(salt))
        return time.perf_counter() - t0


KINDS = {"hand_written": hand_written, "trainer": trainer}


class ActorCritic(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.actor = nn.Sequential(
            nn.Linear(2, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1)
        )
        self.critic = nn.Sequential(
            nn.Linear(2, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1)
        )

    def forward(self, x):
        return self.actor(x)


def ac_terms(net, batch, ctx=None):
    X, _ = batch
    target = X.sum(1, keepdim=True)
    actor = ((net.actor(X) - target) ** 2).sum()
    critic = ((net.critic(X) + target) ** 2).sum()
    return ObjectiveResult([LossTerm("actor", actor, len(X)), LossTerm("critic", critic, len(X))])


def ac_optims():
    return (
        {"max_lr": 1e-3, "momentum": (0.9, 0.999)},
        [NNParamGroupSpec("actor.*")],
        [NNParamGroupSpec("critic.*")],
    )


def hand_written_objective(loader: Any, epochs: int, salt: int) -> float:
    torch.manual_seed(0)
    net = ActorCritic()
    opt_a = torch.optim.Adam(net.actor.parameters(), lr=1e-3)
    opt_c = torch.optim.Adam(net.critic.parameters(), lr=1e-3)
    t0 = time.perf_counter()
    for _ in range(epochs):
        window = []
        batches = loader
        for i, batch in enumerate(batches):
            window.append(batch)
            if len(window) < 2 and i < len(batches) - 1:
                continue
            results = [ac_terms(net, b) for b in window]
            rows = sum(len(b[0]) for b in window)
            a = sum((r.terms[0].numerator for r in results[1:]), results[0].terms[0].numerator)
            c = sum((r.terms[1].numerator for r in results[1:]), results[0].terms[1].numerator)
            loss = a / rows + c / rows
            opt_a.zero_grad(set_to_none=True)
            opt_c.zero_grad(set_to_none=True)
            loss.backward()
            if not math.isfinite(float(loss.detach())):  # the engine's non-finite check
                raise FloatingPointError("non-finite")
            opt_a.step()
            opt_c.step()
            window = []
    return time.perf_counter() - t0


def trainer_objective(loader: Any, epochs: int, salt: int) -> float:
    torch.manual_seed(0)
    model = NNModel(module=ActorCritic(), params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR))
    adam, actor, critic = ac_optims()
    optims = {
        "actor": NNOptimParams(**adam, param_groups=actor),
        "critic": NNOptimParams(**adam, param_groups=critic),
    }
    with tempfile.TemporaryDirectory() as root:
        params = NNTrainerParams(
            optims=optims,
            n_epochs=epochs,
            train_loader=loader,
            runs_root=root,
            progress=False,
            accumulation_steps=2,
        )
        t0 = time.perf_counter()
        Trainer(model).train(params, objective=Objective(ac_terms), salt=str(salt))
        return time.perf_counter() - t0


OBJECTIVE_KINDS = {"hand_written": hand_written_objective, "trainer": trainer_objective}


def main() -> None:
    args = bench_args(
        extra=lambda ap: ap.add_argument(
            "--objective", action="store_true", help="the objective= path, accumulation 2"
        )
    )
    loader: Any = make_loader()
    if args.objective:  # both sides read the same list of batches (no collate cost)
        loader = list(loader)
    chosen = OBJECTIVE_KINDS if args.objective else KINDS
    kinds = {k: (lambda r, fn=fn: fn(loader, args.epochs, r)) for k, fn in chosen.items()}
    times = alternate(kinds, args.rounds)
    path = "objective=, accumulation 2" if args.objective else "trainer_step_fn"
    print(f"{path}: epochs={args.epochs} rounds={args.rounds}")
    report(times, baseline="hand_written", target=0.95)


if __name__ == "__main__":
    main()
