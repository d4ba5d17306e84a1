"""Tabular data (§2.5), split manifests (§2.16) and train-only preprocessing (§2.17).

Every admission check and refusal asserts that nothing was written, and that the
caller's frame and the global random streams are untouched.
"""

from __future__ import annotations

import random
import re

import numpy as np
import pandas as pd
import pytest
import torch

from nnx_lab import (
    ConfigError,
    DataError,
    NNModel,
    NNModelParams,
    NNParams,
    NNTabularDataset,
    NNTrainParams,
)
from nnx_lab.data_splits import SplitError, SplitManifest, plan_split
from nnx_lab.preprocessing import Standardizer, StandardizerError


def frame(n: int = 60, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "row_id": np.arange(1000, 1000 + n),
            "age": rng.uniform(20, 70, n),
            "income": rng.normal(50_000, 10_000, n),
            "label": rng.integers(0, 3, n),
            "price": rng.normal(100, 20, n),
            "note": ["free text"] * n,  # an unselected column may hold anything
        }
    )


def rng_state():
    return (random.getstate(), np.random.get_state()[1].tobytes(), torch.get_rng_state())


@pytest.fixture
def untouched(tmp_path, monkeypatch):
    """Checks, after the test body, that the frame and every random stream are as before
    and that nothing was written under the working directory."""
    monkeypatch.chdir(tmp_path)
    df = frame()
    before = (df.copy(deep=True), rng_state())
    yield df
    pd.testing.assert_frame_equal(df, before[0])
    after = rng_state()
    assert after[0] == before[1][0]
    assert after[1] == before[1][1]
    assert torch.equal(after[2], before[1][2])
    assert list(tmp_path.iterdir()) == []


# -- construction --------------------------------------------------------------------------
def test_a_classification_dataset_splits_and_batches(untouched):
    ds = NNTabularDataset(untouched, ["age", "income"], "label", batch_sizes=(8, None, None))
    assert (ds.input_dim, ds.output_dim) == (2, 3)
    assert ds.classes == [0, 1, 2]
    sizes = {k: len(v) for k, v in ds.rows.items()}
    assert sizes == {"train": 42, "val": 9, "test": 9}
    assert ds.batch_sizes == (8, 9, 9)  # None: one batch holding the split
    X, y = ds.val_loader.dataset.tensors  # (iterating a loader would draw from torch's RNG)
    assert X.dtype == torch.float32
    assert y.dtype == torch.long
    assert X.shape == (9, 2)
    rows = sorted(r for part in ds.rows.values() for r in part)
    assert rows == list(range(60))  # every row in exactly one split
    again = NNTabularDataset(untouched, ["age", "income"], "label", batch_sizes=(8, None, None))
    assert again.rows == ds.rows  # the seed decides the split


def test_string_labels_are_encoded_in_sorted_order(untouched):
    df = untouched.assign(kind=np.where(untouched["label"] == 0, "cat", "dog"))
    ds = NNTabularDataset(df, ["age"], "kind")
    assert ds.classes == ["cat", "dog"]
    _, y = ds.train_loader.dataset.tensors
    picked = df.iloc[ds.rows["train"]]
    assert torch.equal(y, torch.tensor((picked["kind"] == "dog").to_numpy().astype(np.int64)))


def test_a_regression_dataset_keeps_the_values(untouched):
    ds = NNTabularDataset(untouched, ["age"], "price", target_dtype=torch.float32)
    assert ds.output_dim == 1
    assert ds.classes is None
    _, y = ds.train_loader.dataset.tensors
    assert y.dtype == torch.float32
    expected = untouched["price"].to_numpy()[ds.rows["train"]].astype(np.float32)
    assert np.array_equal(y.numpy(), expected)


def test_empty_optional_splits_give_none_loaders_and_placeholder_sizes(untouched):
    ds = NNTabularDataset(
        untouched,
        ["age"],
        "label",
        val_proportion=0.0,
        test_proportion=0.0,
        batch_sizes=(None, None, 5),
    )
    assert ds.val_loader is None
    assert ds.test_loader is None
    assert ds.batch_sizes == (60, 1, 5)  # a placeholder 1 where None was asked; 5 kept


