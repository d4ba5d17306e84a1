"""DatasetSummary: a dataset's splits, class balance / target range / positive rates,
features, split identity and checks, computed in the kernel and held in synced traits.

The splits are pinned with a ``SplitManifest`` so every expected number below is a hand
count over the frame written out here."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

import nnx_lab
from nnx_lab import ConfigError, NNTabularDataset, TaskSpec
from nnx_lab.data_splits import SplitManifest
from nnx_lab.widgets import DatasetSummary
from nnx_lab.widgets._testing import FakeFrontend

# ids 0..9; train 0-5, val 6-7, test 8-9
SPLIT = SplitManifest(train=(0, 1, 2, 3, 4, 5), val=(6, 7), test=(8, 9))


@pytest.fixture
def frame():
    return pd.DataFrame(
        {
            "id": list(range(10)),
            "a": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0],
            "b": [0, 0, 0, 1, 1, 1, 0, 1, 0, 1],
            # train: x x y y y z  -> x 2, y 3, z 1;  val: x z -> y missing;  test: y y
            "label": ["x", "x", "y", "y", "y", "z", "x", "z", "y", "y"],
            # train 1 2 3 4 5 9 (mean 4, median 3.5), val 10 20, test -1 3
            "price": [1.0, 2.0, 3.0, 4.0, 5.0, 9.0, 10.0, 20.0, -1.0, 3.0],
            # train 1 0 1 1 0 0 (3/6), val 1 1, test 0 0
            "flag": [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0],
        }
    )


def dataset(frame, target, **kw):
    return NNTabularDataset(frame, ["a", "b"], target, split=SPLIT, id_col="id", **kw)


def splits(widget):
    return {s["name"]: s for s in widget.data["splits"]}


def test_classification_counts_shares_and_missing_classes(frame):
    w = DatasetSummary(dataset(frame, "label"))
    try:
        d, s = w.data, splits(w)
        assert d["kind"] == "classification"
        assert d["classes"] == ["x", "y", "z"]
        assert d["total"] == 10
        assert [(s[k]["rows"], s[k]["share"]) for k in ("train", "val", "test")] == [
            (6, 0.6),
            (2, 0.2),
            (2, 0.2),
        ]
        assert s["train"]["counts"] == [2, 3, 1]
        assert s["train"]["shares"] == pytest.approx([2 / 6, 3 / 6, 1 / 6])
        assert s["train"]["smallest"] == {"class": "z", "share": pytest.approx(1 / 6)}
        assert s["train"]["missing"] == []
        assert s["val"]["counts"] == [1, 0, 1]
        assert s["val"]["missing"] == ["y"]
        assert s["val"]["smallest"] == {"class": "y", "share": 0.0}
        assert s["test"]["counts"] == [0, 2, 0]
        assert s["test"]["missing"] == ["x", "z"]
        assert d["checks"] == w.dataset.checks
        assert len(d["checks"]) == 5
        assert d["split"] == SPLIT.digest()
        assert d["feature_cols"] == ["a", "b"]
        assert d["standardizer"] is None
        text = repr(w)
        assert text.startswith("DatasetSummary(NNTabularDataset: classification, 2 features;")
        assert "train=6 (60%), val=2 (20%), test=2 (20%)" in text
        assert "smallest share 0.00 (y in val)" in text
        assert "val lacks class y" in text
        assert "test lacks class x, z" in text
        assert "5 checks" in text
    finally:
        w.close()


def test_regression_min_mean_max_per_split_and_standardizer(frame):
    w = DatasetSummary(dataset(frame, "price", target_dtype=torch.float32, standardize=True))
    try:
        s = splits(w)
        assert w.data["kind"] == "regression"
        assert (s["train"]["min"], s["train"]["mean"], s["train"]["max"]) == (1.0, 4.0, 9.0)
        assert (s["val"]["min"], s["val"]["mean"], s["val"]["max"]) == (10.0, 15.0, 20.0)
        assert (s["test"]["min"], s["test"]["mean"], s["test"]["max"]) == (-1.0, 1.0, 3.0)
        assert "counts" not in s["train"]
        std = w.data["standardizer"]
        # training rows only: a = 1..6, b = 0 0 0 1 1 1 (population std)
        assert std["fitted_rows"] == 6
        assert std["mean"] == pytest.approx([3.5, 0.5])
        assert std["std"] == pytest.approx([np.std([1, 2, 3, 4, 5, 6]), 0.5])
        assert "train target 1 .. 9 (mean 4)" in repr(w)
    finally:
        w.close()


def test_multilabel_positive_rate_per_label(frame):
    w = DatasetSummary(
        dataset(frame, "flag", target_dtype=torch.float32), task=TaskSpec.multilabel(1)
    )
    try:
        s = splits(w)
        assert w.data["kind"] == "multilabel"
        assert w.data["labels"] == ["flag"]
        assert s["train"]["positives"] == [3]
        assert s["train"]["positive_rate"] == [0.5]
        assert s["val"]["positive_rate"] == [1.0]
        assert s["test"]["positive_rate"] == [0.0]
        assert "train positive rate 0.50" in repr(w)
    finally:
        w.close()


def test_an_empty_split_has_no_balance_or_range(frame):
    d = NNTabularDataset(
        frame, ["a"], "price", target_dtype=torch.float32, val_proportion=0.0, test_proportion=0.2
    )
    w = DatasetSummary(d)
    try:
        s = splits(w)
        assert s["val"]["rows"] == 0
        assert s["val"]["share"] == 0.0
        assert s["val"]["batch_size"] is None
        assert (s["val"]["min"], s["val"]["mean"], s["val"]["max"]) == (None, None, None)
        assert w.data["split"] is None
        assert w.data["seed"] == 0
        json.dumps(w.data, allow_nan=False)  # no NaN reaches the front end
    finally:
        w.close()


@pytest.mark.parametrize(
    "bad",
    [None, "wine", {"train": []}, pd.DataFrame({"a": [1.0]})],
    ids=["none", "str", "dict", "frame"],
)
def test_anything_but_a_dataset_is_refused_before_a_widget_exists(bad, monkeypatch):
    opened = []
    import ipywidgets

    monkeypatch.setattr(ipywidgets.Widget, "open", lambda self: opened.append(self))
    with pytest.raises(ConfigError) as info:
        DatasetSummary(bad)
    assert info.value.field == "DatasetSummary.dataset"
    assert "pass an NNTabularDataset" in str(info.value)
    assert opened == []  # no comm was opened


def test_a_task_that_does_not_fit_is_refused(frame):
    classes = dataset(frame, "label")
    values = dataset(frame, "price", target_dtype=torch.float32)
    cases = [
        (classes, TaskSpec.regression(1), "class labels"),
        (values, TaskSpec.categorical(3), "floating target"),
        (values, TaskSpec.multilabel(1), "0 or 1"),
        (dataset(frame, "flag", target_dtype=torch.float32), TaskSpec.multilabel(2), "1 label"),
        (classes, "multilabel", "pass a TaskSpec"),
    ]
    for ds, task, words in cases:
        with pytest.raises(ConfigError, match=words) as info:
            DatasetSummary(ds, task=task)
        assert info.value.field == "DatasetSummary.task"


def test_reassigning_the_dataset_recomputes_and_a_refusal_keeps_the_last(frame):
    w = DatasetSummary(dataset(frame, "label"))
    try:
        fe = FakeFrontend(w)
        assert w.version == 1
        w.dataset = dataset(frame, "price", target_dtype=torch.float32)
        assert w.data["kind"] == "regression"
        assert w.version == 2
        assert any(u.get("data", {}).get("kind") == "regression" for u in fe.updates)
        with pytest.raises(ConfigError):
            w.dataset = "not a dataset"
        assert w.data["kind"] == "regression"
        assert w.version == 2
        assert isinstance(w.dataset, NNTabularDataset)
    finally:
        w.close()


def test_a_reloaded_page_gets_the_whole_summary_from_the_state(frame):
    w = DatasetSummary(dataset(frame, "label"))
    try:
        state = w.get_state()  # what a new view is given on a page reload
        assert state["data"] == w.data
        assert state["version"] == 1
        assert json.loads(json.dumps(state["data"], allow_nan=False)) == w.data
    finally:
        w.close()


def test_exported_from_nnx_lab_and_loaded_lazily():
    assert nnx_lab.DatasetSummary is DatasetSummary
    assert DatasetSummary._bundle_name == "dataset_summary"
