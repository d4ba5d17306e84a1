"""What the diffusion hooks cost against a hand-written DDPM loop (run by hand, not a test).

The same network (``DiffusionMLP`` 2 -> 3 x 256 -> 2, a 32-wide time embedding), the same
data (20,000 points of a 2-D mixture, batch 256, shuffled), Adam at 1e-3 and a cosine
schedule of 1,000 steps, three ways in one process, the order alternating by round:

- ``hand_written``: a plain loop over the same loader (draw t and ε from its own
  generator, noise, MSE, backward, step), no run directory;
- ``objective``: ``NNModel.train(objective=diffusion_objective(schedule))``;
- ``train_step_fn``: ``NNModel.train(train_step_fn=diffusion_train_step_factory(schedule))``.

The recorded runs write their log, checkpoints and run records, which the hand-written
loop does not: that is part of what is measured.

    python benchmarks/diffusion_step.py [--rounds 3] [--epochs 2] [--threads N]

Prints each way's fastest and median seconds and its throughput against the hand-written
loop (hand-written time / its time; target >= 0.95).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

os.environ["NNX_TQDM_DISABLE"] = "1"

import torch
import torch.nn.functional as F
from _compare import alternate, bench_args, report
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import Losses, NNModel, NNModelParams, NNOptimParams, NNTrainParams
from nnx_lab.diffusion import (
    DiffusionMLP,
    NoiseSchedulers,
    diffusion_mlp_spec,
    diffusion_objective,
    diffusion_train_step_factory,
)

SIZES = {"data_dim": 2, "hidden_dim": 256, "n_layers": 3, "time_dim": 32}
SCHEDULE = NoiseSchedulers.COSINE(1000)


def make_loader() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([[-2.0, 0.0], [2.0, 0.0], [0.0, 2.0], [0.0, -2.0]])
    X = centres[torch.randint(0, 4, (20_000,), generator=g)] + 0.1 * torch.randn(20_000, 2)
    return DataLoader(TensorDataset(X), batch_size=256, shuffle=True, generator=torch.Generator())


def hand_written(loader: DataLoader, epochs: int) -> float:
    torch.manual_seed(0)
    net = DiffusionMLP(**SIZES)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    alpha_bar = torch.cumprod(1.0 - SCHEDULE.betas, 0)
    a, b = alpha_bar.sqrt().float(), (1.0 - alpha_bar).sqrt().float()
    t0 = time.perf_counter()
    for _ in range(epochs):
        # the same DataLoader: batches of points alone reach a hook as the loader gives
        # them (the engine's batched fast path is for (X, y) pairs)
        for (x0,) in loader:
            t = torch.randint(0, SCHEDULE.T, (len(x0),), generator=gen)
            eps = torch.randn(x0.shape, generator=gen)
            x_t = a[t].unsqueeze(1) * x0 + b[t].unsqueeze(1) * eps
            opt.zero_grad(set_to_none=True)
            loss = F.mse_loss(net(x_t, t), eps)
            loss.backward()
            opt.step()
            float(loss.detach())  # the loop reads its loss, as a logged run does
    return time.perf_counter() - t0


def recorded(loader: DataLoader, epochs: int, kind: str, salt: int) -> float:
    model = NNModel(
        params=NNModelParams(net=diffusion_mlp_spec(**SIZES), loss=Losses.MEAN_SQUARED_ERROR)
    )
    if kind == "objective":
        hook = {"objective": diffusion_objective(SCHEDULE)}
    else:
        hook = {"train_step_fn": diffusion_train_step_factory(SCHEDULE)}
    with tempfile.TemporaryDirectory() as root:
        params = NNTrainParams(
            n_epochs=epochs,
            train_loader=loader,
            optim=NNOptimParams(max_lr=1e-3),
            runs_root=root,
            progress=False,
        )
        t0 = time.perf_counter()
        model.train(params, salt=str(salt), **hook)
        return time.perf_counter() - t0


def main() -> None:
    args = bench_args(epochs=2)
    loader = make_loader()
    kinds = {
        "hand_written": lambda r: hand_written(loader, args.epochs),
        "objective": lambda r: recorded(loader, args.epochs, "objective", r),
        "train_step_fn": lambda r: recorded(loader, args.epochs, "train_step_fn", r),
    }
    print(f"epochs={args.epochs} rounds={args.rounds} threads={torch.get_num_threads()}")
    times = alternate(kinds, args.rounds)
    report(times, baseline="hand_written", target=0.95)
    # on a shared machine the speed moves between rounds: each round's pair is the
    # fairest comparison, so the median of the per-round ratios is printed too
    for kind in ("objective", "train_step_fn"):
        paired = [h / k for h, k in zip(times["hand_written"], times[kind], strict=True)]
        print(
            f"{kind}: median of the {len(paired)} per-round ratios {statistics.median(paired):.3f}"
        )


if __name__ == "__main__":
    main()
