"""What a TensorBoardCallback costs a training run (run by hand, not a test).

The engine's large case (MLP 784 -> 512 -> 512 -> 10, batch 128, 3 epochs, Adam,
cross-entropy, grad clip 1.0, no progress bar, no validation) trained with and without
the callback, alternating (the order flips every round) in one process; and the
callback's own cost per step, fed the events of a scripted run with no torch step.

    python benchmarks/tensorboard_overhead.py [--rounds 3] [--samples 20000]

Prints the throughput ratio with / without the callback from the fastest and the
median runs, and the callback alone in microseconds per step.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ["NNX_TQDM_DISABLE"] = "1"

import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    Devices,
    Losses,
    Nets,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    Optims,
    TensorBoardCallback,
)
from nnx_lab.runs import RunFinished, RunStarted, StepMetrics, StepRecord


def train_once(loader: DataLoader, with_tb: bool) -> tuple[float, int]:
    torch.manual_seed(0)
    model = NNModel(
        net_params=NNParams(input_dim=784, output_dim=10, hidden_dims=[512, 512]),
        params=NNModelParams(net=Nets.FEED_FWD, device=Devices.CPU, loss=Losses.CROSS_ENTROPY),
    )
    with tempfile.TemporaryDirectory() as root:
        callbacks = [TensorBoardCallback(os.path.join(root, "tb"))] if with_tb else []
        params = NNTrainParams(
            n_epochs=3,
            train_loader=loader,
            optim=NNOptimParams(name=Optims.ADAM, max_lr=1e-3, grad_clip_norm=1.0),
            runs_root=os.path.join(root, "runs"),
            progress=False,
        )
        t0 = time.perf_counter()
        run = model.train(params=params, callbacks=callbacks)
        return time.perf_counter() - t0, len(run.idps)


def callback_cost_per_step(n_steps: int = 30_000, log_every: int = 50) -> float:
    """Seconds the callback spends per step on the StepMetrics batches the loop emits."""
    with tempfile.TemporaryDirectory() as root:
        cb = TensorBoardCallback(root)
        cb.on_run_started(RunStarted("0" * 32, None, 3, 1, 0, n_steps // 3, config={}))
        t0 = time.perf_counter()
        for start in range(1, n_steps + 1, log_every):
            records = tuple(
                StepRecord(
                    step=s,
                    epoch=1,
                    batch=s,
                    lr=1e-3,
                    samples=128,
                    loss=1.0 / s,
                    error=0.5,
                    accuracy=0.5,
                )
                for s in range(start, min(start + log_every, n_steps + 1))
            )
            cb.on_step_metrics(StepMetrics(records))
        cb.on_run_finished(RunFinished("0" * 32, "finished", 3, n_steps))
        cb.on_detach()
        return (time.perf_counter() - t0) / n_steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="pairs of runs (default 3)")
    parser.add_argument("--samples", type=int, default=20_000, help="training rows")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    g = torch.Generator().manual_seed(0)
    X = torch.randn(args.samples, 784, generator=g)
    y = torch.randint(0, 10, (args.samples,), generator=g)
    loader = DataLoader(TensorDataset(X, y), batch_size=128, shuffle=True)
    train_once(loader, with_tb=False)  # warm-up
    times: dict[bool, list[float]] = {False: [], True: []}
    steps = 0
    for r in range(args.rounds):
        for with_tb in (False, True) if r % 2 == 0 else (True, False):
            seconds, steps = train_once(loader, with_tb)
            times[with_tb].append(seconds)
            label = "tensorboard" if with_tb else "without    "
            print(f"round {r + 1} {label}: {seconds:6.2f} s  {steps / seconds:7.1f} steps/s")
    for name, pick in (("fastest", min), ("median", statistics.median)):
        base, tb = pick(times[False]), pick(times[True])
        print(
            f"{name:8s} without {base:6.2f} s, with {tb:6.2f} s: throughput ratio {base / tb:.3f}"
        )
    per_step = callback_cost_per_step()
    step_time = min(times[False]) / steps
    print(
        f"callback alone: {per_step * 1e6:.1f} us per step, "
        f"{100 * per_step / step_time:.3f}% of a {step_time * 1e3:.1f} ms training step"
    )


if __name__ == "__main__":
    main()
