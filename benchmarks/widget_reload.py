"""What a page reload costs in messages (run by hand, not a test).

A TrainingMonitor is fed scripted runs directly (no torch): the issue's 20,000-epoch
run (8 steps an epoch, 160,000 steps) and a 2,000,000-step run with 200,000 epochs.
Then a view says hello, as a reloaded page does, and the script prints what the
kernel sends back: the number of messages, the largest one, and the total, JSON
included. Before, the 20,000-epoch reload was one message of 8.6 MB.

    python benchmarks/widget_reload.py
"""

from __future__ import annotations

import json
import time

from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._protocol import MAX_MESSAGE_BYTES
from nnx_lab.widgets._testing import FakeFrontend, feed, scripted_run

KIB = 1024


def reload_cost(n_epochs: int, steps_per_epoch: int) -> None:
    monitor = TrainingMonitor()
    monitor._transport.timer_factory = None
    fe = FakeFrontend(monitor)
    t0 = time.perf_counter()
    feed(monitor, scripted_run(n_epochs=n_epochs, steps_per_epoch=steps_per_epoch, log_every=50))
    fed = time.perf_counter() - t0
    fe.clear()
    t0 = time.perf_counter()
    fe.hello()
    seconds = time.perf_counter() - t0
    sizes = [
        len(json.dumps(content)) + sum(len(b) for b in buffers)
        for content, buffers in fe.custom_with_buffers()
    ]
    steps, epochs = monitor._steps, monitor._epochs
    print(
        f"{n_epochs:,} epochs x {steps_per_epoch} steps ({steps.total:,} steps, fed in "
        f"{fed:.1f} s): "
        f"the kernel holds {len(steps):,} step rows (buckets of {steps.width}) and "
        f"{len(epochs):,} epoch rows (of {epochs.width}), "
        f"{(steps.nbytes() + epochs.nbytes()) / KIB / KIB:.1f} MiB"
    )
    print(
        f"  reload: {len(sizes)} messages, largest {max(sizes) / KIB:.0f} KiB "
        f"(limit {MAX_MESSAGE_BYTES / KIB:.0f} KiB of buffers), total {sum(sizes) / KIB:.0f} KiB, "
        f"built and sent in {seconds * 1000:.0f} ms"
    )
    monitor.close()


def main() -> None:
    reload_cost(20_000, 8)
    reload_cost(200_000, 10)


if __name__ == "__main__":
    main()
