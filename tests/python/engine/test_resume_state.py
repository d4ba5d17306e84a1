"""The training-state sidecar is data: tensors in safetensors, the rest JSON, lossless."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from nnx_lab.engine._codec import join_state, split_state


def _round_trip(tree):
    tensors: dict[str, torch.Tensor] = {}
    text = json.dumps(split_state(tree, "state", tensors), allow_nan=True)
    return join_state(json.loads(text), st_load(st_save(tensors)))


def test_every_kind_of_value_comes_back_as_it_was():
    gen = torch.Generator().manual_seed(3)
    tree = {
        "tuple": (1, 2.5, "x", None, True),
        "int_keys": {0: "a", 2: "b", 1: "c"},  # order kept
        "mixed_keys": {1.5: 1, "s": 2, None: 3, False: 4},
        "__dunder": 1,
        "floats": [math.inf, -math.inf, -0.0, 1e-310, 0.1 + 0.2],
        "nan": math.nan,
        "big_int": 2**80,
        "uint32": np.arange(5, dtype=np.uint32),
        "bools": np.array([True, False]),
        "np_scalars": [np.float32(0.1), np.int16(-3), np.bool_(True)],
        "tensor": torch.arange(6, dtype=torch.float64).reshape(2, 3).t(),  # not contiguous
        "scalar": torch.tensor(7, dtype=torch.int64),
        "generator": gen.get_state(),
        "python_rng": random.Random(5).getstate(),
        "numpy_rng": np.random.RandomState(9).get_state(),
    }
    back = _round_trip(tree)
    assert list(back["int_keys"]) == [0, 2, 1]
    assert back["mixed_keys"] == tree["mixed_keys"]
    assert back["__dunder"] == 1
    assert back["tuple"] == tree["tuple"]
    assert back["floats"] == tree["floats"]
    assert math.copysign(1.0, back["floats"][2]) == -1.0
    assert math.isnan(back["nan"])
    assert back["big_int"] == 2**80
    assert back["uint32"].dtype == np.uint32
    assert np.array_equal(back["uint32"], tree["uint32"])
    assert back["bools"].dtype == np.bool_
    for got, want in zip(back["np_scalars"], tree["np_scalars"], strict=True):
        assert type(got) is type(want)
        assert got == want
    assert torch.equal(back["tensor"], tree["tensor"])
    assert back["scalar"].dtype == torch.int64
    assert torch.equal(back["generator"], tree["generator"])
    assert back["python_rng"] == tree["python_rng"]
    r = random.Random()
    r.setstate(back["python_rng"])
    assert r.random() == random.Random(5).random()
    np_state = back["numpy_rng"]
    rs = np.random.RandomState()
    rs.set_state(np_state)
    assert rs.rand() == np.random.RandomState(9).rand()


def test_dotted_keys_do_not_collide():
    tree = {"a.b": torch.ones(1), "a": {"b": torch.zeros(1)}}
    back = _round_trip(tree)
    assert torch.equal(back["a.b"], torch.ones(1))
    assert torch.equal(back["a"]["b"], torch.zeros(1))


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"x": object()}, "state.x"),
        ({"x": np.array([object()])}, "state.x"),
        ({"x": {(1, 2): 3}}, "state.x"),
    ],
)
def test_what_json_and_safetensors_cannot_hold_is_refused_by_path(value, where):
    with pytest.raises(TypeError, match=where):
        split_state(value, "state", {})
