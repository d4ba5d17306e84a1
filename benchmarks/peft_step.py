"""A LoRA training step through NNModel against a hand-written loop (run by hand).

The same frozen MLP 784 -> 512 -> 512 -> 10 with LoRA (r=8, alpha=16) on its three
linears, the same data (10,000 random samples, batch 128), Adam with clipping at 1.0,
no validation, no progress bar: once through ``NNModel(module=...).train`` and once
through a raw PyTorch loop over the same adapter layers, in one process, rounds
alternating their order.

    python benchmarks/peft_step.py [--rounds 3] [--epochs 2] [--threads N]

Prints each side's fastest and median seconds and the throughput ratio raw / nnx
(target >= 0.95) from the fastest runs and from the medians, then the median of the
paired per-round ratios for the whole call and for the training phase only (without
the per-run checks, identity, run directory and final write-out).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ["NNX_TQDM_DISABLE"] = "1"

import torch
import torch.nn.functional as F
from _compare import PhaseClock, phase_report  # benchmarks/ is on the path
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import Losses, NNModel, NNModelParams, NNOptimParams, NNTrainParams, freeze
from nnx_lab.peft import apply_lora_to


def make_net() -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )
    freeze(net)
    apply_lora_to(net, "*", r=8, alpha=16, seed=0)
    return net


def make_loader() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(10_000, 784, generator=g)
    y = torch.randint(0, 10, (10_000,), generator=g)
    return DataLoader(TensorDataset(X, y), batch_size=128, shuffle=True)


PHASES: list[float] = []  # each nnx run's training phase (_compare.PhaseClock)


def nnx(loader: DataLoader, epochs: int, salt: int) -> float:
    model = NNModel(module=make_net(), params=NNModelParams(loss=Losses.CROSS_ENTROPY))
    with tempfile.TemporaryDirectory() as root:
        params = NNTrainParams(
            n_epochs=epochs,
            train_loader=loader,
            optim=NNOptimParams(max_lr=1e-3, grad_clip_norm=1.0),
            runs_root=root,
            progress=False,
        )
        clock = PhaseClock()
        t0 = time.perf_counter()
        model.train(params, salt=str(salt), callbacks=[clock])
        seconds = time.perf_counter() - t0
    PHASES.append(clock.seconds)
    return seconds


def raw(loader: DataLoader, epochs: int, salt: int) -> float:
    net = make_net()
    trainable = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.Adam(trainable, lr=1e-3)
    t0 = time.perf_counter()
    net.train()
    for _ in range(epochs):
        for X, y in loader:
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(net(X), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable, 1.0)
            opt.step()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    from nnx_lab.runs import set_config_report

    set_config_report(False)
    if args.threads:
        torch.set_num_threads(args.threads)
    loader = make_loader()
    sides = {"raw": raw, "nnx": nnx}
    times: dict[str, list[float]] = {k: [] for k in sides}
    order = list(sides)
    for r in range(args.rounds):
        for side in order if r % 2 == 0 else order[::-1]:
            times[side].append(sides[side](loader, args.epochs, r))
    print(f"LoRA r=8 on MLP 784-512-512-10, epochs={args.epochs} rounds={args.rounds}")
    for side, ts in times.items():
        print(f"{side:>4}: fastest {min(ts):.2f} s, median {statistics.median(ts):.2f} s")
    best = min(times["raw"]) / min(times["nnx"])
    med = statistics.median(times["raw"]) / statistics.median(times["nnx"])
    print(f"throughput nnx / raw: {best:.3f} (fastest), {med:.3f} (median); target >= 0.95")
    paired = [r / n for r, n in zip(times["raw"], times["nnx"], strict=True)]
    print(f"nnx: median of the {len(paired)} per-round ratios {statistics.median(paired):.3f}")
    phase_report(times["raw"], PHASES, "nnx")


if __name__ == "__main__":
    main()
