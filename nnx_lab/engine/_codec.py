"""Lossless split of a nested state (optimizer, RNG, scaler...) into JSON and tensors.

``split_state`` replaces every tensor and NumPy array by a reference and returns the JSON
tree plus a flat ``{key: tensor}`` dict for safetensors; ``join_state`` inverts it.
Tuples, NumPy scalars and dicts whose keys are not plain strings are tagged so they come
back as they were (type, dtype and key order). No pickle: the JSON is plain data and the
tensors are safetensors.

Floats survive JSON exactly (``repr`` round-trips; NaN and infinities are written as
``NaN`` / ``Infinity``), so RNG and optimizer states are restored bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["join_state", "split_state"]

_TAGS = ("__tensor__", "__ndarray__", "__npscalar__", "__tuple__", "__dict__")


def split_state(tree: Any, prefix: str, tensors: dict[str, torch.Tensor]) -> Any:
    """The JSON form of ``tree``; its tensors and arrays are added to ``tensors``."""
    if isinstance(tree, torch.Tensor):
        key = _free_key(prefix, tensors)
        # no copy: the caller serializes ``tensors`` at once, before anything trains on
        tensors[key] = tree.detach().cpu().contiguous()
        return {"__tensor__": key}
    if isinstance(tree, np.ndarray):
        if tree.dtype.hasobject:
            raise TypeError(
                f"cannot save a NumPy array of objects in a checkpoint (at {prefix}); "
                "convert it to numbers first"
            )
        key = _free_key(prefix, tensors)
        tensors[key] = torch.from_numpy(np.ascontiguousarray(tree).copy())
        return {"__ndarray__": key, "dtype": tree.dtype.str}
    if isinstance(tree, np.generic):
        return {"__npscalar__": tree.item(), "dtype": tree.dtype.str}
    if isinstance(tree, dict):
        if all(isinstance(k, str) and k not in _TAGS for k in tree):
            return {k: split_state(v, f"{prefix}.{k}", tensors) for k, v in tree.items()}
        return {
            "__dict__": [
                [_key(k, prefix), split_state(v, f"{prefix}.{i}", tensors)]
                for i, (k, v) in enumerate(tree.items())
            ]
        }
    if isinstance(tree, tuple):
        return {"__tuple__": [split_state(v, f"{prefix}.{i}", tensors) for i, v in enumerate(tree)]}
    if isinstance(tree, list):
        return [split_state(v, f"{prefix}.{i}", tensors) for i, v in enumerate(tree)]
    if tree is None or isinstance(tree, bool | int | float | str):
        return tree
    raise TypeError(
        f"cannot save a {type(tree).__name__} in a checkpoint without pickle "
        f"(at {prefix}); make state_dict() return tensors, arrays, numbers, strings, "
        "lists, tuples and dicts"
    )


def _free_key(prefix: str, tensors: dict[str, torch.Tensor]) -> str:
    """``prefix``, or ``prefix#n`` when a dotted dict key already produced that name."""
    key, n = prefix, 1
    while key in tensors:
        key, n = f"{prefix}#{n}", n + 1
    return key


def _key(k: Any, prefix: str) -> Any:
    if k is None or isinstance(k, bool | int | float | str):
        return k
    raise TypeError(
        f"cannot save a state dict key of type {type(k).__name__} (at {prefix}); "
        "use strings or numbers as keys"
    )


def join_state(tree: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """Invert ``split_state``: the same structure, types and values."""
    if isinstance(tree, dict):
        if "__tensor__" in tree:
            return tensors[tree["__tensor__"]]
        if "__ndarray__" in tree:
            array = tensors[tree["__ndarray__"]].numpy()
            return array.astype(np.dtype(tree["dtype"]), copy=True)
        if "__npscalar__" in tree:
            return np.dtype(tree["dtype"]).type(tree["__npscalar__"])
        if "__tuple__" in tree:
            return tuple(join_state(v, tensors) for v in tree["__tuple__"])
        if "__dict__" in tree:
            return {k: join_state(v, tensors) for k, v in tree["__dict__"]}
        return {k: join_state(v, tensors) for k, v in tree.items()}
    if isinstance(tree, list):
        return [join_state(v, tensors) for v in tree]
    return tree