# -- admission checks (all before the split) ------------------------------------------------
@pytest.mark.parametrize(
    ("change", "kwargs", "text"),
    [
        (
            lambda d: d.assign(age=d["age"].where(d.index != 3)),
            {"feature_dtype": torch.float64},
            "NaN in feature column(s) {'age': 'float64'} (requested torch.float64)",
        ),
        (
            lambda d: d.assign(label=d["label"].where(d.index != 3)),
            {},
            "NaN in target column 'label'",
        ),
        (
            lambda d: d.assign(age=d["age"].where(d.index != 5, np.inf)),
            {},
            "±inf in feature column(s) ['age']",
        ),
        # an int64 or bool cast would absorb ±inf (into an extreme, into True): checked before
        (
            lambda d: d.assign(age=d["age"].where(d.index != 5, -np.inf)),
            {"feature_dtype": torch.int64},
            "±inf in feature column(s) ['age'] (checked before the cast to torch.int64)",
        ),
        (
            lambda d: d.assign(age=d["age"].where(d.index != 5, np.inf)),
            {"feature_dtype": torch.bool},
            "±inf in feature column(s) ['age'] (checked before the cast to torch.bool)",
        ),
        (
            lambda d: d.assign(price=d["price"].where(d.index != 7, np.inf)),
            {"target_dtype": torch.float32, "target_col": "price"},
            "±inf in target column 'price'",
        ),
        (
            lambda d: d.assign(age=d["age"] * 0 + 300),
            {"feature_dtype": torch.int8},
            "outside [-128, 127]",
        ),
        (lambda d: d.assign(age=d["age"] * 0 + 1e30), {"feature_dtype": torch.int64}, "outside"),
        (
            lambda d: d.assign(age=d["age"] * 0 + 1e5),
            {"feature_dtype": torch.float16},
            "overflow torch.float16 after conversion",
        ),
        (
            lambda d: d.assign(price=d["price"] * 0 + 1e5),
            {"target_dtype": torch.float16, "target_col": "price"},
            "overflows torch.float16",
        ),
        (lambda d: d.assign(label=d["label"] + 0.5), {}, "non-integral"),
        (lambda d: d.assign(age=d["note"]), {}, "not numeric"),
        (lambda d: d, {"feature_cols": ["age", "missing"]}, "no column(s) ['missing']"),
    ],
)
def test_admission_checks_refuse_before_the_split(untouched, change, kwargs, text):
    df = change(untouched)  # a new frame: the fixture's own frame stays untouched
    args = {"feature_cols": ["age", "income"], "target_col": "label", **kwargs}
    with pytest.raises(DataError, match=re.escape(text)):
        NNTabularDataset(df, **args)


@pytest.mark.parametrize(
    ("batch_sizes", "slot"),
    [
        ((0, None, None), r"batch_sizes\[0\] \(train\)"),
        ((None, False, None), r"batch_sizes\[1\] \(val\)"),
        ((None, None, -3), r"batch_sizes\[2\] \(test\)"),
        ((1.5, None, None), r"batch_sizes\[0\] \(train\)"),
        (("64", None, None), r"batch_sizes\[0\] \(train\)"),
        ((8, 8), r"batch_sizes="),
        ([8, 8, 8], r"batch_sizes="),
    ],
)
def test_batch_sizes_are_checked_by_slot_before_any_data_is_read(untouched, batch_sizes, slot):
    class Trap(pd.DataFrame):
        def __getitem__(self, key):  # a frame that fails when read
            raise AssertionError("the frame was read before batch_sizes was checked")

    with pytest.raises(ConfigError, match=slot):
        NNTabularDataset(Trap(untouched), ["age"], "label", batch_sizes=batch_sizes)


def test_numpy_integer_batch_sizes_are_normalized(untouched):
    ds = NNTabularDataset(untouched, ["age"], "label", batch_sizes=(np.int64(8), None, None))
    assert ds.batch_sizes[0] == 8
    assert type(ds.batch_sizes[0]) is int


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"val_proportion": 1.0}, "val_proportion"),
        ({"val_proportion": 0.6, "test_proportion": 0.5}, "sum to less than 1"),
        ({"target_dtype": torch.int64}, "target_dtype"),
        ({"feature_cols": "age"}, "feature_cols"),
        ({"feature_cols": ["age", "label"]}, "target cannot also be a feature"),
        ({"standardize": True, "feature_dtype": torch.int32}, "standardize"),
    ],
)
def test_configuration_is_refused_naming_the_field(untouched, kwargs, field):
    args = {"feature_cols": ["age"], "target_col": "label", **kwargs}
    with pytest.raises(ConfigError, match=field):
        NNTabularDataset(untouched, **args)


