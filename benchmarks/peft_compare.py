"""nnx_lab.peft beside the peft library on one small model (run by hand).

The same MLP 16 -> 64 -> 64 -> 4 (its base frozen), adapted on its three linears with
LoRA (r=4, alpha=8), DoRA (the same) and IA3, once with ``nnx_lab.peft`` and once with
``peft`` (``get_peft_model``). Both start from the same weights: the base is one
network, and peft's ``lora_A`` draw is copied into ours (B is zero on both sides, the
DoRA magnitude and IA3 scale start at the base's norm and at one on both). Both train
the same N steps of Adam (lr 1e-2) on the same batches in a plain loop; the script
prints each side's trainable parameter count and the loss after N steps.

    python benchmarks/peft_compare.py [--steps 200]

It needs the peft library, which nnx-lab does not depend on: install it in a separate
environment beside the same torch (``pip install torch==2.13.0 peft``) and run this
file there with the repository on PYTHONPATH. Without peft it says so and exits 0.
"""

from __future__ import annotations

import argparse
import copy
import sys

import torch
import torch.nn.functional as F
from torch import nn

from nnx_lab.peft import apply_dora_to, apply_ia3_to, apply_lora_to

TARGETS = ["0", "2", "4"]


def base_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4)
    )


def data(steps: int):
    g = torch.Generator().manual_seed(1)
    w = torch.randn(16, 4, generator=g)
    batches = []
    for _ in range(steps):
        X = torch.randn(64, 16, generator=g)
        batches.append((X, (X @ w).argmax(1)))
    return batches


def train(net: nn.Module, batches) -> float:
    trainable = [p for p in net.parameters() if p.requires_grad]
    opt = torch.optim.Adam(trainable, lr=1e-2)
    for X, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(net(X), y)
        loss.backward()
        opt.step()
    with torch.no_grad():
        return float(sum(F.cross_entropy(net(X), y) for X, y in batches[-10:]) / 10)


def count(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters() if p.requires_grad)


def theirs(kind: str):
    import peft

    net = base_net()
    if kind == "IA3":
        config = peft.IA3Config(target_modules=TARGETS, feedforward_modules=[])
    else:
        config = peft.LoraConfig(
            target_modules=TARGETS, r=4, lora_alpha=8, lora_dropout=0.0, use_dora=kind == "DoRA"
        )
    return peft.get_peft_model(net, config)


def ours(kind: str, reference: nn.Module) -> nn.Module:
    net = base_net()
    net.requires_grad_(False)
    if kind == "IA3":
        apply_ia3_to(net, TARGETS)
        return net
    (apply_dora_to if kind == "DoRA" else apply_lora_to)(net, TARGETS, r=4, alpha=8)
    state = reference.state_dict()
    with torch.no_grad():  # peft's own draw of A, so both start from the same point
        for name in TARGETS:
            net.get_submodule(name).lora_A.copy_(
                state[f"base_model.model.{name}.lora_A.default.weight"]
            )
    return net


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    try:
        import peft
    except ImportError:
        print("peft is not installed: nothing to compare (pip install peft in another venv)")
        return 0
    torch.set_num_threads(1)
    batches = data(args.steps)
    print(f"peft {peft.__version__}, torch {torch.__version__}, {args.steps} steps of Adam")
    sides = "trainable (nnx_lab.peft) | trainable (peft) | loss (nnx_lab.peft) | loss (peft)"
    print(f"| method | {sides} |")
    print("|---|---|---|---|---|")
    for kind in ("LoRA", "DoRA", "IA3"):
        ref = theirs(kind)
        mine = ours(kind, ref)
        a, b = count(mine), count(ref)
        la, lb = train(mine, copy.deepcopy(batches)), train(ref, batches)
        print(f"| {kind} | {a:,} | {b:,} | {la:.6f} | {lb:.6f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
