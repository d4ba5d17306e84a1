"""Each paradigm's step through NNModel.train against the same update as a hand-written
raw PyTorch loop (run by hand, not a test).

For every paradigm, the same network class, data, optimizer (Adam, clip 1.0) and loss,
in one process, rounds alternating their order (benchmarks/_compare.py):

- kd: an MLP student 64 -> 128 -> 10 distilled from a wider frozen teacher (64 -> 512 ->
  512 -> 10), alpha 0.5, T 4, on 4,000 random rows, batch 128;
- mixup: the MLP on the same rows, alpha 0.4;
- cutmix: Nets.CONV (1x16x16 images, channels 8 and 16), 2,000 random images, batch 128;
- simclr: the MLP as a 32-wide embedding on paired views (two noisy copies of each row).

    python benchmarks/paradigm_steps.py [--rounds 3] [--epochs 2] [--only kd,mixup]
    python benchmarks/paradigm_steps.py --dim 784 --hidden 512   # the large case's widths
    python benchmarks/paradigm_steps.py --split 5 --rounds 5    # the step alone

Both sides iterate one list of batches made beforehand (the step, not the loader, is
measured). Prints each kind's fastest and median seconds and the throughput ratio
hand-written / nnx-lab for each paradigm, and the median of the per-round ratios
(target >= 0.95), for the whole ``train()`` call and for its training phase only
(``_compare.PhaseClock``: without the per-run checks, identity, run directory and the
final write-out, which the hand-written loop does not do). ``--split K`` measures the step
alone: each epoch's batches once and K times over, the same epochs, so the extra time per
extra step on each side is one step's cost (the run's setup, finish, epoch ends and
checkpoints are in both of nnx-lab's runs and drop out).
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time

os.environ["NNX_TQDM_DISABLE"] = "1"

import numpy as np
import torch
import torch.nn.functional as F
from _compare import (  # benchmarks/ is on the path
    PhaseClock,
    alternate,
    bench_args,
    phase_report,
    report,
)
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    Nets,
    NNConvParams,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
)
from nnx_lab.paradigms import (
    cutmix_train_step_factory,
    kd_train_step_factory,
    mixup_train_step_factory,
    simclr_train_step_factory,
)

CLIP = 1.0


# the MLP paradigms' sizes: the default is a small step (~0.3-0.7 ms), where the
# engine's fixed cost per step weighs most; --dim 784 --hidden 512 is overhead.py's large case
SIZE = {"dim": 64, "hidden": 128}


def _rows(n=4000, d=None, k=10):
    d = SIZE["dim"] if d is None else d
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, d, generator=g)
    return X, (X @ torch.randn(d, k, generator=g)).argmax(1)


def _mlp(out=10, hidden=None):
    hidden = (SIZE["hidden"],) if hidden is None else hidden
    return NNModel(
        net_params=NNParams(input_dim=SIZE["dim"], output_dim=out, hidden_dims=list(hidden))
    )


def _cnn():
    conv = NNConvParams(output_dim=10, image_size=16, conv_channels=(8, 16), hidden_dims=(64,))
    return NNModel(conv, NNModelParams(net=Nets.CONV))


# --split: the batches of an epoch repeated this many times (the same epochs, more steps)
REPEAT = {"k": 1}


def _loader(*tensors):
    """The batches, made once: both sides iterate the same list, so the figures compare
    the steps, not a DataLoader's row-by-row collation with the engine's batched path."""
    gen = torch.Generator().manual_seed(1)
    batches = list(DataLoader(TensorDataset(*tensors), batch_size=128, shuffle=True, generator=gen))
    return batches * REPEAT["k"]


def _update(opt, net, loss):
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(net.parameters()), CLIP)
    opt.step()


HAND_STEPS = {"n": 0}  # the steps of the last hand-written run (--split)


def _hand(net, loader, epochs, loss_of):
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    net.train()
    t0 = time.perf_counter()
    for _ in range(epochs):
        for batch in loader:
            loss = loss_of(net, batch)
            _update(opt, net, loss)
            float(loss.detach())  # the step records read the loss once per update
    HAND_STEPS["n"] = epochs * len(loader)
    return time.perf_counter() - t0


PHASES: dict[str, list[float]] = {}  # each nnx-lab run's training phase, by paradigm


def _nnx(model, loader, epochs, step, salt, name):
    clock = PhaseClock()
    with tempfile.TemporaryDirectory() as root:
        params = NNTrainParams(
            n_epochs=epochs,
            train_loader=loader,
            optim=NNOptimParams(max_lr=1e-3, grad_clip_norm=CLIP),
            runs_root=root,
            progress=False,
        )
        t0 = time.perf_counter()
        model.train(params, train_step_fn=step, salt=str(salt), callbacks=[clock])
        seconds = time.perf_counter() - t0
    PHASES.setdefault(name, []).append(clock.seconds)
    return seconds


def kd_kinds(epochs):
    X, y = _rows()
    loader = _loader(X, y)
    teacher = _mlp(hidden=(512, 512)).net.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)

    def loss_of(net, batch):
        X, y = batch
        with torch.no_grad():
            t = teacher(X)
        s = net(X)
        soft = F.kl_div(
            F.log_softmax(s / 4, 1), F.log_softmax(t / 4, 1), reduction="batchmean", log_target=True
        )
        return 0.5 * soft * 16 + 0.5 * F.cross_entropy(s, y)

    return {
        "kd hand-written": lambda r: _hand(_mlp().net, loader, epochs, loss_of),
        "kd nnx-lab": lambda r: _nnx(
            _mlp(), loader, epochs, kd_train_step_factory(teacher), r, "kd"
        ),
    }


_NP = np.random.default_rng(0)


def _beta(alpha):
    return float(_NP.beta(alpha, alpha))  # the usual hand-written draw


def mixup_kinds(epochs):
    X, y = _rows()
    loader = _loader(X, y)

    def loss_of(net, batch):
        X, y = batch
        lam, perm = _beta(0.4), torch.randperm(len(y))
        out = net(lam * X + (1 - lam) * X[perm])
        return lam * F.cross_entropy(out, y) + (1 - lam) * F.cross_entropy(out, y[perm])

    return {
        "mixup hand-written": lambda r: _hand(_mlp().net, loader, epochs, loss_of),
        "mixup nnx-lab": lambda r: _nnx(
            _mlp(), loader, epochs, mixup_train_step_factory(0.4), r, "mixup"
        ),
    }


def cutmix_kinds(epochs):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(2000, 1, 16, 16, generator=g)
    y = torch.randint(0, 10, (2000,), generator=g)
    loader = _loader(X, y)

    def loss_of(net, batch):
        X, y = batch
        lam0, perm = _beta(1.0), torch.randperm(len(y))
        cy, cx = int(torch.randint(0, 16, ())), int(torch.randint(0, 16, ()))
        half = int(16 * math.sqrt(1 - lam0)) // 2
        y1, y2, x1, x2 = (
            max(cy - half, 0),
            min(cy + half, 16),
            max(cx - half, 0),
            min(cx + half, 16),
        )
        mixed = X.clone()
        mixed[:, :, y1:y2, x1:x2] = X[perm, :, y1:y2, x1:x2]
        lam = 1 - (y2 - y1) * (x2 - x1) / 256
        out = net(mixed)
        return lam * F.cross_entropy(out, y) + (1 - lam) * F.cross_entropy(out, y[perm])

    return {
        "cutmix hand-written": lambda r: _hand(_cnn().net, loader, epochs, loss_of),
        "cutmix nnx-lab": lambda r: _nnx(
            _cnn(), loader, epochs, cutmix_train_step_factory(1.0), r, "cutmix"
        ),
    }


def simclr_kinds(epochs):
    X, _ = _rows()
    g = torch.Generator().manual_seed(2)
    a, b = X + 0.1 * torch.randn(X.shape, generator=g), X + 0.1 * torch.randn(X.shape, generator=g)
    loader = _loader(a, b)

    def loss_of(net, batch):
        va, vb = batch
        z = F.normalize(net(torch.cat([va, vb])), dim=1)
        n = len(va)
        sim = (z @ z.T / 0.5).masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
        return F.cross_entropy(sim, torch.cat([torch.arange(n, 2 * n), torch.arange(n)]))

    return {
        "simclr hand-written": lambda r: _hand(_mlp(out=32).net, loader, epochs, loss_of),
        "simclr nnx-lab": lambda r: _nnx(
            _mlp(out=32), loader, epochs, simclr_train_step_factory(0.5), r, "simclr"
        ),
    }


PARADIGMS = {"kd": kd_kinds, "mixup": mixup_kinds, "cutmix": cutmix_kinds, "simclr": simclr_kinds}


def main() -> None:
    def extra(ap):
        ap.add_argument("--only", default=",".join(PARADIGMS))
        ap.add_argument("--dim", type=int, default=64, help="the MLP paradigms' input width")
        ap.add_argument("--hidden", type=int, default=128, help="the MLP's hidden width")
        ap.add_argument(
            "--split",
            type=int,
            default=0,
            metavar="K",
            help="the step alone: each epoch's batches once and K times over (the same "
            "epochs), the extra time per extra step on each side",
        )

    args = bench_args(epochs=2, extra=extra)
    SIZE.update(dim=args.dim, hidden=args.hidden)
    if args.split:
        split(args)
        return
    print(
        f"epochs={args.epochs} rounds={args.rounds} threads={torch.get_num_threads()} "
        f"mlp {args.dim} -> {args.hidden} -> 10"
    )
    for name in args.only.split(","):
        kinds = PARADIGMS[name](args.epochs)
        times = alternate(kinds, args.rounds)
        report(times, baseline=f"{name} hand-written", target=0.95)
        # on a shared machine the speed moves between rounds: each round's pair ran
        # back to back, the fairest comparison, so their ratios' median is printed too
        hand, nnx = times[f"{name} hand-written"], times[f"{name} nnx-lab"]
        paired = [h / k for h, k in zip(hand, nnx, strict=True)]
        print(
            f"{name}: median of the {len(paired)} per-round ratios {statistics.median(paired):.3f}"
        )
        phase_report(hand, PHASES[name], name)


def split(args) -> None:
    """Each paradigm's step against the hand-written one, apart from the run: both sides
    train the same epochs over each epoch's batches once and ``K`` times over, in
    alternating order each round, so the extra time divided by the extra steps is one
    step's cost (nnx-lab's training phase: its setup, finish, epoch ends and
    checkpoints are the same in both runs and drop out)."""
    k = args.split
    print(f"-- the step alone: {args.epochs} epochs of each epoch's batches x1 and x{k} --")
    for name in args.only.split(","):
        hand, ours = {1: [], k: []}, {1: [], k: []}
        steps = {1: 0, k: 0}
        for r in range(args.rounds):
            for repeat in (1, k) if r % 2 == 0 else (k, 1):
                REPEAT["k"] = repeat
                kinds = PARADIGMS[name](args.epochs)
                order = list(kinds) if r % 2 == 0 else list(kinds)[::-1]
                for kind in order:
                    seconds = kinds[kind](r)
                    if kind.endswith("hand-written"):
                        hand[repeat].append(seconds)
                        steps[repeat] = HAND_STEPS["n"]
                    else:
                        ours[repeat].append(PHASES[name][-1])
        REPEAT["k"] = 1
        extra = steps[k] - steps[1]
        ratios = [
            (hl - hs) / (ol - os_)
            for hs, hl, os_, ol in zip(hand[1], hand[k], ours[1], ours[k], strict=True)
        ]
        best = (min(hand[k]) - min(hand[1])) / (min(ours[k]) - min(ours[1]))
        h_us = 1e6 * (statistics.median(hand[k]) - statistics.median(hand[1])) / extra
        o_us = 1e6 * (statistics.median(ours[k]) - statistics.median(ours[1])) / extra
        print(
            f"{name}: a step {h_us:.0f} µs hand-written, {o_us:.0f} µs nnx-lab (medians);"
            f" step ratio {statistics.median(ratios):.3f} median of {len(ratios)} rounds,"
            f" {best:.3f} from the best times; target >= 0.95"
        )


if __name__ == "__main__":
    main()
