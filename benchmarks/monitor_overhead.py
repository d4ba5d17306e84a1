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
import time

import torch
from _sink_overhead import (  # benchmarks/ is on the path
    large_loader,
    print_alone,
    print_ratios,
    train_large,
    with_and_without,
)

from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend


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
    loader = large_loader()
    sent = {"messages": 0, "bytes": 0, "steps": 0, "seconds": 0.0, "counting": False}

    def once(with_monitor: bool) -> tuple[float, int]:
        if not with_monitor:
            return train_large(loader, lambda root: [])
        monitor = TrainingMonitor()
        frontend = FakeFrontend(monitor)
        frontend.hello()  # a view is open
        frontend.clear()
        seconds, steps = train_large(loader, lambda root: [monitor])
        monitor.close()
        sent["messages"] += len(frontend.messages)
        sent["bytes"] += frontend.bytes_sent
        sent["steps"] += steps
        sent["seconds"] += seconds
        return seconds, steps

    times, steps = with_and_without(args.rounds, once, ("no monitor", "monitor   "), flush=True)
    print()
    print_ratios(times, " monitor", target=0.98)
    messages, bytes_sent, steps_total = sent["messages"], sent["bytes"], sent["steps"]
    print_alone("monitor", sink_cost_per_step(), min(times[False]) / steps)
    print(
        f"monitor sends {1000 * messages / steps_total:.1f} messages and "
        f"{1000 * bytes_sent / steps_total / 1024:.1f} KiB per 1,000 steps "
        f"({messages} messages, {bytes_sent} bytes over {steps_total} steps; "
        f"{messages / sent['seconds']:.1f} messages/s)"
    )


if __name__ == "__main__":
    main()
