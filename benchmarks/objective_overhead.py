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

import argparse
import os
import statistics
import tempfile
import time

os.environ["NNX_TQDM_DISABLE"] = "1"

import torch
import torch.nn.functional as F
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
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    from nnx_lab.runs import set_config_report

    set_config_report(False)  # no "Run saved" line per run among the figures
    if args.threads:
        torch.set_num_threads(args.threads)
    loader = make_loader()
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    order = list(KINDS)
    for r in range(args.rounds):
        for kind in order if r % 2 == 0 else order[::-1]:
            times[kind].append(train_once(loader, kind, args.epochs, args.accum, r))
    base_best, base_med = min(times["default"]), statistics.median(times["default"])
    print(f"epochs={args.epochs} accum={args.accum} rounds={args.rounds}")
    for kind, ts in times.items():
        best, med = min(ts), statistics.median(ts)
        line = f"{kind:>22}: fastest {best:.2f} s, median {med:.2f} s"
        if kind != "default":
            line += f"; throughput vs default {base_best / best:.3f} (fastest), "
            line += f"{base_med / med:.3f} (median); target >= 0.97"
        print(line)


if __name__ == "__main__":
    main()
