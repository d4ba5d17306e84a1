"""A split manifest or a standardizer from someone else (issue 20, section 2): each
hostile file is one error of the family callers always caught (SplitError,
StandardizerError) that is also a SchemaError naming the file, the field and the value."""

from __future__ import annotations

import hostile_factories as h
import pytest

from nnx_lab.data_splits import SplitError, SplitManifest, plan_split
from nnx_lab.preprocessing import Standardizer, StandardizerError
from nnx_lab.runs import SchemaError


def _manifest(tmp_path):
    return plan_split([f"p{i}" for i in range(20)], seed=1).save(tmp_path / "split.json")


def _standardizer(tmp_path):
    return Standardizer(["age", "income"], [40.0, 5e4], [12.0, 1e4]).save(tmp_path / "s.json")


# -- the split manifest ------------------------------------------------------------------------
def _split(name, value):
    return lambda d: d.update({name: value})


SPLIT_CASES = {
    "train a string": (_split("train", "abc"), "train", "Expected `array`, got `str`"),
    "val missing": (lambda d: d.pop("val"), "val", "missing"),
    "excluded missing": (lambda d: d.pop("excluded"), "excluded", "missing"),
    "an id in two splits": (
        lambda d: d["test"].append(d["train"][0]),
        None,
        "is also in train",
    ),
    "an id twice in one split": (
        lambda d: d["val"].append(d["val"][0]),
        None,
        "earlier in this split",
    ),
    "an id a float": (lambda d: d["train"].append(1.5), None, "got `float`"),
    "an id a bool": (lambda d: d["train"].append(True), None, "got `bool`"),
    "an id an object": (lambda d: d["train"].append({"$": 1}), None, "got `object`"),
    "an id beyond 64 bits": (lambda d: d["train"].append(2**70), None, "<= 9223372036854775807"),
    "params a list": (_split("params", [1]), "params", "Expected `object`"),
    "params holding Infinity": (_split("params", {"gap": float("inf")}), "params.gap", "finite"),
    "kind another": (_split("kind", "nnx_lab.Standardizer"), "kind", "is not"),
    "version 2": (_split("version", 2), "version", "reads version 1"),
    "version true": (_split("version", True), "version", "reads version 1"),
    "unknown field": (_split("loader", "os:system"), "loader", "not a field"),
    "strategy blank": (_split("strategy", ""), "strategy", "length >= 1"),
}


@pytest.mark.parametrize("case", SPLIT_CASES, ids=list(SPLIT_CASES))
def test_a_hostile_split_manifest_is_refused_by_field(tmp_path, case):
    change, field, says = SPLIT_CASES[case]
    path = h.edited(_manifest(tmp_path), change)
    err = h.refused(SplitManifest.load, path, SplitError, field)
    assert says in str(err)


def test_a_repeated_id_is_named_where_it_repeats(tmp_path):
    path = h.edited(_manifest(tmp_path), lambda d: d["test"].append(d["train"][3]))
    err = h.refused(SplitManifest.load, path, SplitError)
    assert err.field.startswith("test[")
    assert err.value.startswith("p")


def test_from_state_is_as_strict_as_the_file(tmp_path):
    state = plan_split(list(range(10)), seed=0).state()
    assert SplitManifest.from_state(state) == plan_split(list(range(10)), seed=0)
    with pytest.raises(SplitError) as info:
        SplitManifest.from_state({**state, "train": "abc"})
    assert isinstance(info.value, SchemaError)
    assert info.value.field == "train"
    with pytest.raises(SplitError, match="not an object"):
        SplitManifest.from_state(["train"])


# -- the standardizer --------------------------------------------------------------------------
STANDARDIZER_CASES = {
    "columns a string": (_split("columns", "ab"), "columns", "Expected `array`, got `str`"),
    "columns repeated": (_split("columns", ["age", "age"]), "columns[1]", "repeats"),
    "columns empty": (_split("columns", []), "columns", "length >= 1"),
    "a column a float": (_split("columns", ["age", 5.5]), "columns[1]", "got `float`"),
    "mean NaN": (_split("mean", [float("nan"), 1.0]), "mean[0]", "finite"),
    "std zero": (_split("std", [0.0, 1.0]), "std[0]", "> 0"),
    "std negative": (_split("std", [1.0, -2.0]), "std[1]", "> 0"),
    "std Infinity": (_split("std", [1.0, float("inf")]), "std[1]", "finite"),
    "one mean short": (_split("mean", [1.0]), "mean", "1 means for 2 columns"),
    "std a string": (_split("std", "12"), "std", "got `str`"),
    "std missing": (lambda d: d.pop("std"), "std", "missing"),
    "kind another": (_split("kind", "nnx_lab.SplitManifest"), "kind", "is not"),
}


@pytest.mark.parametrize("case", STANDARDIZER_CASES, ids=list(STANDARDIZER_CASES))
def test_a_hostile_standardizer_is_refused_by_field(tmp_path, case):
    change, field, says = STANDARDIZER_CASES[case]
    path = h.edited(_standardizer(tmp_path), change)
    err = h.refused(Standardizer.load, path, StandardizerError, field)
    assert says in str(err)


def test_numbers_that_are_not_data_are_refused(tmp_path):
    path = _standardizer(tmp_path)
    text = path.read_text()
    for literal, field in (("1e400", "mean[0]"), ("-1e400", "mean[0]"), ("7" * 5000, "")):
        path.write_text(text.replace("40.0", literal, 1))
        h.refused(Standardizer.load, path, StandardizerError, field)


# -- bytes that are not a file of either kind ---------------------------------------------------
LOADERS = {
    "split": (SplitManifest.load, SplitError),
    "standardizer": (Standardizer.load, StandardizerError),
}


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("data", h.HOSTILE_BYTES, ids=list(h.HOSTILE_BYTES))
def test_hostile_bytes_are_one_family_error(tmp_path, loader, data):
    load, family = LOADERS[loader]
    path = tmp_path / "f.json"
    path.write_bytes(h.HOSTILE_BYTES[data])
    h.refused(load, path, family, "")


@pytest.mark.parametrize("loader", LOADERS)
def test_wrong_top_types_a_pipe_a_folder_and_a_missing_file(tmp_path, loader):
    load, family = LOADERS[loader]
    path = tmp_path / "f.json"
    for value in ([1], "x", 3.5, None):
        h.write_json(path, value)
        h.refused(load, path, family, "")
    h.refused(load, h.a_pipe(tmp_path / "pipe.json"), family, "")
    (tmp_path / "dir.json").mkdir()
    h.refused(load, tmp_path / "dir.json", family, "")
    err = h.refused(load, tmp_path / "absent.json", family, "")
    assert "no such file" in str(err)


@pytest.mark.parametrize("loader", LOADERS)
def test_a_100_mb_file_is_refused_without_reading_it(tmp_path, loader):
    load, family = LOADERS[loader]
    h.refused_without_reading(load, h.a_100_mb_file(tmp_path / "f.json"), family)
