"""The Trainer's objective under data parallelism (§3.2, beyond NNx): two gloo ranks
on the CPU equal one process over the union batch, accumulation and masked terms with
rank-dependent denominators included. The engine owns the update, so the union's exact
loss and the summed gradients reach every optimizer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parents[1]  # tests/python: the helper scripts
ROOT = HERE.parents[1]
WORKER = HERE / "trainer_ddp_worker.py"


def _ranks(tmp_path, nproc, *args):
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / "out"
    cmd = [str(WORKER), "--out", str(out), *map(str, args)]
    if nproc:
        cmd = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *cmd]
    else:
        cmd.append("--single")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, *cmd], capture_output=True, text=True, env=env, timeout=240
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    records = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("out.*"))]
    return sorted(records, key=lambda r: r["rank"])


@pytest.mark.parametrize("accumulation", [1, 2])
def test_a_trainer_objective_under_two_ranks_equals_one_process_of_the_union(
    tmp_path, accumulation
):
    common = ["--accumulation", accumulation]
    two = _ranks(tmp_path / "two", 2, "--root", tmp_path / "r2", "--batch", 16, *common)
    one = _ranks(tmp_path / "one", 0, "--root", tmp_path / "r1", "--batch", 32, *common)
    assert two[0]["digest"] == two[1]["digest"]  # every rank holds the same weights
    for name, weight in one[0]["weights"].items():
        a, b = torch.tensor(two[0]["weights"][name]), torch.tensor(weight)
        # the ranks' sums (numerators, denominators, gradients) are added in another
        # order than the one process's: equal up to float32 rounding
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    # 120 rows: windows of 32 rows (a short last one of 24), both optimizers per window
    windows = 4 if accumulation == 1 else 2
    assert two[0]["updates"] == one[0]["updates"] == {"actor": 2 * windows, "critic": 2 * windows}
    assert two[0]["steps"] == one[0]["steps"] == [2 * i for i in range(1, 2 * windows + 1)]
    for a, b in zip(two[0]["terms"], one[0]["terms"], strict=True):
        assert a == pytest.approx(b, rel=1e-5)  # the union's terms, not rank 0's
