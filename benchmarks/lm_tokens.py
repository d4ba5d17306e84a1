"""Tokens per second of a causal language model (run by hand, not a test).

Training: the same ``Nets.TRANSFORMER`` and windows two ways in one process, rounds
alternating their order: a hand-written loop (forward, token cross-entropy, backward,
Adam step) and ``NNModel.train(objective=CausalLMTask(...).objective())`` (run recorded,
no validation, no progress bar). Generation: greedy continuations of a batch of prompts
with the KV cache (one token per step) and without it (the whole context each step),
through ``nnx_lab.lm_tasks.generate``, against a hand-written uncached loop.

    python benchmarks/lm_tokens.py [--rounds 3] [--epochs 1] [--device cpu] [--threads N]

Prints each variant's tokens per second (fastest round: the least disturbed by other
work on the machine) and the ratios: objective / hand-written (target >= 0.95) and
cached / uncached generation.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ["NNX_TQDM_DISABLE"] = "1"

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import Nets, NNModel, NNModelParams, NNOptimParams, NNTrainParams, NNTransformerParams
from nnx_lab.lm_tasks import CausalLMTask, generate

V = 256


def params(args: argparse.Namespace) -> NNTransformerParams:
    return NNTransformerParams(
        vocab_size=V,
        n_layers=args.layers,
        d_model=args.d_model,
        n_heads=args.heads,
        max_seq_len=args.seq,
    )


def windows(args: argparse.Namespace) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, V, (args.rows, args.seq + 1), generator=g)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def train_raw(args: argparse.Namespace, ids: torch.Tensor, device: torch.device) -> float:
    torch.manual_seed(0)
    model = NNModel(params(args), NNModelParams(net=Nets.TRANSFORMER, device=args.device))
    net = model.net
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(ids), batch_size=args.batch)
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        for (x,) in loader:
            x = x.to(device, non_blocking=True)
            logits = net(x[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, V), x[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    _sync(device)
    return time.perf_counter() - t0


def train_objective(args: argparse.Namespace, ids: torch.Tensor, salt: int) -> float:
    torch.manual_seed(0)
    model = NNModel(params(args), NNModelParams(net=Nets.TRANSFORMER, device=args.device))
    task = CausalLMTask(V)
    loader = DataLoader(TensorDataset(ids), batch_size=args.batch)
    with tempfile.TemporaryDirectory() as root:
        p = NNTrainParams(
            n_epochs=args.epochs,
            train_loader=loader,
            optim=NNOptimParams(max_lr=1e-3),
            runs_root=root,
            progress=False,
            checkpoint_every_s=0,
            save_phase_checkpoints=False,
        )
        _sync(model.device)
        t0 = time.perf_counter()
        model.train(p, objective=task.objective(), salt=str(salt))
        _sync(model.device)
        return time.perf_counter() - t0


def raw_generate(net: torch.nn.Module, prompt: torch.Tensor, new: int) -> torch.Tensor:
    ids = prompt
    with torch.no_grad():
        for _ in range(new):
            token = net(ids[:, -net.max_seq_len :])[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat((ids, token), dim=1)
    return ids


def gen_times(args: argparse.Namespace, device: torch.device) -> dict[str, float]:
    torch.manual_seed(0)
    net = NNModel(params(args), NNModelParams(net=Nets.TRANSFORMER, device=args.device)).net
    net.eval()
    prompt = torch.randint(0, V, (args.gen_rows, 8), device=device)
    out: dict[str, float] = {}
    for name, run in (
        ("cached", lambda: generate(net, prompt, args.new, temperature=0, use_cache=True)),
        ("uncached", lambda: generate(net, prompt, args.new, temperature=0, use_cache=False)),
        ("hand-written uncached", lambda: raw_generate(net, prompt, args.new)),
    ):
        _sync(device)
        t0 = time.perf_counter()
        run()
        _sync(device)
        out[name] = time.perf_counter() - t0
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--gen-rows", type=int, default=8)
    ap.add_argument("--new", type=int, default=56)
    args = ap.parse_args()
    from nnx_lab.runs import set_config_report

    set_config_report(False)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    ids = windows(args)
    tokens = args.epochs * args.rows * args.seq  # target tokens trained on
    train = {"hand-written": [], "objective": []}
    gen: dict[str, list[float]] = {}
    for r in range(args.rounds):
        order = ["hand-written", "objective"] if r % 2 == 0 else ["objective", "hand-written"]
        for kind in order:
            t = (
                train_raw(args, ids, device)
                if kind == "hand-written"
                else train_objective(args, ids, r)
            )
            train[kind].append(t)
        for name, t in gen_times(args, device).items():
            gen.setdefault(name, []).append(t)
    print(
        f"device={args.device} threads={torch.get_num_threads()} rounds={args.rounds} "
        f"model: {args.layers} layers, d_model {args.d_model}, {args.seq} tokens per window"
    )
    best = {k: min(v) for k, v in train.items()}
    for kind, t in best.items():
        print(f"training {kind:>13}: {tokens / t:,.0f} tokens/s (fastest of {args.rounds})")
    print(
        f"training ratio objective / hand-written: {best['hand-written'] / best['objective']:.3f}"
        " (target >= 0.95)"
    )
    new_tokens = args.gen_rows * args.new
    gbest = {k: min(v) for k, v in gen.items()}
    for name, t in gbest.items():
        print(f"generation {name:>21}: {new_tokens / t:,.0f} tokens/s")
    plain, raw = gbest["uncached"], gbest["hand-written uncached"]
    print(
        f"generation ratio cached / uncached: {plain / gbest['cached']:.2f}; "
        f"uncached / hand-written uncached: {raw / plain:.3f}"
    )


if __name__ == "__main__":
    main()
