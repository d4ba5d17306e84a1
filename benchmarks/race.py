"""Racing plans: one after another or side by side in threads? (run by hand, not a test)

Fits the same few plans (the digits data of ``nnx_lab.example_data``, an MLP 64 -> 64
-> 10, a learning rate each) in three ways, alternating the order every round, in one
process:

* ``sequential``: ``TrainingMonitor.race`` (what PlanBuilder's "Fit branches" does);
* ``threads``: each plan's ``fit()`` in its own thread, all at once, torch's intra-op
  threads split between them;
* ``threads, 1 torch thread``: the same with one intra-op thread per process.

    python benchmarks/race.py [--rounds 3] [--plans 3] [--epochs 4]

Prints each way's wall time (fastest and median of the rounds) and the ratio to the
sequential race, and whether the side-by-side runs trained the same weights as the
sequential ones (they cannot: ``fit()`` seeds the process-wide random streams, so
concurrent fits draw dropout masks from each other's streams). Also prints the
messages the race sent to a view per second of training, against one plan fitted alone
in a monitor (the baseline).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time

os.environ["NNX_TQDM_DISABLE"] = "1"

import torch

from nnx_lab import ExperimentPlan
from nnx_lab.example_data import DIGITS_DIMS, digits_train_loader, digits_val_loader
from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend


def plans(n: int, epochs: int, root: str) -> dict[str, ExperimentPlan]:
    base = (
        ExperimentPlan()
        .with_net(hidden_dims=[64], dropout_prob=0.1, **DIGITS_DIMS)
        .with_data(digits_train_loader, val=digits_val_loader, identity="digits")
        .with_epochs(epochs)
        .with_seed(1)
        .with_train(overwrite_existing=True, log_every=1)
        .with_runs_root(root)
    )
    return {f"lr {lr:g}": base.with_lr(lr) for lr in [1e-3, 3e-3, 1e-2, 3e-2][:n]}


def sequential(race: dict[str, ExperimentPlan]) -> tuple[float, dict[str, float], float]:
    monitor = TrainingMonitor()
    frontend = FakeFrontend(monitor)
    t0 = time.perf_counter()
    results = monitor.race(race).wait()
    seconds = time.perf_counter() - t0
    monitor.close()
    losses = {name: r.metrics["train"].values["loss"] for name, r in results.items()}
    return seconds, losses, len(frontend.messages) / seconds


def single(plan: ExperimentPlan) -> float:
    """Messages a second of one plan in a monitor of its own (the baseline)."""
    monitor = TrainingMonitor()
    frontend = FakeFrontend(monitor)
    t0 = time.perf_counter()
    monitor.fit_plan(plan).wait()
    rate = len(frontend.messages) / (time.perf_counter() - t0)
    monitor.close()
    return rate


def side_by_side(race: dict[str, ExperimentPlan], torch_threads: int | None):
    before = torch.get_num_threads()
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    results: dict[str, float] = {}

    def fit(name: str, plan: ExperimentPlan) -> None:
        results[name] = plan.fit(report=False).metrics["train"].values["loss"]

    threads = [threading.Thread(target=fit, args=item) for item in race.items()]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    torch.set_num_threads(before)
    return seconds, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plans", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads, "
        f"{os.cpu_count()} CPUs"
    )
    times: dict[str, list[float]] = {"sequential": [], "threads": [], "threads, 1 torch": []}
    same = []
    rates: list[float] = []
    single_rates: list[float] = []
    with tempfile.TemporaryDirectory() as root:
        race = plans(args.plans, args.epochs, root)
        sequential(race)  # warm up: imports, the data set, first allocations
        for r in range(args.rounds):
            ways = ["sequential", "threads", "threads, 1 torch"]
            if r % 2:
                ways.reverse()
            for way in ways:
                if way == "sequential":
                    seconds, ref, rate = sequential(race)
                    rates.append(rate)
                    single_rates.append(single(next(iter(race.values()))))
                elif way == "threads":
                    seconds, par = side_by_side(race, None)
                else:
                    seconds, par = side_by_side(race, 1)
                times[way].append(seconds)
            same.append(all(abs(par[n] - ref[n]) < 1e-9 for n in ref))
    base = min(times["sequential"])
    print(f"{args.plans} plans x {args.epochs} epochs of digits, {args.rounds} rounds")
    for way, ts in times.items():
        print(
            f"  {way:>17}: fastest {min(ts):6.2f} s, median {statistics.median(ts):6.2f} s, "
            f"ratio to sequential (fastest) {min(ts) / base:.2f}"
        )
    print(f"  side-by-side runs trained what the sequential ones did: {all(same)}")
    race_rate, one_rate = statistics.median(rates), statistics.median(single_rates)
    print(
        f"  messages to a view per second: racing {race_rate:.1f}, one run alone "
        f"{one_rate:.1f} (ratio {race_rate / one_rate:.2f})"
    )


if __name__ == "__main__":
    main()
