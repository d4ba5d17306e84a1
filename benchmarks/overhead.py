"""Overhead of ``NNModel.train`` against a hand-written PyTorch loop, in one process.

Both train the same MLP on the same data with Adam, cross-entropy and gradient
clipping at 1.0; nnx_lab runs with the bar and validation off. Repetitions alternate
between the two so drift in machine speed hits both alike.

Two nnx_lab figures are printed. "train" is the throughput of the training phase: from
the moment the run starts (``RunStarted``: checks done, run directory reserved) to the
last epoch's end (``EpochEnded``), so every step, per-step metric read-back, epoch-end
log line and mid-run checkpoint is inside it; this is the ratio the targets apply to.
"call" is the whole ``train()`` call, adding the one-off setup before the first step
(checks, data hashing, run directory) and the finish after the last epoch (final LAST
and BEST checkpoint, metadata); both parts are also printed in milliseconds, and the
startup cost in a fresh process is measured separately (time to first optimizer step).

    python benchmarks/overhead.py            # every case
    python benchmarks/overhead.py --reps 3 --case small
    python benchmarks/overhead.py --reps 3 --case small --no-fast-batches
    python benchmarks/overhead.py --case cnn --case transformer --device cuda --precision bf16

The "cnn" case trains ``Nets.CONV`` on synthetic 1x28x28 images (batch 128) and the
"transformer" case a small ``Nets.TRANSFORMER`` on next-token batches with a custom loss;
their raw loop trains the same module (built from the same params) by hand, so the ratio
is the loop's cost alone (benchmarks/overhead_nets.py).

Prints samples/s for each side and their ratio (nnx_lab / raw; 1.0 = no overhead),
then import time and time to the first optimizer step against plain torch.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("NNX_TQDM_DISABLE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from overhead_nets import NET_CASES

# the optimizer's keywords on each side of the MLP cases (step_cost.py --fused sets
# {"fused": True}: nnx-lab's NNOptimParams(fused=True), torch.optim.Adam(fused=True))
NNX_OPTIM: dict = {}
RAW_OPTIM: dict = {}

CASES = {
    # name: (input, hidden, output, samples, batch, epochs, target ratio)
    "large": (784, (512, 512), 10, 20_000, 128, 3, 0.97),
    "small": (8, (32, 16), 3, 256, 32, 10, 0.85),
    # 1000 classes (an ImageNet-sized head): each step's metrics over that many classes
    "classes": (64, (128,), 1000, 4096, 32, 2, 0.97),
}


def make_data(case: str):
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    d_in, _, d_out, n, batch, _, _ = CASES[case]
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, d_in, generator=g)
    y = torch.randint(0, d_out, (n,), generator=g)
    return DataLoader(TensorDataset(X, y), batch_size=batch, shuffle=True)


def raw_loop(case: str, loader) -> float:
    import torch
    from torch import nn

    d_in, hidden, d_out, n, _, epochs, _ = CASES[case]
    torch.manual_seed(0)
    dims = [d_in, *hidden]
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(dims):
        layers += [nn.Linear(a, b), nn.ReLU()]
    net = nn.Sequential(*layers, nn.Linear(dims[-1], d_out))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, **RAW_OPTIM)
    loss_fn = nn.CrossEntropyLoss()
    t0 = time.perf_counter()
    net.train()
    for _ in range(epochs):
        for X, y in loader:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(net(X), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
    return n * epochs / (time.perf_counter() - t0)


def nnx_loop(case: str, loader, root: str) -> tuple[float, float, float, float]:
    """(train-phase samples/s, whole-call samples/s, setup ms, finish ms)."""
    from nnx_lab import (
        Callback,
        NNModel,
        NNModelParams,
        NNOptimParams,
        NNParams,
        NNTrainParams,
    )
    from nnx_lab.runs import set_config_report

    set_config_report(False)  # one "Run saved to ..." line a run would bury the figures

    class Clock(Callback):
        def on_run_started(self, event):
            self.start = time.perf_counter()

        def on_epoch_ended(self, event):
            self.end = time.perf_counter()

    d_in, hidden, d_out, n, _, epochs, _ = CASES[case]
    model = NNModel(
        net_params=NNParams(input_dim=d_in, output_dim=d_out, hidden_dims=hidden),
        params=NNModelParams(),
    )
    params = NNTrainParams(
        n_epochs=epochs,
        train_loader=loader,
        seed=0,
        optim=NNOptimParams(max_lr=1e-3, grad_clip_norm=1.0, **NNX_OPTIM),
        runs_root=tempfile.mkdtemp(dir=root),  # a fresh root: a new run, as a user's would be
        progress=False,
    )
    clock = Clock()
    t0 = time.perf_counter()
    model.train(params=params, callbacks=[clock])
    t1 = time.perf_counter()
    samples = n * epochs
    return (
        samples / (clock.end - clock.start),
        samples / (t1 - t0),
        1000 * (clock.start - t0),
        1000 * (t1 - clock.end),
    )


def run_case(case: str, reps: int, device: str = "cpu", precision: str | None = None) -> float:
    if case in NET_CASES:
        loader = NET_CASES[case].data()
        target = NET_CASES[case].target

        def raw_fn(loader):
            return NET_CASES[case].raw(loader, device, precision)

        def nnx_fn(loader, root):
            return NET_CASES[case].nnx(loader, root, device, precision)
    else:
        loader, target = make_data(case), CASES[case][-1]

        def raw_fn(loader):
            return raw_loop(case, loader)

        def nnx_fn(loader, root):
            return nnx_loop(case, loader, root)

    raw, ours = [], []
    with tempfile.TemporaryDirectory() as root:
        raw_fn(loader)  # warm-up: first-call costs (kernels, lazy imports) for both
        nnx_fn(loader, root)
        for _ in range(reps):
            raw.append(raw_fn(loader))
            ours.append(nnx_fn(loader, root))
    # Each pair ran back to back, so its ratio cancels slow drifts of the machine's speed;
    # best-of-N compares each side's fastest repetition (the least disturbed one).
    train = statistics.median(o[0] / r for r, o in zip(raw, ours, strict=True))
    call = statistics.median(o[1] / r for r, o in zip(raw, ours, strict=True))
    best_train = max(o[0] for o in ours) / max(raw)
    best_call = max(o[1] for o in ours) / max(raw)
    med = statistics.median
    label = case if device == "cpu" else f"{case} ({device}, {precision or 'fp32'})"
    print(
        f"{label:>5}: raw {med(raw):8.0f} samples/s | nnx_lab train {med(o[0] for o in ours):8.0f}"
        f" samples/s | training-phase ratio {train:.3f} median of {reps} pairs, "
        f"{best_train:.3f} best of {reps} (target >= {target}) "
        f"{'OK' if train >= target else 'BELOW'}"
    )
    print(
        f"       whole train() call: {med(o[1] for o in ours):8.0f} samples/s, ratio {call:.3f} "
        f"median of pairs, {best_call:.3f} best of {reps}; setup "
        f"{med(o[2] for o in ours):.1f} ms, finish {med(o[3] for o in ours):.1f} ms"
    )
    return train


def import_times() -> None:
    def t(code: str) -> float:
        runs = []
        for _ in range(3):
            out = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    f"import time;t=time.perf_counter();{code};print(time.perf_counter()-t)",
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(float(out.stdout.strip().splitlines()[-1]))
        return min(runs)

    torch_s = t("import torch")
    nnx_s = t("import torch, nnx_lab")
    full_s = t("import torch, nnx_lab; nnx_lab.NNModel")
    print(
        f"import: torch {torch_s:.3f}s | torch + nnx_lab {nnx_s:.3f}s "
        f"(+{nnx_s - torch_s:.3f}s, target <= +0.3s) | + engine loaded {full_s:.3f}s "
        f"(+{full_s - torch_s:.3f}s)"
    )


FIRST_STEP = """
import time, os, tempfile
t0 = time.perf_counter()
import torch
from torch.utils.data import DataLoader, TensorDataset
X, y = torch.randn(256, 8), torch.randint(0, 3, (256,))
loader = DataLoader(TensorDataset(X, y), batch_size=32)
if {nnx}:
    from nnx_lab import NNModel, NNParams, NNTrainParams, Callback
    class First(Callback):
        def on_step_ended(self, ev):
            print(time.perf_counter() - t0); os._exit(0)
    model = NNModel(net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=[32, 16]))
    model.train(NNTrainParams(train_loader=loader, runs_root=tempfile.mkdtemp(),
                              progress=False), callbacks=[First()])
