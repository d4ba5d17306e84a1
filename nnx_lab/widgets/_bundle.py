"""Where the built front-end bundle lives, and a clear error when it is missing."""

from __future__ import annotations

import pathlib

from ..errors import NNxError

__all__ = ["STATIC_DIR", "BundleMissingError", "read_asset"]

STATIC_DIR = pathlib.Path(__file__).parent.parent / "static"

_cache: dict[pathlib.Path, tuple[float, str]] = {}


class BundleMissingError(NNxError, FileNotFoundError):
    """The JavaScript bundle of the widgets has not been built."""


def read_asset(name: str) -> str:
    """The text of ``nnx_lab/static/<name>``, re-read when the file changes."""
    path = STATIC_DIR / name
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        raise BundleMissingError(
            f"the widget bundle {path} does not exist: build it with `npm install && "
            f"npm run build` in the repository root, or reinstall with `pip install -e .`"
        ) from None
    cached = _cache.get(path)
    if cached is None or cached[0] != mtime:
        cached = (mtime, path.read_text(encoding="utf-8"))
        _cache[path] = cached
    return cached[1]
