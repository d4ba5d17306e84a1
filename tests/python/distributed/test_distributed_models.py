"""Data-parallel training of the other networks, in real processes (torchrun, gloo, CPU):
``(N, C, H, W)`` images through the sharded loaders, validation, ``predict`` and
``evaluate`` after the fit, and the MoE's load-balancing term as the union's."""

from __future__ import annotations

import pytest
import torch
from test_distributed import _same_weights, run_ranks


def test_images_through_two_ranks_equal_one_process_row_for_row(tmp_path):
    # 120 rows, global batch 32: three full global batches and one of 24 (12 per rank)
    args = ["--net", "conv", "--n-train", 120, "--n-val", 33]
    two = run_ranks(tmp_path / "two", 2, "--root", tmp_path / "r2", "--batch", 16, *args)
    one = run_ranks(tmp_path / "one", 0, "--root", tmp_path / "r1", "--batch", 32, *args)
    # The images reach the network as images, each rank its slice of the global batch.
    assert [tuple(s) for s in two[0]["shapes"]] == [(12, 1, 8, 8), (16, 1, 8, 8)]
    assert [tuple(s) for s in one[0]["shapes"]] == [(24, 1, 8, 8), (32, 1, 8, 8)]
    # Each epoch, every row is trained on once across the ranks, and in one process's order.
    for epoch in (1, 2):
        rows = two[0]["seen"][epoch] + two[1]["seen"][epoch]
        assert sorted(rows) == list(range(120)), epoch
        assert sorted(rows) == sorted(one[0]["seen"][epoch])
    assert two[0]["digest"] == two[1]["digest"]
    assert two[0]["run_id"] == two[1]["run_id"] == one[0]["run_id"]
    _same_weights(two[0], one[0], 1e-5)
    assert two[0]["losses"] == pytest.approx(one[0]["losses"], rel=1e-5)
    # Validation under DDP counts each of the 33 images once, as one process does.
    for rank in two:
        assert rank["val"]["samples"] == 33
        assert rank["val"]["loss"] == pytest.approx(one[0]["val"]["loss"], rel=1e-5)
    # After the fit, each rank predicts and evaluates alone, as the one process does.
    assert two[0]["predict"] == two[1]["predict"]
    got, want = torch.tensor(two[0]["predict"]), torch.tensor(one[0]["predict"])
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert two[0]["evaluate"] == two[1]["evaluate"]
    assert two[0]["evaluate"]["samples"] == one[0]["evaluate"]["samples"] == 33
    assert two[0]["evaluate"]["loss"] == pytest.approx(one[0]["evaluate"]["loss"], rel=1e-5)


def test_the_moe_term_under_ddp_is_the_unions_and_every_rank_agrees(tmp_path):
    two = run_ranks(tmp_path / "two", 2, "--root", tmp_path / "r2", "--net", "moe")
    assert two[0]["digest"] == two[1]["digest"]
    terms = [step["load_balance"] for step in two[0]["aux"]]
    assert len(terms) == 8  # 128 rows / 32 per global batch, two epochs
    assert all(t >= 1.0 - 1e-6 for t in terms)  # one layer: 1.0 is perfectly balanced
    # Each step's record holds the mean of the ranks' terms (16 rows each), not rank 0's.
    local = [two[0]["local_aux"], two[1]["local_aux"]]
    assert local[0] != local[1]
    assert terms == pytest.approx([(a + b) / 2 for a, b in zip(*local, strict=True)], rel=1e-6)
    mean = sum(terms[:4]) / 4  # every step of epoch 1 holds 32 rows
    assert two[0]["epochs"][0]["train"]["aux"]["load_balance"] == pytest.approx(mean)
    assert two[0]["epochs"] == two[1]["epochs"]  # each rank records the union's epoch
