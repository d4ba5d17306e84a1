"""What gradient health costs a training step (issue 28; run by hand, not a test).

The overhead benchmark's large case (MLP 784 -> 512 -> 512 -> 10, 20,000 random rows,
batch 128, Adam, grad clipping, no validation) three ways in one process, the order
alternating each round: a hand-written raw PyTorch loop, ``NNModel.train`` without
health, and ``NNModel.train`` with ``HealthProbe()`` at its default cadence (every 50
updates; dead units hooked).

    python benchmarks/health_overhead.py [--rounds 3] [--epochs 1] [--every 50]

Prints each kind's fastest and median samples/s and the ratios health-off / health-on
(target: the health view costs <= 3 %, so on / off >= 0.97) and raw / nnx.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time

os.environ["NNX_TQDM_DISABLE"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
from overhead import CASES, make_data
from torch import nn

from nnx_lab import HealthProbe, NNModel, NNModelParams, NNOptimParams, NNParams, NNTrainParams
from nnx_lab.runs import set_config_report


def raw(loader, epochs: int) -> float:
    d_in, hidden, d_out, n, *_ = CASES["large"]
    torch.manual_seed(0)
    dims = [d_in, *hidden]
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(dims):
        layers += [nn.Linear(a, b), nn.ReLU()]
    net = nn.Sequential(*layers, nn.Linear(dims[-1], d_out))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    t0 = time.perf_counter()
    for _ in range(epochs):
        for X, y in loader:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(net(X), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
    return n * epochs / (time.perf_counter() - t0)


def nnx(loader, epochs: int, root: str, every: int | None) -> float:
    d_in, hidden, d_out, n, *_ = CASES["large"]
    model = NNModel(
        net_params=NNParams(input_dim=d_in, output_dim=d_out, hidden_dims=hidden),
        params=NNModelParams(),
    )
    params = NNTrainParams(
        n_epochs=epochs,
        train_loader=loader,
        seed=0,
        optim=NNOptimParams(max_lr=1e-3, grad_clip_norm=1.0),
        runs_root=tempfile.mkdtemp(dir=root),
        progress=False,
    )
    callbacks = [] if every is None else [HealthProbe(every=every)]
    t0 = time.perf_counter()
    model.train(params=params, callbacks=callbacks)
    return n * epochs / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--every", type=int, default=50)
    args = ap.parse_args()
    set_config_report(False)
    loader = make_data("large")
    speeds: dict[str, list[float]] = {"raw": [], "off": [], "on": []}
    with tempfile.TemporaryDirectory() as root:
        nnx(loader, 1, root, args.every)  # warm-up: imports, allocator, first-step costs
        for r in range(args.rounds):
            kinds = ["raw", "off", "on"] if r % 2 == 0 else ["on", "off", "raw"]
            for kind in kinds:
                if kind == "raw":
                    speeds[kind].append(raw(loader, args.epochs))
                else:
                    every = args.every if kind == "on" else None
                    speeds[kind].append(nnx(loader, args.epochs, root, every))
    for kind, s in speeds.items():
        print(f"{kind:4s} fastest {max(s):9.0f} samples/s  median {statistics.median(s):9.0f}")
    best = {k: max(v) for k, v in speeds.items()}
    med = {k: statistics.median(v) for k, v in speeds.items()}
    print(
        f"health on / off : fastest {best['on'] / best['off']:.3f}  "
        f"median {med['on'] / med['off']:.3f}  (target >= 0.97)"
    )
    print(
        f"nnx off / raw   : fastest {best['off'] / best['raw']:.3f}  "
        f"median {med['off'] / med['raw']:.3f}"
    )


if __name__ == "__main__":
    main()
