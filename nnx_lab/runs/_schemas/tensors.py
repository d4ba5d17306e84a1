"""The header of a safetensors file, checked before the ``safetensors`` package (or any
tensor) sees the bytes.

A safetensors file is an 8-byte little-endian header length, a JSON header mapping each
tensor's name to its dtype, shape and byte range, then the bytes. A header that lies (a
length past the end, a range outside the data, ranges that overlap or leave holes, a
size that is not shape x dtype, a dtype nnx_lab never writes) is refused here with the
caller's family error, naming the file and the tensor.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import msgspec

from .. import _schema
from .._schema import NonNegativeInt, SchemaError, check, parse_json
from .reading import Refusal, each_problem, join

__all__ = ["ITEMSIZE", "TensorEntry", "check_tensors_header"]

# The dtypes engine/safetensors_io.py writes, and their widths in bytes.
ITEMSIZE = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "U16": 2,
    "U32": 4,
    "U64": 8,
}
_PREFIXES = ("model.", "state.")

Dtype = Literal[
    "F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", "U16", "U32", "U64"
]


class TensorEntry(msgspec.Struct, forbid_unknown_fields=True):
    dtype: Dtype
    shape: Annotated[list[NonNegativeInt], msgspec.Meta(max_length=64)]
    data_offsets: Annotated[list[NonNegativeInt], msgspec.Meta(min_length=2, max_length=2)]


Header = dict[Annotated[str, msgspec.Meta(min_length=1, max_length=4096)], Any]


def check_tensors_header(
    payload: bytes, path: Any, error: type[Refusal], *, fix: str
) -> dict[str, TensorEntry]:
    """The tensors the header of ``payload`` declares (name -> entry), once the header
    is well formed and describes exactly the bytes that follow it."""

    def refuse(field: str, reason: str, value: Any = None) -> Refusal:
        return error(path, field, reason, value=value, fix=fix)

    if len(payload) < 8:
        raise refuse("", f"is {len(payload)} bytes, shorter than a safetensors header")
    size = int.from_bytes(payload[:8], "little")
    if size > len(payload) - 8:
        raise refuse(
            "header",
            f"declares a {size:,}-byte header in a file of {len(payload):,} bytes",
        )
    # ~100 bytes a tensor: a large model with its optimizer state needs megabytes
    cap = _schema.LIMITS.file_bytes
    if size > cap:
        raise refuse(
            "header",
            f"is {size:,} bytes, more than the {cap:,} this reader takes "
            "(raise NNX_MAX_FILE_BYTES if the file is genuine)",
        )
    try:
        value = parse_json(payload[8 : 8 + size], path)
        if not isinstance(value, dict):
            raise refuse("header", "is not a JSON object", type(value).__name__)
        metadata = value.pop("__metadata__", None)
        if metadata is not None:
            check(metadata, dict[str, str], path)
        check(value, Header, path)
        problem = each_problem(value, TensorEntry, "")
        if problem is not None:
            raise refuse(join("header", problem.field), problem.reason, problem.value)
        entries = {k: msgspec.convert(v, TensorEntry, strict=True) for k, v in value.items()}
    except SchemaError as exc:
        if isinstance(exc, Refusal):
            raise
        raise error.of(exc, prefix="header", fix=fix) from None
    data = len(payload) - 8 - size
    end = 0
    for name, entry in sorted(entries.items(), key=lambda kv: tuple(kv[1].data_offsets)):
        field = f"header.{name}"
        if not name.startswith(_PREFIXES):
            raise refuse(field, "nnx_lab names every tensor model.* or state.*", name)
        start, stop = entry.data_offsets
        if start != end:
            what = "overlaps the tensor before it" if start < end else "leaves a hole before it"
            raise refuse(f"{field}.data_offsets", f"{what} (the data starts at {end})", start)
        if stop < start or stop > data:
            raise refuse(
                f"{field}.data_offsets",
                f"runs past the {data:,} bytes of data the file holds",
                entry.data_offsets,
            )
        expected = math.prod(entry.shape) * ITEMSIZE[entry.dtype]
        if stop - start != expected:
            raise refuse(
                f"{field}.data_offsets",
                f"holds {stop - start:,} bytes; shape {entry.shape} of {entry.dtype} is "
                f"{expected:,}",
                entry.data_offsets,
            )
        end = stop
    if end != data:
        raise refuse("header", f"describes {end:,} bytes of data; the file holds {data:,}")
    return entries
