"""Issue 29: ``NNTabularDataset`` admits and refuses what NNx 0.4.1 does (the kept
differences are in docs/nnx_differences.md)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from nnx_lab import DataError, NNTabularDataset


def _frame(n: int = 40, **cols) -> pd.DataFrame:
    g = np.random.default_rng(0)
    base = {"a": g.normal(size=n), "b": g.normal(size=n), "y": np.arange(n) % 2}
    return pd.DataFrame({**base, **cols})


@pytest.mark.parametrize("labels", [[0, 5], [1, 2]])
def test_non_contiguous_integer_labels_are_refused_before_the_split(labels):
    df = _frame(y=np.array(labels * 20))
    state = torch.random.get_rng_state()
    with pytest.raises(ValueError, match=r"contiguous integers 0\.\.K-1.*n_unique=2") as caught:
        NNTabularDataset(df, ["a", "b"], "y")
    assert "pd.factorize" in str(caught.value)
    assert isinstance(caught.value, DataError)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert df["y"].tolist() == labels * 20  # the frame is untouched


def test_string_labels_are_still_encoded_in_sorted_order():
    df = _frame(y=np.array(["dog", "cat"] * 20))
    ds = NNTabularDataset(df, ["a", "b"], "y")
    assert ds.classes == ["cat", "dog"]
    assert ds.output_dim == 2


@pytest.mark.parametrize(
    ("dtype", "values", "expected"),
    [
        (torch.int8, [127.6, -128.7], {127, -128}),
        (torch.uint8, [255.5, -0.5], {255, 0}),
        (torch.uint8, [-0.9, 3.0], {0, 3}),
    ],
)
def test_integer_features_that_truncate_into_range_are_admitted(dtype, values, expected):
    df = _frame(n=2, a=np.array(values), y=np.array([0, 1]))
    ds = NNTabularDataset(df, ["a"], "y", feature_dtype=dtype, val_proportion=0, test_proportion=0)
    X, _ = ds.train_loader.dataset.tensors
    assert set(X[:, 0].tolist()) == expected


@pytest.mark.parametrize(("dtype", "value"), [(torch.int8, 128.0), (torch.uint8, -1.0)])
def test_integer_features_that_would_wrap_are_refused(dtype, value):
    df = _frame(n=2, a=np.array([value, 0.0]), y=np.array([0, 1]))
    with pytest.raises(DataError, match="after truncation toward zero"):
        NNTabularDataset(df, ["a"], "y", feature_dtype=dtype, val_proportion=0, test_proportion=0)


def test_repeated_column_names_are_refused_clearly_naming_each_once():
    df = pd.concat([_frame(), _frame()[["a"]]], axis=1)  # two columns called "a"
    with pytest.raises(DataError, match=r"more than one column named \['a'\]"):
        NNTabularDataset(df, ["a", "b"], "y")
    again = pd.concat([_frame(), _frame()[["y"]]], axis=1)
    with pytest.raises(DataError, match=r"named \['y'\].*nnx_differences"):
        NNTabularDataset(again, ["a", "b"], "y")


def test_numeric_string_targets_are_read_as_numbers():
    labels = _frame(n=4, y=np.array(["0", "1", "1", "0"]))
    ds = NNTabularDataset(labels, ["a"], "y", val_proportion=0, test_proportion=0)
    _, y = ds.train_loader.dataset.tensors
    assert y.dtype == torch.long
    assert ds.classes == [0, 1]
    values = _frame(n=4, y=np.array(["-0.382", "1.5", "2", " 3 "]))
    reg = NNTabularDataset(
        values, ["a"], "y", target_dtype=torch.float32, val_proportion=0, test_proportion=0
    )
    _, t = reg.train_loader.dataset.tensors
    assert sorted(t.tolist()) == pytest.approx([-0.382, 1.5, 2.0, 3.0])
    words = _frame(n=4, y=np.array(["a", "1", "1", "0"]))
    with pytest.raises(DataError, match="not numeric"):
        NNTabularDataset(
            words, ["a"], "y", target_dtype=torch.float32, val_proportion=0, test_proportion=0
        )


def test_standardizer_fits_on_the_rows_named_by_position():
    from nnx_lab.preprocessing import PreprocessingError, Standardizer

    df = pd.DataFrame({"a": [1.0, 2.0, 3.0, 100.0], "b": [5.0, 5.0, 5.0, -7.0], "c": [0, 1, 2, 3]})
    s = Standardizer.fit(df, rows=[2, 0, 1], columns=["a", "b"])
    assert s.mean.tolist() == pytest.approx([2.0, 5.0])  # row 3 was never read
    assert s.scale.tolist() == pytest.approx([np.std([1.0, 2.0, 3.0]), 1.0])  # constant: 1
    assert Standardizer.fit(df, rows=[0, 1]).columns == ("a", "b", "c")  # every column
    as_array = Standardizer.fit(df[["a", "b"]].to_numpy(), rows=[0, 1, 2])
    as_tensor = Standardizer.fit(torch.tensor(df[["a", "b"]].to_numpy()), rows=[0, 1, 2])
    assert as_array.mean.tolist() == as_tensor.mean.tolist() == s.mean.tolist()
    for bad, match in (([], "empty"), ([0, 0], "repeats"), ([0, 9], "outside"), ([0.5], "integer")):
        with pytest.raises(PreprocessingError, match=match):
            Standardizer.fit(df, rows=bad)


def test_metric_spec_and_streaming_metrics_take_nnx_arguments():
    from nnx_lab import ConfigError, MetricSpec, StreamingMetrics

    nnx = MetricSpec("ece", 1, {"bins": 10}, name="ECE, 10 bins")
    assert nnx == MetricSpec("ece", bins=10)
    assert (nnx.id, nnx.version, nnx.config["bins"], nnx.label) == ("ece", 1, 10, "ECE, 10 bins")
    assert MetricSpec.from_state(nnx.state()) == nnx
    with pytest.raises(ConfigError, match="version"):
        MetricSpec("ece", version=2)
    with pytest.raises(ConfigError, match="pass it once"):
        MetricSpec("ece", config={"bins": 10}, bins=12)
    acc = StreamingMetrics([MetricSpec("mse")], semantics="continuous")
    acc.update(torch.tensor([1.0, 2.0]), values=torch.tensor([1.0, 4.0]))
    assert acc.finalize()["mse"] == pytest.approx(2.0)
    ours = StreamingMetrics([MetricSpec("accuracy")], "categorical")
    assert ours.merge(StreamingMetrics([MetricSpec("accuracy")], semantics="categorical"))
    with pytest.raises(ConfigError, match="semantics"):
        StreamingMetrics([MetricSpec("mse")], "regression", semantics="categorical")


def test_split_manifest_takes_nnx_field_names():
    from nnx_lab.data_splits import SplitError, SplitManifest

    ours = SplitManifest(train=[1, 2], val=[3], test=[4])
    nnx = SplitManifest(strategy="explicit", train=[1, 2], validation=[3], test=[4], ids="sample")
    positional = SplitManifest("explicit", [1, 2], [3], [4])
    assert nnx == ours == positional
    assert nnx.digest() == ours.digest()
    assert (nnx.validation, nnx.ids, nnx.parameters) == ((3,), "sample", {})
    assert SplitManifest(train=[0], val=[1], test=[], ids="position").ids == "position"
    with pytest.raises(SplitError, match="not both"):
        SplitManifest(train=[1], val=[2], validation=[2], test=[])
    with pytest.raises(SplitError, match="'sample' or 'position'"):
        SplitManifest(train=[1], val=[], test=[], ids="rows")
    with pytest.raises(SplitError, match="both train and val"):
        SplitManifest(train=[1], validation=[1], test=[])


def test_standardizer_columns_keep_the_original_labels_through_its_state(tmp_path):
    from nnx_lab.preprocessing import Standardizer, StandardizerError

    df = pd.DataFrame({0: [1.0, 2.0, 3.0], "b": [4.0, 5.0, 7.0], np.int64(7): [0.0, 1.0, 0.0]})
    s = Standardizer.fit(df, rows=[0, 1, 2])
    assert s.columns == (0, "b", 7)
    assert [type(c) for c in s.columns] == [int, str, int]
    state = json.loads(json.dumps(s.state()))  # plain JSON: labels as they are
    assert state["columns"] == [0, "b", 7]
    again = Standardizer.from_state(state)
    assert again == s
    assert again.columns == (0, "b", 7)
    assert Standardizer.load(s.save(tmp_path / "s.json")).columns == (0, "b", 7)
    assert np.allclose(again.transform(df), s.transform(df))
    # a frame whose labels only print the same is not the fitted schema
    with pytest.raises(StandardizerError, match="missing"):
        s.transform(df.rename(columns={0: "0"}))
    # a state saved before labels were kept (all strings) still reads its frames
    old = {"kind": "nnx_lab.Standardizer", "version": 1, "columns": ["0", "b"]}
    old |= {"mean": [2.0, 5.0], "std": [1.0, 1.0]}
    legacy = Standardizer.from_state(old)
    assert legacy.columns == ("0", "b")
    assert legacy.transform(df[[0, "b"]]).tolist() == [[-1.0, -1.0], [0.0, 0.0], [1.0, 2.0]]
    with pytest.raises(StandardizerError, match="strings or integers"):
        Standardizer.fit(pd.DataFrame({1.5: [1.0, 2.0]}), rows=[0, 1])
    with pytest.raises(StandardizerError, match="repeat"):
        Standardizer([0, 0], [0.0, 0.0], [1.0, 1.0])


def test_standardizer_records_nnx_dtype_fit_rows_membership_and_digest(tmp_path):
    from nnx_lab.data_splits import SplitManifest
    from nnx_lab.preprocessing import Standardizer, StandardizerError

    df = pd.DataFrame({"a": [1.0, 2.0, 3.0, 10.0], "b": [4.0, 5.0, 7.0, 0.0]})
    s = Standardizer.fit(df, rows=[2, 0, 1])
    assert s.fit_rows == 3
    assert s.membership == Standardizer.fit(df, rows=[0, 1, 2]).membership  # the row set
    assert s.membership != Standardizer.fit(df, rows=[0, 1, 3]).membership
    assert s.transform(df).dtype == np.float32
    wide = Standardizer.fit(df, rows=[0, 1, 2], dtype=torch.float64, membership="train-v1")
    assert (wide.dtype, wide.membership) == ("float64", "train-v1")
    assert wide.transform(df).dtype == np.float64
    for each in (s, wide):
        again = Standardizer.from_state(json.loads(json.dumps(each.state())))
        assert again == each
        assert again.digest() == each.digest()
        assert Standardizer.load(each.save(tmp_path / "s.json")) == each
    assert s.digest().startswith("sha256:")
    assert s.digest() != wide.digest()
    manifest = SplitManifest(train=[0, 1, 2], val=[3], test=[])
    assert Standardizer.fit(df, rows=[0, 1, 2], membership=manifest).membership == (
        manifest.digest()
    )
    # a state without NNx's records (every one saved before) keeps its bytes and digest
    plain = Standardizer(("a", "b"), [0.0, 1.0], [1.0, 2.0])
    assert set(plain.state()) == {"kind", "version", "columns", "mean", "std"}
    with pytest.raises(StandardizerError, match="float16"):
        Standardizer.fit(df, rows=[0, 1], dtype="float16")
    with pytest.raises(StandardizerError, match="membership"):
        Standardizer.fit(df, rows=[0, 1], membership="")


def test_split_manifest_records_nnx_source_and_seed(tmp_path):
    from nnx_lab.data_splits import SplitError, SplitManifest
    from nnx_lab.provenance import hash_bytes

    data = hash_bytes(b"rows")
    m = SplitManifest("random", [1, 2], [3], [4], source=data, seed=7)
    assert (m.source, m.seed) == (str(data), 7)
    again = SplitManifest.load(m.save(tmp_path / "m.json"))
    assert (again.source, again.seed) == (str(data), 7)
    assert again.digest() == m.digest()  # the identity is the membership
    assert SplitManifest.from_state(json.loads(json.dumps(m.state()))).seed == 7
    plain = SplitManifest(train=[1, 2], val=[3], test=[4])
    assert (plain.source, plain.seed) == (None, None)
    assert "seed" not in plain.state()  # older states keep their bytes
    for bad in ({"seed": -1}, {"seed": True}, {"source": ""}, {"source": 3}):
        with pytest.raises(SplitError, match=next(iter(bad))):
            SplitManifest(train=[1], val=[2], test=[3], **bad)
