"""The fp32 non-finite loss guard (``stop_on_nonfinite``, issues 29 and 23): checked
after the backward pass and before the update, it changes no number a run computes, and
a NaN micro-batch of an accumulation window stops the run before the window's update."""

from __future__ import annotations

import json

import engine_factories as f
import pytest
import torch


def _log(run) -> list[dict]:
    lines = (run.run_dir / "metrics.jsonl").read_text().splitlines()
    return [d for d in map(json.loads, lines) if d.get("event") in ("step", "epoch")]


@pytest.mark.parametrize("accumulation", [1, 3])
def test_the_guard_changes_no_number(runs_root, accumulation):
    runs = []
    for guard in (True, False):
        model = f.model()
        params = f.train_params(
            runs_root / str(guard),
            n_epochs=2,
            accumulation_steps=accumulation,  # 8 batches: windows of 3, 3 and 2
            stop_on_nonfinite=guard,
        )
        runs.append((model, model.train(params)))
    (guarded, run_g), (plain, run_p) = runs
    assert run_g.id == run_p.id
    for (name, a), b in zip(
        guarded.net.state_dict().items(), plain.net.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name
    drop = ("seconds", "time", "wall", "elapsed")
    clean = [
        [{k: v for k, v in d.items() if not any(w in k for w in drop)} for d in _log(r)]
        for r in (run_g, run_p)
    ]
    assert clean[0] == clean[1]
    assert len(clean[0]) > 2


def test_a_nan_micro_batch_stops_the_window_before_its_update(runs_root):
    X = torch.randn(96, 8)
    y = torch.randint(0, 3, (96,))
    X[70] = float("nan")  # the third micro-batch of 32 rows: the first window's last
    batches = [(X[i : i + 32], y[i : i + 32]) for i in range(0, 96, 32)]
    model = f.model()
    start = {k: v.clone() for k, v in model.net.state_dict().items()}
    params = f.train_params(
        runs_root, n_epochs=1, train_loader=batches, val_loader=None, accumulation_steps=3
    )
    with pytest.raises(FloatingPointError, match="non-finite training loss at step 1"):
        model.train(params)
    after = model.net.state_dict()
    assert all(torch.equal(start[k], after[k]) for k in after)  # the window never applied
