"""The one strict decoder (nnx_lab/runs/_schema.py): hostile bytes become one
SchemaError naming the file, the field and the value, never a bare Python exception."""

from __future__ import annotations

import tracemalloc

import msgspec
import pytest

from nnx_lab.errors import FileError, NNxError
from nnx_lab.runs._schema import (
    Finite,
    PositiveInt,
    SchemaError,
    check,
    decode_json,
    decode_yaml,
    parse_json,
    parse_yaml,
    read_bounded,
)


class Doc(msgspec.Struct, forbid_unknown_fields=True):
    temperature: Finite
    rows: PositiveInt
    labels: list[str] | None = None


def _refused(data: bytes) -> SchemaError:
    with pytest.raises(SchemaError) as info:
        decode_json(data, Doc, "cal.json")
    return info.value


def test_a_good_document_decodes_to_its_type():
    doc = decode_json(b'{"temperature": 1.5, "rows": 3, "labels": ["a", "b"]}', Doc, "x")
    assert doc == Doc(1.5, 3, ["a", "b"])


@pytest.mark.parametrize(
    ("data", "field", "says"),
    [
        (b'{"temperature": NaN, "rows": 1}', "temperature", "finite"),
        (b'{"temperature": Infinity, "rows": 1}', "temperature", "finite"),
        (b'{"temperature": 1e400, "rows": 1}', "temperature", "finite"),
        (b'{"temperature": 1, "rows": -5}', "rows", ">= 1"),
        (b'{"temperature": 1, "rows": true}', "rows", "bool"),
        (b'{"temperature": 1, "rows": "5"}', "rows", "str"),
        (b'{"temperature": 1, "rows": 5, "labels": "ab"}', "labels", "str"),
        (b'{"temperature": 1, "rows": 5, "labels": ["a", 5]}', "labels[1]", "int"),
        (b'{"rows": 5}', "", "temperature"),
        (b'{"temperature": 1, "rows": 5, "extra": 0}', "", "extra"),
    ],
)
def test_each_violation_names_the_field_and_the_value(data, field, says):
    err = _refused(data)
    assert err.field == field
    assert says in str(err)
    assert str(err).startswith("cal.json: ")
    assert isinstance(err, FileError)
    assert isinstance(err, NNxError)
    assert isinstance(err, ValueError)


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"\xff\xfe",
        b'{"temperature": 1, "rows": 5' + b"0" * 5000 + b"}",
        b"[" * 100_000 + b"]" * 100_000,
        b"[" * 100 + b"]" * 100,
        b"[1, 2]",
    ],
    ids=["not-json", "not-utf8", "5000-digits", "deep-1e5", "deep-100", "wrong-top"],
)
def test_hostile_bytes_are_one_schema_error(data):
    _refused(data)


def test_nan_parses_where_a_schema_allows_it():
    class Loose(msgspec.Struct):
        loss: float | None

    assert str(decode_json(b'{"loss": NaN}', Loose, "x").loss) == "nan"


def test_a_yaml_bomb_is_refused_before_anything_is_expanded():
    bomb = b'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        bomb += f"{name}: &{name} [{','.join(['*' + prev] * 9)}]\n".encode()
    tracemalloc.start()
    with pytest.raises(SchemaError, match="anchors or aliases"):
        parse_yaml(bomb, "metadata.yaml")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 5 << 20  # expanded, the value would take hundreds of megabytes


@pytest.mark.parametrize(
    "data",
    [
        b"a: !!python/object/apply:os.system ['true']",
        b"a: " + b"5" * 5000,
        b"a: " + b"[" * 200 + b"]" * 200,
        b"a: [1, 2",
        b"\xff",
    ],
    ids=["python-tag", "5000-digits", "deep", "truncated", "not-utf8"],
)
def test_hostile_yaml_is_one_schema_error(data):
    with pytest.raises(SchemaError):
        parse_yaml(data, "run.yaml")


def test_a_yaml_record_is_checked_like_json():
    class Meta(msgspec.Struct):
        started_at: Finite

    with pytest.raises(SchemaError) as info:
        decode_yaml(b"started_at: yesterday\n", Meta, "metadata.yaml")
    assert info.value.field == "started_at"
    assert info.value.value == "yesterday"
    assert decode_yaml(b"started_at: 12.5\n", Meta, "m").started_at == 12.5


def test_a_file_over_the_cap_is_refused_without_reading_it_all(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2000)
    with pytest.raises(SchemaError, match="larger than 1,000 bytes"):
        read_bounded(big, max_bytes=1000)
    assert read_bounded(big, max_bytes=2000) == b" " * 2000


def test_check_validates_values_already_parsed():
    assert check({"temperature": 2, "rows": 1}, Doc, "x").temperature == 2.0
    with pytest.raises(SchemaError, match="rows"):
        check({"temperature": 2, "rows": 0}, Doc, "x")


def test_parse_json_keeps_line_numbers_for_logs():
    with pytest.raises(SchemaError) as info:
        parse_json(b"{", "metrics.jsonl", line=7)
    assert info.value.line == 7
    assert "metrics.jsonl, line 7" in str(info.value)
