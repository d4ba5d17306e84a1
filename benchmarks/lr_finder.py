"""The LR finder's cost, and its suggestion against torch-lr-finder's, in one process.

1. Sweep time per iteration against the same number of plain training steps (a
   hand-written PyTorch loop on the same batches, model and optimizer). Target: ratio
   (sweep / plain) <= 1.1. Both alternate, and the best of N repetitions is compared.
2. When torch-lr-finder is installed (``pip install torch-lr-finder``): its
   ``range_test`` on the same model and data, its time, its suggestion (steepest
   gradient) beside ours, and which suggestion trains the better model in 3 epochs.

    python benchmarks/lr_finder.py [--reps 5] [--num-iter 100]
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile
import time

os.environ.setdefault("NNX_TQDM_DISABLE", "1")

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import NNModel, NNModelParams, NNOptimParams, NNParams, NNTrainParams, lr_finder


def data():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(20, 20, generator=g)
    X = torch.randn(4096, 20, generator=g)
    Xv = torch.randn(1024, 20, generator=g)
    train = DataLoader(
        TensorDataset(X, (X @ w).argmax(1)),
        batch_size=64,
        shuffle=True,
        generator=torch.Generator().manual_seed(1),
    )
    val = DataLoader(TensorDataset(Xv, (Xv @ w).argmax(1)), batch_size=512)
    return train, val


def build() -> NNModel:
    return NNModel(NNParams(input_dim=20, output_dim=20, hidden_dims=[128, 128]), NNModelParams())


def plain_steps(net, loader, n: int) -> float:
    """n hand-written training steps at the sweep's learning rates (1e-7 to 10): past a
    point both diverge, and arithmetic on huge or non-finite weights runs slower, so both
    sides must walk the same schedule to compare like with like."""
    opt = torch.optim.Adam(net.parameters(), lr=1e-7)
    loss_fn = torch.nn.CrossEntropyLoss()
    it = iter(loader)
    t0 = time.perf_counter()
    for i in range(n):
        for group in opt.param_groups:
            group["lr"] = 1e-7 * (10.0 / 1e-7) ** (i / (n - 1))
        try:
            X, y = next(it)
        except StopIteration:
            it = iter(loader)
            X, y = next(it)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(X), y)
        loss.backward()
        opt.step()
        float(loss)  # the sweep reads every loss; so does this
    return (time.perf_counter() - t0) / n


def sweep(net, loader, n: int) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = lr_finder(net, loader, num_iter=n, diverge_margin=1e9)  # run all n steps
    return (time.perf_counter() - t0) / n, result


def train_accuracy(lr: float, train, val, root: str) -> float:
    run = build().train(
        NNTrainParams(
            n_epochs=3,
            seed=0,
            train_loader=train,
            val_loader=val,
            optim=NNOptimParams(max_lr=lr),
            runs_root=root,
            overwrite_existing=True,
        )
    )
    return run.epochs[-1]["val"]["accuracy"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--num-iter", type=int, default=100)
    args = ap.parse_args()
    train, val = data()
    model = build()
    sweep(model.net, train, 5)  # warm-up for both
    plain_steps(copy.deepcopy(model.net), train, 5)
    plain, ours = [], []
    for _ in range(args.reps):
        plain.append(plain_steps(copy.deepcopy(model.net), train, args.num_iter))
        t, result = sweep(model.net, train, args.num_iter)
        ours.append(t)
    ratio = min(ours) / min(plain)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; {args.num_iter} steps, "
        f"best of {args.reps}"
    )
    print(
        f"per iteration: plain steps {min(plain) * 1e3:.3f} ms | nnx_lab sweep "
        f"{min(ours) * 1e3:.3f} ms | ratio {ratio:.3f} (target <= 1.1) "
        f"{'OK' if ratio <= 1.1 else 'ABOVE'}"
    )
    result = lr_finder(model.net, train, num_iter=args.num_iter)
    print(f"nnx_lab suggestions: {result.suggestions} (default rule: {result.rule})")
    try:
        from torch_lr_finder import LRFinder
    except ImportError:
        print("torch-lr-finder is not installed: pip install torch-lr-finder to compare")
        return
    net = copy.deepcopy(model.net)
    opt = torch.optim.Adam(net.parameters(), lr=1e-7)
    finder = LRFinder(net, opt, torch.nn.CrossEntropyLoss(), device="cpu")
    t0 = time.perf_counter()
    finder.range_test(train, end_lr=10, num_iter=args.num_iter)
    theirs_s = (time.perf_counter() - t0) / args.num_iter
    # Its suggestion, as its plot(suggest_lr=True) computes it: the steepest gradient of
    # the (smoothed) loss, skipping the first 10 and the last 5 points.
    losses, lrs = finder.history["loss"], finder.history["lr"]
    grads = np.gradient(np.array(losses[10:-5]))
    theirs_lr = lrs[10:-5][int(np.argmin(grads))] if len(grads) else None
    print(
        f"torch-lr-finder range_test: {theirs_s * 1e3:.3f} ms per iteration; its steepest-"
        f"gradient suggestion {theirs_lr:.3g}"
    )
    with tempfile.TemporaryDirectory() as root:
        ours_acc = train_accuracy(result.suggested_lr, train, val, root)
        theirs_acc = train_accuracy(theirs_lr, train, val, root)
    print(
        f"3 epochs at nnx_lab's {result.suggested_lr:.3g}: val accuracy {ours_acc:.3f} | at "
        f"torch-lr-finder's {theirs_lr:.3g}: {theirs_acc:.3f} -> "
        f"{'nnx_lab' if ours_acc >= theirs_acc else 'torch-lr-finder'} trains better"
    )


if __name__ == "__main__":
    main()
