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
import tempfile
import time

import torch
from _sink_overhead import (  # benchmarks/ is on the path
    large_loader,
    print_alone,
    print_ratios,
    train_large,
    with_and_without,
)

from nnx_lab import TensorBoardCallback
from nnx_lab.runs import RunFinished, RunStarted, StepMetrics, StepRecord


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
    loader = large_loader(args.samples)

    def once(with_tb: bool) -> tuple[float, int]:
        return train_large(
            loader,
            lambda root: [TensorBoardCallback(os.path.join(root, "tb"))] if with_tb else [],
        )

    times, steps = with_and_without(args.rounds, once, ("without    ", "tensorboard"))
    print_ratios(times, "")
    print_alone("callback", callback_cost_per_step(), min(times[False]) / steps)


if __name__ == "__main__":
    main()
