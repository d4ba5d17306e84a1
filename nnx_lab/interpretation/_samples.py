"""What a sample looks like on the page: an image, a table row or a text, from the
tensor the loader gave. Plain JSON values only (the widget draws them)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..errors import ConfigError

__all__ = ["SHOWS", "check_show", "display_of", "show_for"]

SHOWS = ("auto", "image", "table", "tokens", "none")


def check_show(show: Any, feature_names: Any, decode: Any) -> tuple[str, tuple[str, ...] | None]:
    if show not in SHOWS:
        raise ConfigError("interpret.show", show, f"pass one of {', '.join(map(repr, SHOWS))}")
    if decode is not None and not callable(decode):
        raise ConfigError(
            "interpret.decode", decode, "pass a function of a list of token ids to a str, or None"
        )
    if feature_names is None:
        return show, None
    if isinstance(feature_names, str) or not isinstance(feature_names, Sequence):
        raise ConfigError(
            "interpret.feature_names", feature_names, "pass a list of column names, or None"
        )
    return show, tuple(str(n) for n in feature_names)


def show_for(x: Any, show: str) -> str:
    """The display kind of a batch's inputs (decided on the first batch)."""
    if show != "auto":
        return show
    if not isinstance(x, torch.Tensor):
        return "none"  # an adapter's batch (dict, tuple): ids and labels only
    if not x.is_floating_point() and x.ndim == 2:
        return "tokens"
    if x.ndim == 4 or (x.ndim == 3 and x.is_floating_point()):
        return "image"
    if x.ndim == 2:
        return "table"
    return "none"


@functools.cache
def _default_names(n: int) -> tuple[str, ...]:
    return tuple(f"x{i}" for i in range(n))


def _floats(t: torch.Tensor) -> list[float]:
    # five decimals are plenty to draw and keep the JSON small; one tensor op, not a
    # Python round per value (a cell of 28x28 images holds thousands)
    return (t.reshape(-1).double() * 1e5).round().div(1e5).tolist()


def display_of(
    row: Any,
    show: str,
    *,
    feature_names: tuple[str, ...] | None,
    decode: Callable[[list[int]], str] | None,
) -> dict[str, Any] | None:
    """One row's display: ``{"kind": "image", "shape": [C, H, W], "values": [...]}``,
    ``{"kind": "table", "names": [...], "values": [...]}``, ``{"kind": "tokens", "ids":
    [...], "text": ...}``, or None (nothing to draw)."""
    if show == "none" or not isinstance(row, torch.Tensor):
        return None
    row = row.detach().cpu()
    if show == "image":
        img = row.float()
        if img.ndim == 2:
            img = img.unsqueeze(0)
        if img.ndim != 3:
            raise ConfigError(
                "interpret.show",
                "image",
                f"a row of shape {list(row.shape)} is not an image (C, H, W) or (H, W); "
                "pass show='table' or 'none'",
            )
        return {"kind": "image", "shape": list(img.shape), "values": _floats(img)}
    if show == "tokens":
        ids = [int(v) for v in row.reshape(-1).tolist()]
        text = decode(ids) if decode is not None else " ".join(map(str, ids))
        return {"kind": "tokens", "ids": ids, "text": str(text)}
    values = _floats(row.float())
    names = list(feature_names) if feature_names else list(_default_names(len(values)))
    if len(names) != len(values):
        raise ConfigError(
            "interpret.feature_names",
            list(feature_names or ()),
            f"the rows have {len(values)} features; pass {len(values)} names",
        )
    return {"kind": "table", "names": names, "values": values}