def test_unselected_columns_may_hold_anything(untouched):
    df = untouched.assign(junk=[None, np.inf, "x"] * 20)
    NNTabularDataset(df, ["age"], "label")  # NaN, inf and text elsewhere are fine


# -- standardization (§2.17) -----------------------------------------------------------------
def test_standardize_fits_on_the_training_rows_only(untouched):
    ds = NNTabularDataset(untouched, ["age", "income"], "label", standardize=True)
    train_rows = untouched.iloc[ds.rows["train"]][["age", "income"]].to_numpy()
    assert np.allclose(ds.standardizer.mean, train_rows.mean(0))
    assert np.allclose(ds.standardizer.std, train_rows.std(0))
    X_train, _ = ds.train_loader.dataset.tensors
    assert torch.allclose(X_train.mean(0), torch.zeros(2), atol=1e-5)
    X_val, _ = ds.val_loader.dataset.tensors
    assert not torch.allclose(X_val.mean(0), torch.zeros(2), atol=1e-3)  # not refitted on val


def test_a_saved_standardizer_reloads_exactly_and_never_refits(untouched, tmp_path_factory):
    ds = NNTabularDataset(untouched, ["age", "income"], "label", standardize=True)
    path = ds.standardizer.save(tmp_path_factory.mktemp("saved") / "standardizer.json")
    loaded = Standardizer.load(path)
    assert loaded == ds.standardizer  # float64 statistics, bit for bit
    new_rows = frame(5, seed=9)[["age", "income"]]
    out = loaded.transform(new_rows)
    assert out.dtype == np.float32
    expected = (new_rows.to_numpy() - ds.standardizer.mean) / ds.standardizer.std
    assert np.allclose(out, expected)
    assert loaded.transform(new_rows[["age", "income"]]).shape == (5, 2)


@pytest.mark.parametrize(
    ("rows", "text"),
    [
        (lambda r: r[["income", "age"]], "another order"),
        (lambda r: r[["age"]], "missing ['income']"),
        (lambda r: r.assign(extra=1.0), "unexpected ['extra']"),
        (lambda r: r.to_numpy()[:, :1], "shape (5, 1)"),
        (lambda r: r.assign(age=np.nan), "non-finite values (NaN/inf) in ['age']"),
    ],
)
def test_transform_refuses_rows_that_do_not_match(rows, text):
    s = Standardizer.fit(frame()[["age", "income"]], ["age", "income"])
    with pytest.raises(StandardizerError, match=re.escape(text)):
        s.transform(rows(frame(5)[["age", "income"]]))


def test_a_standardized_model_serves_raw_rows_through_the_reloaded_standardizer(tmp_path):
    df = frame(120)
    df["label"] = (df["age"] > 45).astype(int)  # learnable from the raw feature
    ds = NNTabularDataset(
        df, ["age", "income"], "label", standardize=True, batch_sizes=(16, None, None)
    )
    model = NNModel(NNParams(input_dim=2, output_dim=2, hidden_dims=[16]), NNModelParams())
    model.train(
        NNTrainParams(
            n_epochs=15,
            train_loader=ds.train_loader,
            val_loader=ds.val_loader,
            runs_root=str(tmp_path / "runs"),
        )
    )
    ds.standardizer.save(tmp_path / "s.json")
    reloaded = Standardizer.load(tmp_path / "s.json")
    raw = df.iloc[ds.rows["test"]][["age", "income"]]
    prediction = model.predict(reloaded.transform(raw))
    truth = torch.tensor(df.iloc[ds.rows["test"]]["label"].to_numpy())
    assert float((prediction.classes == truth).float().mean()) >= 0.8


# -- split manifests (§2.16) -----------------------------------------------------------------
def test_a_random_split_is_seeded_and_covers_every_id():
    ids = list(range(100))
    a, b = plan_split(ids, seed=1), plan_split(ids, seed=1)
    assert a == b
    assert a.digest() == b.digest()
    assert plan_split(ids, seed=2).digest() != a.digest()
    assert sorted([*a.train, *a.val, *a.test]) == ids
    assert a.sizes()["train"] == 70


