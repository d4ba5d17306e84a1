"""A lean writer of the safetensors format; reading stays with the ``safetensors`` package.

``safetensors.torch.save`` spends about 0.1 ms per tensor in Python checks (shared
storage, ctypes casts), which dominates a small model's checkpoint. The format itself is
simple: an 8-byte little-endian header length, a JSON header mapping each name to its
dtype, shape and byte range, padded with spaces to an 8-byte boundary, then the tensors'
bytes back to back. Files written here load with ``safetensors.torch.load`` and
``safe_open`` (the tests check both).
"""

from __future__ import annotations

import json
import struct

import torch

__all__ = ["encode"]

_DTYPES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
    **{  # unsigned integers wider than a byte exist in torch >= 2.3 only
        getattr(torch, name): code
        for name, code in (("uint16", "U16"), ("uint32", "U32"), ("uint64", "U64"))
        if hasattr(torch, name)
    },
}


def encode(tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> bytes:
    """The safetensors bytes of ``tensors`` (CPU, any supported dtype), in insertion order."""
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = metadata
    chunks: list = []  # byte buffers; joined once, without per-tensor copies
    offset = 0
    for name, tensor in tensors.items():
        dtype = _DTYPES.get(tensor.dtype)
        if dtype is None:
            raise TypeError(f"cannot save tensor {name!r} of dtype {tensor.dtype} in safetensors")
        t = tensor.detach().cpu().contiguous()
        data = t.reshape(-1).view(torch.uint8).numpy() if t.numel() else b""
        header[name] = {
            "dtype": dtype,
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    return b"".join([struct.pack("<Q", len(text)), text, *chunks])
