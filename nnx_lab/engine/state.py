"""Lossless split of a nested state (optimizer, RNG, scaler...) into JSON and tensors.

``split_state`` replaces every tensor and NumPy array by a reference and returns the JSON
tree plus a flat ``{key: tensor}`` dict for safetensors; ``join_state`` inverts it.
Tuples and dicts with non-string keys are tagged so they come back as they were. No
pickle: the JSON is plain data and the tensors are safetensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["join_state", "split_state"]


def split_state(tree: Any, prefix: str, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(tree, torch.Tensor):
        key = f"{prefix}"
        tensors[key] = tree.detach().cpu().contiguous().clone()
        return {"__tensor__": key}
    if isinstance(tree, np.ndarray):
        key = f"{prefix}"
        tensors[key] = torch.from_numpy(np.ascontiguousarray(tree).copy())
        return {"__ndarray__": key, "dtype": str(tree.dtype)}
    if isinstance(tree, np.generic):
        return tree.item()
    if isinstance(tree, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in tree):
            return {k: split_state(v, f"{prefix}.{k}", tensors) for k, v in tree.items()}
        return {
            "__dict__": [
                [_key(k), split_state(v, f"{prefix}.{i}", tensors)]
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
        f"(at {prefix}); make state_dict() return tensors, numbers, strings, "
        "lists and dicts"
    )


def _key(k: Any) -> Any:
    if isinstance(k, bool | int | float | str) or k is None:
        return k
    raise TypeError(f"cannot save a state dict key of type {type(k).__name__}")


def join_state(tree: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(tree, dict):
        if "__tensor__" in tree:
            return tensors[tree["__tensor__"]]
        if "__ndarray__" in tree:
            return tensors[tree["__ndarray__"]].numpy().astype(tree["dtype"], copy=True)
        if "__tuple__" in tree:
            return tuple(join_state(v, tensors) for v in tree["__tuple__"])
        if "__dict__" in tree:
            return {k: join_state(v, tensors) for k, v in tree["__dict__"]}
        return {k: join_state(v, tensors) for k, v in tree.items()}
    if isinstance(tree, list):
        return [join_state(v, tensors) for v in tree]
    return tree
