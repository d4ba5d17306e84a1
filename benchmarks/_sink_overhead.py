"""The shared frame of the benchmarks that price one sink of the event stream (the live
monitor, the TensorBoard callback): the engine's large case trained with and without
it, the rounds alternating in one process, and the ratio and per-step lines.

    loader = large_loader()
    times, steps = with_and_without(rounds, lambda on: train_large(loader, sinks(on)), labels)
    print_ratios(times, " monitor", target=0.98)
    print_alone("monitor", per_step, min(times[False]) / steps)
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable

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
)


def large_loader(samples: int = 20_000) -> DataLoader:
    """``samples`` random rows of 784 features, 10 classes, batch 128, shuffled."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(samples, 784, generator=g)
    y = torch.randint(0, 10, (samples,), generator=g)
    return DataLoader(TensorDataset(X, y), batch_size=128, shuffle=True)


def train_large(loader: DataLoader, callbacks_in: Callable[[str], list]) -> tuple[float, int]:
    """The large case (MLP 784 -> 512 -> 512 -> 10, 3 epochs, Adam, cross-entropy, grad
    clip 1.0, no progress bar, no validation) under a temporary root; ``callbacks_in(root)``
    gives the sinks. Returns the seconds ``train`` took and its steps."""
    torch.manual_seed(0)
    model = NNModel(
        net_params=NNParams(input_dim=784, output_dim=10, hidden_dims=[512, 512]),
        params=NNModelParams(net=Nets.FEED_FWD, device=Devices.CPU, loss=Losses.CROSS_ENTROPY),
    )
    with tempfile.TemporaryDirectory() as root:
        callbacks = callbacks_in(root)
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


def with_and_without(
    rounds: int,
    once: Callable[[bool], tuple[float, int]],
    labels: tuple[str, str],
    flush: bool = False,
) -> tuple[dict[bool, list[float]], int]:
    """``once(False)`` (without the sink) and ``once(True)`` each round, the order flipped
    every other round, after one warm-up without (allocator, kernels, imports). Prints a
    line a run (``labels``: without, with); returns the seconds of each and the steps."""
    once(False)
    times: dict[bool, list[float]] = {False: [], True: []}
    steps = 0
    for r in range(rounds):
        for on in (False, True) if r % 2 == 0 else (True, False):
            seconds, steps = once(on)
            times[on].append(seconds)
            print(
                f"round {r + 1} {labels[on]}: {seconds:6.2f} s  {steps / seconds:7.1f} steps/s",
                flush=flush,
            )
    return times, steps


def print_ratios(times: dict[bool, list[float]], what: str, target: float | None = None) -> None:
    """The throughput ratio without / with, of the fastest and of the median runs."""
    goal = f" (target >= {target})" if target is not None else ""
    for name, pick in (("fastest", min), ("median", statistics.median)):
        base, on = pick(times[False]), pick(times[True])
        print(
            f"{name:8s} without{what} {base:6.2f} s, with {on:6.2f} s: "
            f"throughput ratio {base / on:.3f}{goal}"
        )


def print_alone(what: str, per_step: float, step_time: float) -> None:
    """The sink's own cost per step, as a share of a training step."""
    print(
        f"{what} alone: {per_step * 1e6:.1f} us per step, "
        f"{100 * per_step / step_time:.3f}% of a {step_time * 1e3:.1f} ms training step"
    )
