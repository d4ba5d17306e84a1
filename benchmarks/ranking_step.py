"""What the ranking objective's step costs against a hand-written loop (run by hand, not a test).

The same scorer, data and loss two ways, in one process, rounds alternating their order:
a plain PyTorch loop with Adam and a hand-written pairwise logistic loss (each query
weighing the same, the masked ``N x N`` pairs of the batch), and
``NNModel.train(objective=RankingTask().objective())`` doing that update through the
engine (the run recorded: log, checkpoints, the pairwise term per step). MLP 32 -> 256
-> 256 -> 1 on 2,000 synthetic queries of 20 candidates (40,000 rows), batches of 200
rows (10 queries), no validation, no progress bar.

    python benchmarks/ranking_step.py [--rounds 3] [--epochs 2]

Prints each kind's fastest and median seconds, the throughput ratio hand-written /
objective from the fastest runs and from the medians (target >= 0.95), and how far the
two trained networks' weights ended apart (the same update: rounding only); then the
median of the paired per-round ratios, for the whole call and for the training phase
only (without the per-run checks, identity, run directory and final write-out).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ["NNX_TQDM_DISABLE"] = "1"

import torch
import torch.nn.functional as F
from _compare import PhaseClock, phase_report  # benchmarks/ is on the path

from nnx_lab import NNModel, NNOptimParams, NNParams, NNTrainParams
from nnx_lab.ranking import RankingTask, synthetic_queries

LR = 1e-3
PHASES: list[float] = []  # each objective run's training phase (_compare.PhaseClock)


def hand_written_loss(scores, qids, rel):
    """Each query's mean pair loss, averaged over the queries that have a pair."""
    same = qids[:, None] == qids[None, :]
    pairs = (same & (rel[:, None] > rel[None, :])).float()
    losses = F.softplus(scores[None, :] - scores[:, None]) * pairs
    per_query_pairs = same.float() @ pairs.sum(1)
    weights = torch.where(per_query_pairs > 0, 1.0 / per_query_pairs.clamp(min=1.0), 0.0)
    n_queries = ((per_query_pairs > 0).float() / same.float().sum(1)).sum().round()
    return (losses.sum(1) * weights).sum() / n_queries.clamp(min=1.0)


def make_batches():
    data = synthetic_queries(2000, 20, 32, seed=0)
    return data.batches(200)


def fresh_model() -> NNModel:
    torch.manual_seed(0)
    return NNModel(net_params=NNParams(input_dim=32, output_dim=1, hidden_dims=[256, 256]))


def hand_written(batches, epochs: int, salt: int):
    net = fresh_model().net  # the same architecture and initial weights
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    net.train()
    t0 = time.perf_counter()
    for _ in range(epochs):
        for features, qids, _, rel in batches:
            opt.zero_grad(set_to_none=True)
            loss = hand_written_loss(net(features)[:, 0], qids, rel)
            loss.backward()
            opt.step()
            loss.detach().item()  # the engine reads the window's loss once per update too
    return time.perf_counter() - t0, net


def objective(batches, epochs: int, salt: int):
    model = fresh_model()
    task = RankingTask()
    with tempfile.TemporaryDirectory() as root:
        params = NNTrainParams(
            n_epochs=epochs,
            train_loader=batches,
            optim=NNOptimParams(max_lr=LR),
            runs_root=root,
            progress=False,
        )
        clock = PhaseClock()
        t0 = time.perf_counter()
        model.train(params, objective=task.objective(), salt=str(salt), callbacks=[clock])
        seconds = time.perf_counter() - t0
    PHASES.append(clock.seconds)
    return seconds, model.net


KINDS = {"hand_written": hand_written, "objective": objective}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    from nnx_lab.runs import set_config_report

    set_config_report(False)  # no "Run saved" line per run among the figures
    if args.threads:
        torch.set_num_threads(args.threads)
    batches = make_batches()
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    nets = {}
    order = list(KINDS)
    for r in range(args.rounds):
        for kind in order if r % 2 == 0 else order[::-1]:
            seconds, nets[kind] = KINDS[kind](batches, args.epochs, r)
            times[kind].append(seconds)
    base_best, base_med = min(times["hand_written"]), statistics.median(times["hand_written"])
    print(f"epochs={args.epochs} rounds={args.rounds} batches/epoch={len(batches)}")
    for kind, ts in times.items():
        best, med = min(ts), statistics.median(ts)
        line = f"{kind:>13}: fastest {best:.2f} s, median {med:.2f} s"
        if kind != "hand_written":
            line += f"; throughput vs hand-written {base_best / best:.3f} (fastest), "
            line += f"{base_med / med:.3f} (median); target >= 0.95"
        print(line)
    paired = [h / o for h, o in zip(times["hand_written"], times["objective"], strict=True)]
    median = statistics.median(paired)
    print(f"objective: median of the {len(paired)} per-round ratios {median:.3f}")
    phase_report(times["hand_written"], PHASES, "objective")
    apart = max(
        float((a - b).detach().abs().max())
        for a, b in zip(
            nets["hand_written"].parameters(), nets["objective"].parameters(), strict=True
        )
    )
    print(f"largest weight difference after training: {apart:.2e}")


if __name__ == "__main__":
    main()
