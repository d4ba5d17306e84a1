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

Prints each kind's fastest and median seconds and the ratio raw / interpret from the
fastest runs (the least disturbed by other work on the machine) and from the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ["NNX_TQDM_DISABLE"] = "1"

import torch
import torch.nn.functional as F
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--samples", type=int, default=24)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
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
    times: dict[str, list[float]] = {k: [] for k in kinds}
    order = list(kinds)
    for r in range(args.rounds):
        for kind in order if r % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            kinds[kind]()
            times[kind].append(time.perf_counter() - t0)
    print(f"rows=20000 batch=512 samples_per_cell={args.samples} rounds={args.rounds}")
    print(f"the same confusion matrix: {same}")
    for kind, ts in times.items():
        print(f"{kind:>10}: fastest {min(ts):.3f} s, median {statistics.median(ts):.3f} s")
    best = min(times["raw"]) / min(times["interpret"])
    med = statistics.median(times["raw"]) / statistics.median(times["interpret"])
    print(f"raw / interpret: {best:.3f} (fastest), {med:.3f} (median)")


if __name__ == "__main__":
    main()
