"""Data-parallel training: nnx_lab under torchrun against a hand-written DDP loop, and the
launcher's latency.

Three measurements, in one run:

1. training-phase samples/s of nnx_lab with 1 process and with N processes (the overhead
   benchmark's large MLP, global batch 128, Adam, clipping at 1.0), under torchrun;
2. the same N processes running a hand-written ``DistributedDataParallel`` loop on the
   same shards: the ratio nnx_lab / raw is the engine's cost under DDP;
3. the time from ``nnx_lab.launch(plan)`` to the first step in its ``TrainingMonitor``,
   against the time torchrun takes to start N bare processes that import torch and join
   the group (the floor any launcher pays).

    python benchmarks/ddp.py                       # CPU, gloo, 2 processes
    python benchmarks/ddp.py --device cuda --nproc 4  # NCCL, one GPU a process

On a 2-core machine N=2 gives no speed-up (both processes share the cores): the figures
are there to catch regressions. ``benchmarks/ddp_cuda.sh`` runs the CUDA case.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
os.environ.setdefault("NNX_TQDM_DISABLE", "1")


# -- in a rank -------------------------------------------------------------------------
def _loader(device: str):
    import _ddp_data as d

    from nnx_lab import distributed

    world = distributed.world_size()
    return distributed.train_loader(d.dataset(), d.BATCH // world, seed=0, shuffle=True)


def rank_nnx(epochs: int, device: str) -> float:
    import _ddp_data as d

    from nnx_lab import (
        Callback,
        NNModel,
        NNModelParams,
        NNOptimParams,
        NNParams,
        NNTrainParams,
        distributed,
    )

    class Clock(Callback):
        def on_run_started(self, event):
            self.start = time.perf_counter()

        def on_epoch_ended(self, event):
            self.end = time.perf_counter()

    model = NNModel(
        net_params=NNParams(input_dim=d.D_IN, output_dim=d.D_OUT, hidden_dims=d.HIDDEN),
        params=NNModelParams(device=device),
    )
    params = NNTrainParams(
        n_epochs=epochs,
        train_loader=_loader(device),
        seed=0,
        optim=NNOptimParams(max_lr=1e-3, grad_clip_norm=1.0),
        runs_root=os.environ["BENCH_RUNS"],
        progress=False,
        overwrite_existing=True,
    )
    clock = Clock()
    ddp = distributed.DDP() if distributed.world_size() > 1 else None
    model.train(params=params, callbacks=[clock], distributed=ddp)
    return d.N * epochs / (clock.end - clock.start)


def rank_raw(epochs: int, device: str) -> float:
    import _ddp_data as d
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    dims = [d.D_IN, *d.HIDDEN]
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(dims):
        layers += [nn.Linear(a, b), nn.ReLU()]
    dev = torch.device(device, torch.cuda.current_device()) if device == "cuda" else None
    net = nn.Sequential(*layers, nn.Linear(dims[-1], d.D_OUT)).to(dev or "cpu")
    net = DistributedDataParallel(net, device_ids=[dev.index] if dev else None)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    loader = _loader(device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(epochs):
        for xb, yb in loader:
            if dev is not None:
                xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(net(xb), yb)
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            loss.item()  # the engine reads each step's loss back; so does this loop
    if dev is not None:
        torch.cuda.synchronize()
    return d.N * epochs / (time.perf_counter() - start)


def rank_main(args: argparse.Namespace) -> None:
    import torch

    from nnx_lab import distributed

    # One thread a process: N processes use N cores, and no process's thread pool
    # competes with another's (oversubscribed OpenMP pools slow down by far more).
    torch.set_num_threads(1)
    distributed.init_process_group()
    if args.rank_job == "hello":
        if distributed.rank() == 0:
            Path(args.out).write_text(json.dumps({"time": time.time()}))
        distributed.shutdown()
        return
    fn = rank_nnx if args.rank_job == "nnx" else rank_raw
    rate = fn(args.epochs, args.device)
    if distributed.rank() == 0:
        Path(args.out).write_text(json.dumps({"samples_per_s": rate}))
    distributed.shutdown()


# -- the driver --------------------------------------------------------------------------
def _env() -> dict[str, str]:
    path = os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}


def torchrun(nproc: int, job: str, args: argparse.Namespace, runs: str) -> tuple[dict, float]:
    out = Path(tempfile.mkdtemp()) / "result.json"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc_per_node={nproc}", str(Path(__file__).resolve()),
        "--rank-job", job, "--out", str(out), "--epochs", str(args.epochs),
        "--device", args.device,
    ]  # fmt: skip
    t0 = time.time()
    proc = subprocess.run(cmd, env={**_env(), "BENCH_RUNS": runs}, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"torchrun {job} x{nproc} failed:\n{proc.stderr[-3000:]}")
    return json.loads(out.read_text()), t0


def launch_latency(nproc: int, runs: str) -> tuple[float, float, float]:
    """Seconds from ``launch()`` to: the ranks started, the run's first event
    (``run_started``) in the monitor, the first step in the monitor."""
    import _ddp_data as d

    from nnx_lab import ExperimentPlan, NNParams, NNTrainParams, launch
    from nnx_lab.plans import set_config_report

    set_config_report(False)
    plan = (
        ExperimentPlan()
        .with_net(NNParams(input_dim=d.D_IN, output_dim=d.D_OUT, hidden_dims=d.HIDDEN))
        .with_train(NNTrainParams(n_epochs=1, overwrite_existing=True))
        .with_data(d.make_train_loader, identity="ddp-benchmark")
        .with_seed(int(time.time()) % 100_000)  # a new run each time
        .with_runs_root(runs)
    )
    t0 = time.perf_counter()
    handle = launch(plan, nproc)
    marks: dict[str, float] = {}
    while "step" not in marks:
        now = time.perf_counter() - t0
        if "ranks" not in marks and len(list(handle.folder.glob("rank*.pid.json"))) == nproc:
            marks["ranks"] = now
        if "event" not in marks and handle.monitor.status != "created":
            marks["event"] = now
        if handle.monitor.step >= 1:
            marks["step"] = now
        if handle.proc.poll() is not None:
            sys.exit(f"the launched run ended early:\n{handle.logs(0)[-3000:]}")
        time.sleep(0.01)
    handle.stop()
    handle.wait(timeout=120)
    return marks.get("ranks", math.nan), marks.get("event", math.nan), marks["step"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--rank-job", choices=["nnx", "raw", "hello"], help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank_job:
        rank_main(args)
        return
    sys.path[:0] = [str(HERE), str(ROOT)]
    n = args.nproc
    one, many, raw, hello, starts = [], [], [], [], []
    with tempfile.TemporaryDirectory() as runs:
        for _ in range(args.reps):  # interleaved, so drifts in machine speed hit all alike
            one.append(torchrun(1, "nnx", args, runs)[0]["samples_per_s"])
            many.append(torchrun(n, "nnx", args, runs)[0]["samples_per_s"])
            raw.append(torchrun(n, "raw", args, runs)[0]["samples_per_s"])
            res, t0 = torchrun(n, "hello", args, runs)
            hello.append(res["time"] - t0)
            starts.append(launch_latency(n, runs))
    med = statistics.median
    print(f"device {args.device}, {n} processes, {args.reps} repetitions (medians)")
    print(f"nnx_lab 1 process : {med(one):8.0f} samples/s")
    print(
        f"nnx_lab {n} processes: {med(many):8.0f} samples/s  "
        f"(x{med(many) / med(one):.2f} of 1 process)"
    )
    print(
        f"raw DDP {n} processes: {med(raw):8.0f} samples/s  "
        f"nnx_lab / raw = {med(m / r for m, r in zip(many, raw, strict=True)):.3f}"
    )
    ranks, event, step = (med(s[i] for s in starts) for i in range(3))
    print(
        f"launch() to the first event (run_started) in the monitor: {event:.2f} s; torchrun "
        f"to {n} bare ranks in a group: {med(hello):.2f} s (ratio {event / med(hello):.2f})"
    )
    print(
        f"  the ranks started after {ranks:.2f} s; the first step in the monitor after "
        f"{step:.2f} s (steps reach the log in batches of NNTrainParams.log_every)"
    )


if __name__ == "__main__":
    main()
