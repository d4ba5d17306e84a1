"""What an objective costs against the default step (run by hand, not a test).

The same model and data three ways, in one process, rounds alternating their order:
the default step (no objective), ``supervised_objective()`` (the default step's loss
through the objective engine: same numbers, bit for bit) and a custom two-term
``Objective`` (cross-entropy over the rows plus a weighted squared-output penalty over
the output elements, so two denominators). MLP 784 -> 512 -> 512 -> 10 on 20,000 random
samples, batch 128, Adam, no validation, no progress bar.

    python benchmarks/objective_overhead.py [--rounds 3] [--epochs 2] [--accum 1]

Prints each kind's fastest and median seconds and the throughput ratio
default / objective (target >= 0.97) from the fastest runs (the least disturbed by
other work on the machine) and from the medians.
"""

from __future__ import annotations

import os
import tempfile
import time

os.environ["NNX_TQDM_DISABLE"] = "1"

import torch
import torch.nn.functional as F
from _compare import alternate, bench_args, report  # benchmarks/ is on the path
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    LossTerm,
    NNModel,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    Objective,
    ObjectiveResult,
    supervised_objective,
)


class TwoTerms(Objective):
    def compute(self, net, batch, ctx):
        X, y = batch
        out = net(X)
        return ObjectiveResult(
            [
                LossTerm("ce", F.cross_entropy(out, y, reduction="sum"), y.shape[0]),
                LossTerm("l2", (out * out).sum(), out.numel(), weight=1e-3),
            ]
        )


KINDS = {"default": None, "supervised_objective": supervised_objective, "two_terms": TwoTerms}


def make_loader() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(20_000, 784, generator=g)
    y = torch.randint(0, 10, (20_000,), generator=g)
    return DataLoader(TensorDataset(X, y), batch_size=128, shuffle=True)


def train_once(loader: DataLoader, kind: str, epochs: int, accum: int, salt: int) -> float:
    model = NNModel(net_params=NNParams(input_dim=784, output_dim=10, hidden_dims=[512, 512]))
    make = KINDS[kind]
    with tempfile.TemporaryDirectory() as root:
        params = NNTrainParams(
            n_epochs=epochs,
            train_loader=loader,
            accumulation_steps=accum,
            optim=NNOptimParams(max_lr=1e-3, grad_clip_norm=1.0),
            runs_root=root,
            progress=False,
        )
        t0 = time.perf_counter()
        model.train(params, objective=None if make is None else make(), salt=str(salt))
        return time.perf_counter() - t0


def main() -> None:
    args = bench_args(extra=lambda ap: ap.add_argument("--accum", type=int, default=1))
    loader = make_loader()
    kinds = {k: (lambda r, k=k: train_once(loader, k, args.epochs, args.accum, r)) for k in KINDS}
    times = alternate(kinds, args.rounds)
    print(f"epochs={args.epochs} accum={args.accum} rounds={args.rounds}")
    report(times, baseline="default", target=0.97)


if __name__ == "__main__":
    main()
