"""What ``interpret`` costs against a hand-written raw PyTorch pass (run by hand, not a
test).

The same trained-free MLP 784 -> 256 -> 10 over the same 20,000 random rows (batches of
512), in one process, rounds alternating their order:

- raw: ``net(x)`` under ``no_grad`` in eval mode, a ``bincount`` confusion matrix, the
  per-row cross-entropy and a running top 20 (what a user writes by hand, no samples);
- interpret: ``nnx_lab.interpretation.interpret(model, loader, top_k=20)`` with the
  default 24 samples kept per cell (each drawn as a table row of 784 values), or with
  ``--samples 0`` none.

    python benchmarks/interpretation.py [--rounds 5] [--samples 24]

Prints each kind's fastest and median seconds and the ratio raw / interpret (the
throughput against raw, benchmarks/_compare.py's report) from the fastest runs (the
least disturbed by other work on the machine) and from the medians.
"""

from __future__ import annotations

import os
import time

os.environ["NNX_TQDM_DISABLE"] = "1"

import torch
import torch.nn.functional as F
from _compare import alternate, bench_args, report  # benchmarks/ is on the path
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import NNModel, NNParams
from nnx_lab.interpretation import interpret

K, TOP = 10, 20


def raw(net: torch.nn.Module, loader: DataLoader) -> torch.Tensor:
    net.eval()
    confusion = torch.zeros(K * K, dtype=torch.long)
    top_loss, top_ids = torch.empty(0), torch.empty(0, dtype=torch.long)
    offset = 0
    with torch.no_grad():
        for x, y in loader:
            logits = net(x)
            confusion += torch.bincount(y * K + logits.argmax(1), minlength=K * K)
            loss = F.cross_entropy(logits, y, reduction="none")
            ids = torch.arange(offset, offset + len(y))
            offset += len(y)
            top_loss, at = torch.cat([top_loss, loss]).topk(TOP)
            top_ids = torch.cat([top_ids, ids])[at]
    return confusion.view(K, K)


def timed(fn):
    """``fn`` as a kind of ``alternate``: the round's seconds."""

    def kind(_round: int) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    return kind


def main() -> None:
    args = bench_args(rounds=5, extra=lambda ap: ap.add_argument("--samples", type=int, default=24))
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(20_000, 784, generator=g), torch.randint(0, K, (20_000,), generator=g)
    loader = DataLoader(TensorDataset(X, y), batch_size=512)
    model = NNModel(net_params=NNParams(input_dim=784, output_dim=K, hidden_dims=[256]))
    kinds = {
        "raw": lambda: raw(model.net, loader),
        "interpret": lambda: (
            interpret(model, loader, top_k=TOP, samples_per_cell=args.samples).confusion
        ),
    }
    same = torch.equal(torch.as_tensor(kinds["interpret"]()), kinds["raw"]())
    times = alternate({k: timed(fn) for k, fn in kinds.items()}, args.rounds)
    print(f"rows=20000 batch=512 samples_per_cell={args.samples} rounds={args.rounds}")
    print(f"the same confusion matrix: {same}")
    # throughput vs raw = raw / interpret (of the fastest runs and of the medians)
    report(times, baseline="raw")


if __name__ == "__main__":
    main()
