"""``plan_split`` with NNx's arguments (issue 29): ``ids=None`` on row positions with a
``source``, ``proportions=None`` / ``gap=None``, ``seed=None`` drawn and recorded,
``insufficient=``, and chronological cutoffs that may be None."""

from __future__ import annotations

import pytest

from nnx_lab.data_splits import SplitError, SplitManifest, plan_split

GROUPS = [i // 3 for i in range(30)]


def test_plan_split_reads_nnx_defaults_and_records_a_drawn_seed(tmp_path):
    ids = [f"s{i}" for i in range(30)]
    ours = plan_split(ids, "group", groups=GROUPS)
    nnx = plan_split(ids, strategy="group", groups=GROUPS, proportions=None, gap=None)
    assert nnx.digest() == ours.digest()
    assert nnx.state() == ours.state()  # NNx's defaults add nothing to the record
    drawn = plan_split(ids, strategy="group", groups=GROUPS, seed=None)
    assert isinstance(drawn.seed, int)
    assert drawn.parameters["seed"] == drawn.seed
    again = plan_split(ids, strategy="group", groups=GROUPS, seed=drawn.seed)
    assert again.digest() == drawn.digest()  # the recorded seed replays the split
    assert SplitManifest.load(drawn.save(tmp_path / "m.json")).seed == drawn.seed
    with pytest.raises(SplitError, match="seed=-1"):
        plan_split(ids, strategy="group", groups=GROUPS, seed=-1)


def test_insufficient_train_puts_a_small_class_in_train():
    ids = list(range(20))
    labels = [0] * 18 + [1] * 2  # class 1 cannot be in all three splits
    with pytest.raises(SplitError, match="insufficient='train'"):
        plan_split(ids, strategy="stratified", labels=labels)
    m = plan_split(ids, strategy="stratified", labels=labels, insufficient="train")
    assert {18, 19} <= set(m.train)
    assert not {18, 19} & (set(m.val) | set(m.test))
    assert m.parameters["insufficient"] == "train"
    assert sorted(m.train + m.val + m.test) == ids
    with pytest.raises(SplitError, match="insufficient='drop'"):
        plan_split(ids, strategy="stratified", labels=labels, insufficient="drop")


def test_a_positional_plan_needs_a_source_and_records_it():
    with pytest.raises(SplitError, match="source="):
        plan_split(strategy="group", groups=GROUPS)
    m = plan_split(strategy="group", groups=GROUPS, source="my-data-v1")
    assert (m.ids, m.source) == ("position", "my-data-v1")
    assert sorted(m.train + m.val + m.test) == list(range(30))
    by_ids = plan_split(list(range(30)), "group", groups=GROUPS)
    assert m.digest() == by_ids.digest()  # the same membership, named by position
    assert SplitManifest.from_state(m.state()) == m
    with pytest.raises(SplitError, match="pass ids="):
        plan_split(strategy="random", source="my-data-v1")


def test_chronological_cutoffs_may_be_none():
    ids, times = list(range(10)), list(range(10))
    no_val = plan_split(ids, strategy="chronological", times=times, cutoffs=(None, 7))
    assert (no_val.train, no_val.val, no_val.test) == (tuple(range(7)), (), (7, 8, 9))
    no_test = plan_split(ids, strategy="chronological", times=times, cutoffs=(5, None), gap=1)
    # nnx-lab's embargo follows the cutoff (NNx's precedes it: docs/nnx_differences.md)
    assert (no_test.train, no_test.excluded, no_test.val, no_test.test) == (
        (0, 1, 2, 3, 4), (5,), (6, 7, 8, 9), (),
    )  # fmt: skip
    with pytest.raises(SplitError, match="either may be None"):
        plan_split(ids, strategy="chronological", times=times, cutoffs=(None, None))
    with pytest.raises(SplitError, match="val_start must be <= test_start"):
        plan_split(ids, strategy="chronological", times=times, cutoffs=(7, 5))
