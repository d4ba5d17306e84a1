"""The §1 quickstart, as written in the spec with ``nnx`` replaced by ``nnx_lab``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

QUICKSTART = """
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    NNModel, NNParams, NNModelParams, NNTrainParams,
    NNOptimParams, NNSchedulerParams,
    Activations, Devices, Losses, Nets, Optims,
    EarlyStopping,
)

# 1. Data
X_train, y_train = torch.randn(256, 8), torch.randint(0, 3, (256,))
X_val,   y_val   = torch.randn(64,  8), torch.randint(0, 3, (64,))
train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=32, shuffle=True)
val_loader   = DataLoader(TensorDataset(X_val,   y_val),   batch_size=32)

# 2. Model
net_params   = NNParams(input_dim=8, output_dim=3, hidden_dims=[32, 16],
                        dropout_prob=0.1, activation=Activations.RELU)
model_params = NNModelParams(net=Nets.FEED_FWD, device=Devices.CPU,
                             loss=Losses.CROSS_ENTROPY)
model = NNModel(net_params=net_params, params=model_params)

# 3. Train
train_params = NNTrainParams(
    n_epochs=10,
    seed=42,                       # reproducibility
    train_loader=train_loader,
    val_loader=val_loader,
    optim=NNOptimParams(name=Optims.ADAM, max_lr=1e-2,
                        momentum=(0.9, 0.999), weight_decay=5e-5,
                        grad_clip_norm=1.0),
    scheduler=NNSchedulerParams(min_lr=1e-7, factor=0.5,
                                patience=3, cooldown=1, threshold=1e-3),
)
run = model.train(params=train_params, callbacks=[EarlyStopping(patience=5)])

# 4. Use it
print(f"trained {len(run.idps)} iterations; saved under runs/{run.id}/")
result = model.predict(X=X_val)
print(f"predicted {len(result.classes)} samples")
"""


def test_quickstart_snippet_runs_and_writes_the_run_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NNX_RUNS_ROOT")
    ns: dict = {}
    exec(compile(QUICKSTART, "quickstart", "exec"), ns)  # the spec's snippet, verbatim
    run, result = ns["run"], ns["result"]
    assert 8 <= len(run.idps) <= 80  # 8 steps an epoch, EarlyStopping may end it early
    assert len(result.classes) == 64
    assert result.logits.dtype.is_floating_point
    assert result.logits.shape == (64, 3)
    run_dir = tmp_path / "runs" / run.id
    for name in (
        "run.yaml",
        "metadata.yaml",
        "metrics.jsonl",
        "checkpoints/last.json",
        "checkpoints/best.json",
    ):
        assert (run_dir / name).is_file(), name
    meta = yaml.safe_load((run_dir / "metadata.yaml").read_text())
    assert meta["status"] == "finished"
    assert meta["seed"] == 42
    assert meta["torch"]
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert lines[0]["event"] == "run_started"
    assert lines[-1]["event"] == "run_finished"
    assert sum(1 for x in lines if x["event"] == "step") == len(run.idps)
    # every idp carries NNx's training record; epoch ends carry validation
    last = run.idps[-1]
    assert last.val_edp is not None
    assert 0.0 <= last.val_edp.accuracy <= 1.0
    for name in ("loss", "error", "accuracy", "precision", "recall", "f1"):
        assert getattr(last.train_edp, name) is not None

    # Content-addressed: the same configuration again is refused, nothing is touched.
    before = sorted(p.name for p in (tmp_path / "runs").iterdir())
    model, params = ns["model"], ns["train_params"]
    with pytest.raises(FileExistsError, match="overwrite_existing=True"):
        model.__class__(net_params=ns["net_params"], params=ns["model_params"]).train(params=params)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == before
    del model


def test_overwrite_existing_replaces_the_run(runs_root):
    import engine_factories as f

    first = f.model().train(f.train_params(runs_root, n_epochs=1))
    again = f.model().train(f.train_params(runs_root, n_epochs=1, overwrite_existing=True))
    assert again.id == first.id
    assert [p.name for p in f.runs_in(runs_root)] == [first.id]
    log = (runs_root / first.id / "metrics.jsonl").read_text().splitlines()
    assert sum(json.loads(x)["event"] == "run_started" for x in log) == 1  # a fresh log


def _cli(tmp_path):
    env = {
        **os.environ,
        "NNX_TQDM_DISABLE": "1",
        "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
    }
    return subprocess.run(
        [sys.executable, "-m", "nnx_lab", "quickstart", "--runs-root", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )


def test_cli_quickstart_learns_the_wine_data_and_summarizes(tmp_path):
    out = _cli(tmp_path)
    assert out.returncode == 0, out.stderr
    assert "scikit-learn's wine data" in out.stdout
    assert "trained" in out.stdout
    val = float(re.search(r"final validation loss [\d.]+, accuracy ([\d.]+)", out.stdout)[1])
    test = float(re.search(r"predicted 26 test samples: accuracy ([\d.]+)", out.stdout)[1])
    assert val >= 0.85  # three classes: chance is a third
    assert test >= 0.85
    again = _cli(tmp_path)  # the same configuration and data: refused, with the fix
    assert again.returncode == 1
    assert "--overwrite" in again.stderr
