"""What a live TrainingMonitor costs a training run (run by hand, not a test).

The engine's large case: MLP 784 -> 512 -> 512 -> 10 on 20,000 random samples, batch
128, 3 epochs, Adam, cross-entropy, grad clip 1.0, no progress bar, no validation.
Runs with and without a TrainingMonitor alternate (the order flips every round) in
one process. No browser: the monitor's comm is replaced by a FakeFrontend that
counts (and JSON-encodes) every message it would send.

    python benchmarks/monitor_overhead.py [--rounds 3]

Prints the throughput ratio with/without the monitor (target >= 0.98), from the
fastest run of each kind (the least disturbed by other work on the machine) and from
the medians; the messages and bytes the monitor sends per 1,000 steps; and the
monitor's own cost per step measured alone (scripted events, no torch), which does
not depend on how busy the machine is.
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
)
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend


def make_loader() -> DataLoader:
    g = torch.Generator().manual_seed(0)
    X = torch.randn(20_000, 784, generator=g)
    y = torch.randint(0, 10, (20_000,), generator=g)
    return DataLoader(TensorDataset(X, y), batch_size=128, shuffle=True)


def train_once(loader: DataLoader, with_monitor: bool) -> tuple[float, int, FakeFrontend | None]:
    torch.manual_seed(0)
    model = NNModel(
        net_params=NNParams(input_dim=784, output_dim=10, hidden_dims=[512, 512]),
        params=NNModelParams(net=Nets.FEED_FWD, device=Devices.CPU, loss=Losses.CROSS_ENTROPY),
    )
    callbacks = []
    frontend = None
    if with_monitor:
        monitor = TrainingMonitor()
        frontend = FakeFrontend(monitor)
        frontend.hello()  # a view is open
        frontend.clear()
        callbacks.append(monitor)
    with tempfile.TemporaryDirectory() as root:
        params = NNTrainParams(
            n_epochs=3,
            train_loader=loader,
            optim=NNOptimParams(name=Optims.ADAM, max_lr=1e-3, grad_clip_norm=1.0),
            runs_root=root,
            progress=False,
        )
        t0 = time.perf_counter()
        run = model.train(params=params, callbacks=callbacks)
        seconds = time.perf_counter() - t0
        steps = len(run.idps)
    if with_monitor:
        monitor.close()
    return seconds, steps, frontend


def sink_cost_per_step(n_steps: int = 30_000) -> float:
    """Seconds the monitor spends per step, fed scripted events as the loop emits them."""
    from nnx_lab.widgets._testing import feed, scripted_run

    events = scripted_run(n_epochs=3, steps_per_epoch=n_steps // 3, log_every=50)
    monitor = TrainingMonitor()
    FakeFrontend(monitor).hello()
    t0 = time.perf_counter()
    feed(monitor, events)
    seconds = time.perf_counter() - t0
    monitor.close()
    return seconds / n_steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="pairs of runs (default 3)")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch intra-op threads (default: torch's)"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    loader = make_loader()
    train_once(loader, with_monitor=False)  # warm-up: allocator, kernels, imports
    times: dict[bool, list[float]] = {False: [], True: []}
    messages = bytes_sent = steps_total = 0
    monitor_seconds = 0.0
    for r in range(args.rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        for with_monitor in order:
            seconds, steps, fe = train_once(loader, with_monitor)
            times[with_monitor].append(seconds)
            label = "monitor   " if with_monitor else "no monitor"
            print(
                f"round {r + 1} {label}: {seconds:6.2f} s  {steps / seconds:7.1f} steps/s",
                flush=True,
            )
            if fe is not None:
                messages += len(fe.messages)
                bytes_sent += fe.bytes_sent
                steps_total += steps
                monitor_seconds += seconds
    print()
    for name, pick in (("fastest", min), ("median", statistics.median)):
        base, mon = pick(times[False]), pick(times[True])
        print(
            f"{name:8s} without monitor {base:6.2f} s, with {mon:6.2f} s: "
            f"throughput ratio {base / mon:.3f} (target >= 0.98)"
        )
    per_step = sink_cost_per_step()
    step_time = min(times[False]) / (steps_total / len(times[True]))
    print(
        f"monitor alone: {per_step * 1e6:.1f} us per step, "
        f"{100 * per_step / step_time:.3f}% of a {step_time * 1e3:.1f} ms training step"
    )
    print(
        f"monitor sends {1000 * messages / steps_total:.1f} messages and "
        f"{1000 * bytes_sent / steps_total / 1024:.1f} KiB per 1,000 steps "
        f"({messages} messages, {bytes_sent} bytes over {steps_total} steps; "
        f"{messages / monitor_seconds:.1f} messages/s)"
    )


if __name__ == "__main__":
    main()