def test_a_group_split_keeps_every_group_in_one_split():
    ids = list(range(120))
    groups = [i // 6 for i in ids]  # 20 patients, 6 rows each
    m = plan_split(ids, "group", groups=groups, proportions=(0.6, 0.2, 0.2), seed=3)
    where = m.split_of()
    for g in set(groups):
        assert len({where[i] for i in ids if groups[i] == g}) == 1
    assert all(m.sizes()[s] > 0 for s in ("train", "val", "test"))


def test_a_stratified_split_puts_every_class_in_every_split():
    ids = list(range(40))
    labels = [0] * 30 + [1] * 7 + [2] * 3  # a rare class
    m = plan_split(ids, "stratified", labels=labels, seed=0)
    for part in (m.train, m.val, m.test):
        assert {labels[i] for i in part} == {0, 1, 2}
    with pytest.raises(SplitError, match="class 3 has 2 rows"):
        plan_split(list(range(32)), "stratified", labels=[*labels[:30], 3, 3], seed=0)


def test_a_chronological_split_leaves_an_embargo_gap():
    ids = list(range(400))
    times = list(range(400))
    m = plan_split(ids, "chronological", times=times, cutoffs=(300, 330), gap=7)
    assert max(m.train) == 299
    assert (min(m.val), max(m.val)) == (307, 329)
    assert min(m.test) == 337
    assert sorted(m.excluded) == [*range(300, 307), *range(330, 337)]


@pytest.mark.parametrize(
    ("args", "kwargs", "text"),
    [
        (([1, 1, 2],), {}, "duplicate ids"),
        (([1, 2],), {"strategy": "by-day"}, "strategy='by-day'"),
        (([1, 2],), {"strategy": "chronological"}, "times=..."),
        (([1.5, 2.5],), {}, "not a usable id"),
        (([1, 2, 3],), {"proportions": (0.0, 0.5, 0.5)}, "proportions="),
    ],
)
def test_plan_split_refuses_bad_requests(args, kwargs, text):
    with pytest.raises(SplitError, match=re.escape(text)):
        plan_split(*args, **kwargs)


def test_a_manifest_round_trips_through_json(tmp_path):
    m = plan_split([f"p{i}" for i in range(30)], seed=4)
    path = m.save(tmp_path / "split.json")
    loaded = SplitManifest.load(path)
    assert loaded == m
    assert loaded.digest() == m.digest()


def test_a_reordered_frame_replays_into_the_same_splits_and_the_same_run_id(tmp_path):
    df = frame(90)
    split = plan_split(df["row_id"], "stratified", labels=df["label"], seed=0)
    shuffled = df.sample(frac=1.0, random_state=7)
    a = NNTabularDataset(df, ["age", "income"], "label", split=split, id_col="row_id")
    b = NNTabularDataset(shuffled, ["age", "income"], "label", split=split, id_col="row_id")
    for slot in ("train_loader", "val_loader", "test_loader"):
        ta, tb = getattr(a, slot).dataset.tensors, getattr(b, slot).dataset.tensors
        assert all(torch.equal(x, y) for x, y in zip(ta, tb, strict=True))

    def run_id(ds):
        model = NNModel(NNParams(input_dim=2, output_dim=3, hidden_dims=[8]), NNModelParams())
        params = NNTrainParams(
            n_epochs=1,
            train_loader=ds.train_loader,
            val_loader=ds.val_loader,
            runs_root=str(tmp_path / "runs"),
            overwrite_existing=True,
        )
        return model.train(params).id

    assert run_id(a) == run_id(b)
    other = plan_split(df["row_id"], "stratified", labels=df["label"], seed=1)
    c = NNTabularDataset(df, ["age", "income"], "label", split=other, id_col="row_id")
    assert run_id(c) != run_id(a)  # the split's digest enters the data identity


@pytest.mark.parametrize(
    ("frame_change", "text"),
    [
        (lambda d: pd.concat([d, d.iloc[:1]]), "duplicate ids"),
        (lambda d: d.iloc[:-2], "missing from the frame"),
        (lambda d: pd.concat([d, d.iloc[:1].assign(row_id=5)]), "not in the split"),
    ],
)
def test_a_split_that_does_not_match_the_frame_is_refused_before_any_loader(frame_change, text):
    df = frame(30)
    split = plan_split(df["row_id"], seed=0)
    with pytest.raises(DataError, match=re.escape(text)):
        NNTabularDataset(frame_change(df), ["age"], "label", split=split, id_col="row_id")
    with pytest.raises(ConfigError, match="id_col"):
        NNTabularDataset(df, ["age"], "label", split=split)
