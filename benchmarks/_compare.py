"""The shared frame of the benchmarks that race a few ways of training the same thing:
the common flags, the alternating order (so neither side always runs warm), and the
ratio lines against a baseline measured in the same run.

    args = bench_args(epochs=2)            # --rounds --epochs --threads (+ your own)
    times = alternate(kinds, args.rounds)  # kinds: {name: fn(round) -> seconds}
    report(times, baseline="hand_written", target=0.95)

    clock = PhaseClock()                   # model.train(..., callbacks=[clock])
    phase_report(hand_times, clock_times, "kd")   # the ratio without setup and finish
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from nnx_lab import Callback


def bench_args(
    *,
    rounds: int = 3,
    epochs: int = 2,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """Parse --rounds, --epochs and --threads (plus what ``extra`` adds); set the torch
    threads and silence the per-run "Run saved" line among the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--epochs", type=int, default=epochs)
    ap.add_argument("--threads", type=int, default=None)
    if extra is not None:
        extra(ap)
    args = ap.parse_args()
    import torch

    from nnx_lab.runs import set_config_report

    set_config_report(False)
    if args.threads:
        torch.set_num_threads(args.threads)
    return args


def alternate(kinds: dict[str, Callable[[int], float]], rounds: int) -> dict[str, list[float]]:
    """Each kind's seconds per round, the order reversed every other round."""
    times: dict[str, list[float]] = {k: [] for k in kinds}
    order = list(kinds)
    for r in range(rounds):
        for kind in order if r % 2 == 0 else order[::-1]:
            times[kind].append(kinds[kind](r))
    return times


def report(
    times: dict[str, list[float]], baseline: str, target: float | None = None
) -> dict[str, float]:
    """Print each kind's fastest and median time and its throughput against
    ``baseline`` (baseline time / its time: above 1 is faster), and ``target`` when one
    is set; returns the median ratios."""
    base_best, base_med = min(times[baseline]), statistics.median(times[baseline])
    width = max(map(len, times))
    ratios = {}
    for kind, ts in times.items():
        best, med = min(ts), statistics.median(ts)
        line = f"{kind:>{width}}: fastest {best:.2f} s, median {med:.2f} s"
        if kind != baseline:
            ratios[kind] = base_med / med
            line += f"; throughput vs {baseline} {base_best / best:.3f} (fastest), "
            line += f"{base_med / med:.3f} (median)"
            if target is not None:
                line += f"; target >= {target}"
        print(line)
    return ratios


class PhaseClock(Callback):
    """A callback timing a run's training phase: from ``RunStarted`` (checks done, run
    directory reserved, data identified) to the last ``EpochEnded`` (every step, every
    epoch end and its checkpoints; not the final write-out). It listens to no per-step
    event, so the steps cost what they cost without it."""

    def __init__(self) -> None:
        self.start = self.end = 0.0

    def on_run_started(self, event: object) -> None:
        self.start = time.perf_counter()

    def on_epoch_ended(self, event: object) -> None:
        self.end = time.perf_counter()

    @property
    def seconds(self) -> float:
        return self.end - self.start


def phase_report(hand: list[float], phases: list[float], name: str) -> float:
    """Print the median of the paired per-round ratios hand-written / nnx-lab training
    phase (what the whole-call ratio is once the per-run setup and finish are left
    out); returns it."""
    paired = [h / p for h, p in zip(hand, phases, strict=True)]
    median = statistics.median(paired)
    print(
        f"{name}: training phase only (RunStarted to the last EpochEnded), median of the "
        f"{len(paired)} per-round ratios {median:.3f}"
    )
    return median