else:
    net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16),
                              torch.nn.ReLU(), torch.nn.Linear(16, 3))
    opt = torch.optim.Adam(net.parameters())
    for X, y in loader:
        torch.nn.functional.cross_entropy(net(X), y).backward(); opt.step()
        print(time.perf_counter() - t0); break
"""


def first_step() -> None:
    def t(nnx: bool) -> float:
        runs = []
        for _ in range(3):
            out = subprocess.run(
                [sys.executable, "-c", FIRST_STEP.format(nnx=nnx)],
                capture_output=True,
                text=True,
                check=True,
            )
            runs.append(float(out.stdout.strip().splitlines()[-1]))
        return min(runs)

    raw, ours = t(False), t(True)
    print(
        f"time to first optimizer step (fresh process): torch {raw:.3f}s | nnx_lab "
        f"{ours:.3f}s (+{ours - raw:.3f}s)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads(N)")
    ap.add_argument("--case", choices=[*CASES, *NET_CASES, "all"], action="append")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (the cnn/transformer cases)")
    ap.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default=None)
    ap.add_argument("--no-startup", action="store_true", help="skip import/first-step timing")
    ap.add_argument(
        "--no-fast-batches",
        action="store_true",
        help="nnx_lab.set_fast_batches(False): nnx-lab iterates the DataLoader as it is",
    )
    args = ap.parse_args()
    import torch

    import nnx_lab

    nnx_lab.set_fast_batches(not args.no_fast_batches)
    from nnx_lab.runs import set_config_report

    set_config_report(False)  # the nets cases' runs print no "Run saved" line

    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, python "
        f"{sys.version.split()[0]}, fast batches {nnx_lab.set_fast_batches(None)}"
    )
    cases = args.case or ["all"]
    for case in [*CASES, *NET_CASES] if "all" in cases else cases:
        if case in CASES and args.device != "cpu":
            continue  # the MLP cases are the CPU reference
        run_case(case, args.reps, args.device, args.precision)
    if not args.no_startup:
        import_times()
        first_step()


if __name__ == "__main__":
    main()
