"""Builders shared by the component, paradigm and race-of-jobs tests: a small tabular
task (6 features, 3 classes, a seeded shuffle), its MLP, and the step lines of a run's
log."""

from __future__ import annotations

import json
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import NNModel, NNOptimParams, NNParams, NNTrainParams


def tabular_params(
    root, n_epochs: int, *, n: int = 64, loader_seed: int | None = 1, **kw: Any
) -> NNTrainParams:
    """``n`` rows in batches of 16, shuffled by the loader's own generator
    (``loader_seed``; None: by the streams the run seeds); seed 3, ``max_lr=1e-2``;
    ``kw`` are more ``NNTrainParams`` fields."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(n, 6, generator=g)
    y = (X @ torch.randn(6, 3, generator=g)).argmax(1)
    gen = None if loader_seed is None else torch.Generator().manual_seed(loader_seed)
    loader = DataLoader(TensorDataset(X, y), batch_size=16, shuffle=True, generator=gen)
    return NNTrainParams(
        n_epochs=n_epochs,
        seed=3,
        train_loader=loader,
        optim=NNOptimParams(max_lr=1e-2),
        runs_root=str(root),
        **kw,
    )


def mlp_model() -> NNModel:
    return NNModel(net_params=NNParams(input_dim=6, output_dim=3, hidden_dims=[8]))


def step_lines(run) -> list[tuple[int, float, Any]]:
    """``(step, loss, terms or None)`` of each step line of the run's ``metrics.jsonl``."""
    lines = [json.loads(x) for x in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
    return [(x["step"], x["loss"], x.get("terms")) for x in lines if x["event"] == "step"]
