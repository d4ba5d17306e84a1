"""Our safetensors writer produces files the safetensors package reads back exactly."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load, save

from nnx_lab.engine.safetensors_io import encode

TENSORS = {
    "w": torch.randn(3, 5),
    "b16": torch.randn(4).to(torch.bfloat16),
    "h": torch.randn(2, 2).half(),
    "d": torch.randn(7, dtype=torch.float64),
    "i": torch.arange(10),
    "i32": torch.arange(3, dtype=torch.int32),
    "u8": torch.arange(5, dtype=torch.uint8),
    "u32": torch.arange(4, dtype=torch.int64).to(torch.uint32),  # NumPy RNG state
    "mask": torch.tensor([True, False, True]),
    "scalar": torch.tensor(3.5),
    "empty": torch.zeros(0, 4),
    "strided": torch.randn(4, 6)[:, ::2],  # not contiguous
}


def test_every_dtype_round_trips_bit_for_bit(tmp_path):
    data = encode(TENSORS, metadata={"format": "pt"})
    back = load(data)
    assert set(back) == set(TENSORS)
    for name, tensor in TENSORS.items():
        assert back[name].dtype == tensor.dtype
        assert back[name].shape == tensor.shape
        assert torch.equal(back[name], tensor), name
    path = tmp_path / "x.safetensors"
    path.write_bytes(data)
    with safe_open(str(path), framework="pt") as fh:
        assert fh.metadata() == {"format": "pt"}
        assert torch.equal(fh.get_tensor("w"), TENSORS["w"])


def test_the_library_reads_ours_as_it_reads_its_own():
    ours, theirs = (
        load(encode(TENSORS)),
        load(save({k: v.contiguous() for k, v in TENSORS.items()})),
    )
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k]) for k in ours)


def test_an_unsupported_dtype_is_refused_by_name():
    with pytest.raises(TypeError, match="'c'"):
        encode({"c": torch.zeros(2, dtype=torch.complex64)})
