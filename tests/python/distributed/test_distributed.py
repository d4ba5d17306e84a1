"""Data-parallel training on torch.distributed, in real processes (torchrun, gloo, CPU).

Each test starts ``ddp_worker.py`` under ``python -m torch.distributed.run`` with two
processes, and compares with the same script run as one process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from nnx_lab import NNRun

HERE = Path(__file__).resolve().parents[1]  # tests/python: the helper scripts
ROOT = HERE.parents[1]
WORKER = HERE / "ddp_worker.py"


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def run_ranks(tmp_path, nproc, *args, name="out", timeout=240, expect_rc=0):
    tmp_path.mkdir(parents=True, exist_ok=True)
    out = tmp_path / name
    cmd = [sys.executable, str(WORKER), "--out", str(out), *map(str, args)]
    if nproc:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={nproc}",
            *cmd[1:],
        ]
    else:
        cmd.append("--single")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=timeout)
    assert proc.returncode == expect_rc, proc.stderr[-4000:]
    records = [json.loads(p.read_text()) for p in sorted(tmp_path.glob(f"{name}.*"))]
    return sorted(records, key=lambda r: r["rank"])


def _same_weights(a, b, atol):
    for name in a["weights"]:
        ta, tb = torch.tensor(a["weights"][name]), torch.tensor(b["weights"][name])
        assert torch.allclose(ta, tb, atol=atol, rtol=0), (name, (ta - tb).abs().max())


@pytest.mark.parametrize("precision", [None, "bf16"])
def test_two_ranks_of_16_equal_one_process_of_32(tmp_path, precision):
    extra = [] if precision is None else ["--precision", precision]
    two = run_ranks(tmp_path / "two", 2, "--root", tmp_path / "r2", "--batch", 16, *extra)
    one = run_ranks(tmp_path / "one", 0, "--root", tmp_path / "r1", "--batch", 32, *extra)
    assert [r["world"] for r in two] == [2, 2]
    assert two[0]["digest"] == two[1]["digest"]  # the ranks hold the same weights
    assert two[0]["run_id"] == two[1]["run_id"] == one[0]["run_id"]  # no dropout: same id
    atol = 1e-6 if precision is None else 1e-2
    _same_weights(two[0], one[0], atol)
    assert two[0]["losses"] == pytest.approx(
        one[0]["losses"], rel=1e-5 if precision is None else 2e-2
    )
    assert two[0]["steps"] == one[0]["steps"] == 8  # 128 rows / 32, two epochs
    if precision is None:  # the same predictions: each step's metrics are the union's
        assert two[0]["step_metrics"] == one[0]["step_metrics"]
        assert {m[0] for m in one[0]["step_metrics"]} == {32}


def test_validation_counts_every_sample_of_an_odd_set_once(tmp_path):
    two = run_ranks(tmp_path / "two", 2, "--root", tmp_path / "r2", "--n-val", 33)
    one = run_ranks(tmp_path / "one", 0, "--root", tmp_path / "r1", "--batch", 32, "--n-val", 33)
    assert two[0]["val"]["samples"] == two[1]["val"]["samples"] == 33
    assert two[0]["val"]["loss"] == pytest.approx(one[0]["val"]["loss"], rel=1e-5)
    assert two[0]["val"]["accuracy"] == one[0]["val"]["accuracy"]


def test_declared_metrics_and_the_monitor_are_the_unions(tmp_path):
    """Two ranks sum their metric statistics (and gather AUROC's rows) before finalizing:
    every rank records the whole validation set's and the whole epoch's values, and
    takes the monitor decision one process takes."""
    args = ["--declared", "--n-val", 33, "--epochs", 3]
    two = run_ranks(tmp_path / "two", 2, "--root", tmp_path / "r2", *args)
    one = run_ranks(tmp_path / "one", 0, "--root", tmp_path / "r1", "--batch", 32, *args)
    assert two[0]["epochs"] == two[1]["epochs"]  # every rank holds the union's records
    for a, b in zip(two[0]["epochs"], one[0]["epochs"], strict=True):
        assert set(a["val"]["metrics"]) == {"nll", "accuracy", "f1_weighted", "auroc"}
        for part in ("val", "train"):
            assert a[part]["metrics"] == pytest.approx(b[part]["metrics"], rel=1e-5), part
        assert a["val"]["extra"] == b["val"]["extra"] == {"rows": 33.0}
        assert a["selection"]["status"] == b["selection"]["status"]
        assert a["selection"]["value"] == pytest.approx(b["selection"]["value"], rel=1e-5)
        assert a["improved"] == b["improved"]
    assert two[0]["epochs"][0]["train"]["samples"] == 128
    # per training step: extra_metrics saw the union's 32 rows, not a rank's 16
    assert two[0]["extra"] == two[1]["extra"] == [{"rows": 32.0}] * 12


def test_an_uneven_last_batch_and_accumulation_still_equal_the_union(tmp_path):
    # 120 rows, global batch 32: the last global batch has 24 rows (12 per rank)
    two = run_ranks(
        tmp_path / "two", 2, "--root", tmp_path / "r2", "--n-train", 120, "--accumulation", 2
    )
    one = run_ranks(
        tmp_path / "one",
        0,
        "--root",
        tmp_path / "r1",
        "--batch",
        32,
        "--n-train",
        120,
        "--accumulation",
        2,
    )
    _same_weights(two[0], one[0], 1e-6)


def test_rank_zero_writes_the_run_and_every_rank_returns_it(tmp_path):
    two = run_ranks(tmp_path, 2, "--root", tmp_path / "r")
    runs = [p for p in (tmp_path / "r").iterdir() if not p.name.startswith(".")]
    assert [p.name for p in runs] == [two[0]["run_id"]]
    loaded = NNRun.load(two[0]["run_id"], runs_root=tmp_path / "r")
    assert loaded.status.value == "finished"
    assert [p.train_edp.loss for p in loaded.idps] == pytest.approx(two[1]["losses"])
    assert two[0]["val"] == two[1]["val"]


def test_a_stop_on_one_rank_stops_every_rank_at_the_same_step(tmp_path):
    two = run_ranks(tmp_path, 2, "--root", tmp_path / "r", "--epochs", 20, "--stop-after", 5)
    assert [r["status"] for r in two] == ["stopped", "stopped"]
    assert two[0]["steps"] == two[1]["steps"] == 6  # asked at step 5, agreed at step 6
    assert two[0]["digest"] == two[1]["digest"]
    run_dir = tmp_path / "r" / two[0]["run_id"]
    assert (run_dir / "checkpoints" / "last.json").is_file()
    # and a stateful resume with the same world size continues it
    again = run_ranks(
        tmp_path,
        2,
        "--root",
        tmp_path / "r",
        "--epochs",
        1,
        "--resume",
        two[0]["run_id"],
        name="resumed",
    )
    assert [r["status"] for r in again] == ["finished", "finished"]
    assert again[0]["digest"] == again[1]["digest"]


def test_another_world_size_resumes_weights_only_and_refuses_a_stateful_resume(tmp_path):
    two = run_ranks(tmp_path, 2, "--root", tmp_path / "r", "--epochs", 1)
    source = two[0]["run_id"]
    refused = run_ranks(
        tmp_path, 0, "--root", tmp_path / "r", "--resume", source, name="stateful", expect_rc=3
    )
    assert "world-size mismatch" in refused[0]["error"]
    assert "resume_mode='weights_only'" in refused[0]["error"]
    runs = {p.name for p in (tmp_path / "r").iterdir() if not p.name.startswith(".")}
    assert runs == {source}  # refused before a run directory was made
    warm = run_ranks(
        tmp_path,
        0,
        "--root",
        tmp_path / "r",
        "--resume",
        source,
        "--resume-mode",
        "weights_only",
        "--batch",
        32,
        name="warm",
    )
    assert warm[0]["status"] == "finished"
    assert warm[0]["run_id"] != source


def test_with_a_sparser_stop_check_every_rank_stops_at_the_same_checked_step(tmp_path):
    two = run_ranks(
        tmp_path,
        2,
        "--root",
        tmp_path / "r",
        "--epochs",
        20,
        "--stop-after",
        5,
        "--stop-check-every",
        4,
    )
    assert [r["status"] for r in two] == ["stopped", "stopped"]
    assert two[0]["steps"] == two[1]["steps"] == 8  # asked at step 5, read at step 8
    assert two[0]["digest"] == two[1]["digest"]


def test_a_mid_epoch_stop_resumes_with_the_unions_epoch_sums(tmp_path):
    """Stopped inside epoch 2 and resumed on two ranks, the resumed epochs (declared
    metrics over the whole epoch, the monitor's decisions) equal the uninterrupted run's:
    the saved sums are the union's and one rank carries them on."""
    args = ["--declared", "--epochs", 3]
    full = run_ranks(tmp_path / "full", 2, "--root", tmp_path / "rf", *args)
    first = run_ranks(tmp_path / "a", 2, "--root", tmp_path / "r", *args, "--stop-after", 5)
    assert [r["status"] for r in first] == ["stopped", "stopped"]
    assert first[0]["steps"] == 6  # asked at step 5, agreed at step 6: epoch 2, batch 2 of 4
    resumed = run_ranks(
        tmp_path / "b",
        2,
        "--root",
        tmp_path / "r",
        "--declared",
        "--epochs",
        2,
        "--resume",
        first[0]["run_id"],
    )
    assert resumed[0]["epochs"] == resumed[1]["epochs"]
    for a, b in zip(resumed[0]["epochs"], full[0]["epochs"], strict=True):
        assert a["train"]["samples"] == b["train"]["samples"] == 128
        assert a["train"]["metrics"] == pytest.approx(b["train"]["metrics"], rel=1e-6)
        assert a["val"]["metrics"] == pytest.approx(b["val"]["metrics"], rel=1e-6)
        assert a["selection"]["status"] == b["selection"]["status"]


def test_a_rank_raising_in_a_script_ends_every_rank_with_its_reason(tmp_path):
    """Under torchrun with no launcher: rank 1's callback raises at epoch 1's end while
    rank 0 waits in the epoch's agreement. Rank 1 leaves (its shutdown waits for
    nobody), rank 0's collective breaks and it ends with rank 1's reason; the job ends
    long before the group's 30-minute timeout (the cap is generous: a loaded machine)."""
    start = time.monotonic()
    ranks = run_ranks(
        tmp_path,
        2,
        "--root",
        tmp_path / "r",
        "--epochs",
        3,
        "--fail-on-rank1",
        expect_rc=1,
        timeout=150,
    )
    assert time.monotonic() - start < 150
    assert ranks[1]["error"] == "ValueError: rank 1 fails at the end of epoch 1"
    assert ranks[0]["error"] == (
        "RankFailedError: rank 1 failed: ValueError: rank 1 fails at the end of epoch 1"
    )
    (run_dir,) = [p for p in (tmp_path / "r").iterdir() if not p.name.startswith(".")]
    meta = yaml.safe_load((run_dir / "metadata.yaml").read_text())
    assert meta["status"] == "failed"
    assert meta["error"] == ranks[0]["error"]
    assert meta["epochs_completed"] == 1


@pytest.mark.parametrize("accumulation", [1, 2])
def test_an_objective_under_two_ranks_equals_one_process_of_the_union(tmp_path, accumulation):
    """The engine owns the update: the masked terms' union denominators and the summed
    gradients give the union batch's update, uneven last batch and accumulation included."""
    common = ["--n-train", 120, "--accumulation", accumulation, "--objective"]
    two = run_ranks(tmp_path / "two", 2, "--root", tmp_path / "r2", *common)
    one = run_ranks(tmp_path / "one", 0, "--root", tmp_path / "r1", "--batch", 32, *common)
    assert two[0]["digest"] == two[1]["digest"]
    _same_weights(two[0], one[0], 1e-6)
    assert two[0]["terms"] == two[1]["terms"]  # every rank records the union's terms
    for a, b in zip(two[0]["terms"], one[0]["terms"], strict=True):
        assert a == pytest.approx(b, rel=1e-5)
    assert two[0]["losses"] == pytest.approx(one[0]["losses"], rel=1e-5)


def test_two_ranks_fine_tune_as_one_process_with_a_frozen_layer_and_rules(tmp_path):
    """Fine-tuning (§3.1) under DDP: the frozen layer stays as built on every rank, the
    rules' groups train as in one process, and the frozen set and rules give one id."""
    two = run_ranks(tmp_path / "two", 2, "--root", tmp_path / "r2", "--batch", 16, "--finetune")
    one = run_ranks(tmp_path / "one", 0, "--root", tmp_path / "r1", "--batch", 32, "--finetune")
    plain = run_ranks(tmp_path / "plain", 0, "--root", tmp_path / "r0", "--batch", 32)
    assert two[0]["digest"] == two[1]["digest"]
    assert two[0]["run_id"] == two[1]["run_id"] == one[0]["run_id"] != plain[0]["run_id"]
    _same_weights(two[0], one[0], 1e-6)
    for name in ("layers.0.weight", "layers.0.bias"):  # frozen: as built, not as trained
        assert one[0]["weights"][name] != plain[0]["weights"][name]
        assert two[0]["weights"][name] == one[0]["weights"][name]


def test_gradient_health_is_rank_zeros_view_of_the_synchronized_gradients(tmp_path):
    two = run_ranks(tmp_path / "two", 2, "--root", tmp_path / "r2", "--batch", 16, "--health")
    one = run_ranks(tmp_path / "one", 0, "--root", tmp_path / "r1", "--batch", 32, "--health")
    assert two[1]["health"] == []  # only rank 0 measures
    assert len(two[0]["health"]) == len(one[0]["health"]) == 8  # every update
    for a, b in zip(two[0]["health"], one[0]["health"], strict=True):
        assert a == pytest.approx(b, rel=1e-4)  # the union's gradients, not one rank's
