"""The figures a callback hands the monitor, per epoch, and how a run folder keeps them.

A figure is data, never code: a PNG's bytes, a plotly figure's JSON, or the points of a
scatter. ``figure_event`` checks one before anything happens (name, epoch, kind, size,
what the data is) and names what is wrong and how to fix it. The run folder keeps each
as ``figures/<name>/<epoch>.<kind>.<ext>`` (``png`` or ``json``), written atomically, so
a reloaded monitor or the runs panel lists them by their file names alone and reads one
only when it is shown; reading checks it again (the signature of a PNG, JSON that
parses) and never runs anything.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._atomic import atomic_write_bytes
from ._events import FigureReady

__all__ = [
    "FIGURE_KINDS",
    "MAX_FIGURE_BYTES",
    "MAX_RUN_FIGURE_BYTES",
    "MAX_SCATTER_POINTS",
    "FigureEntry",
    "figure_event",
    "list_figures",
    "read_figure",
    "write_figure",
]

FIGURE_KINDS = ("png", "plotly", "scatter")
MAX_FIGURE_BYTES = 4 * 1024 * 1024  # one figure: a large PNG, a plotly figure of 100k points
MAX_RUN_FIGURE_BYTES = 256 * 1024 * 1024  # a run folder's figures, all epochs together
MAX_SCATTER_POINTS = 50_000
FIGURES_DIR = "figures"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_PNG = b"\x89PNG\r\n\x1a\n"
_EXT = {"png": "png", "plotly": "plotly.json", "scatter": "scatter.json"}
_FILE = re.compile(r"(\d{1,9})\.(png|plotly\.json|scatter\.json)")


def _plain(value: Any) -> Any:
    """Arrays (numpy, torch) as lists, without importing either."""
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else value


def _points(data: Any) -> dict[str, list]:
    if isinstance(data, dict):
        if "x" not in data or "y" not in data:
            raise ValueError(
                f"a scatter figure is {{'x': [...], 'y': [...]}} (optional 'group'); got keys "
                f"{sorted(map(str, data))}"
            )
        x, y = list(_plain(data["x"])), list(_plain(data["y"]))
        group = data.get("group")
        group = None if group is None else [str(g) for g in _plain(group)]
    else:  # an (n, 2) array of points
        rows = _plain(data)
        if not isinstance(rows, list) or any(
            not isinstance(r, list | tuple) or len(r) != 2 for r in rows
        ):
            raise ValueError(
                "a scatter figure is {'x': [...], 'y': [...]} or an (n, 2) array of points"
            )
        x, y, group = [r[0] for r in rows], [r[1] for r in rows], None
    if len(x) != len(y) or (group is not None and len(group) != len(x)):
        raise ValueError(
            f"a scatter figure's x, y (and group) have one value per point: got {len(x)} x, "
            f"{len(y)} y" + ("" if group is None else f", {len(group)} group")
        )
    if len(x) > MAX_SCATTER_POINTS:
        raise ValueError(
            f"a scatter figure has {len(x)} points, more than {MAX_SCATTER_POINTS}: pass a sample"
        )
    out: dict[str, list] = {}
    for axis, values in (("x", x), ("y", y)):
        try:
            numbers = [float(v) for v in values]
        except (TypeError, ValueError):
            raise ValueError(f"a scatter figure's {axis} values are numbers") from None
        # a point with a non-finite coordinate has no place on the axes: it is a gap
        out[axis] = [v if math.isfinite(v) else None for v in numbers]
    if group is not None:
        out["group"] = group
    return out


def _plotly_json(data: Any) -> bytes:
    to_json = getattr(data, "to_json", None)  # a plotly Figure: its own JSON
    if callable(to_json) and not isinstance(data, dict | str | bytes):
        data = to_json()
    if isinstance(data, bytes | str):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise ValueError(f"a plotly figure's JSON does not parse: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("data", []), list):
        raise ValueError(
            "a plotly figure is a plotly Figure, its to_json() text or its dict "
            "({'data': [...], 'layout': {...}})"
        )
    return json.dumps(data, allow_nan=False, default=_plain).encode()


def figure_event(name: Any, epoch: Any, kind: Any, data: Any) -> FigureReady:
    """A checked ``FigureReady``, or a ``ValueError`` naming the field, the value and the fix."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"figure name={name!r} is not a name: pass 1 to 64 letters, digits, '_', '.' or "
            f"'-', starting with a letter or digit (e.g. 'samples')"
        )
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"figure epoch={epoch!r} is not an epoch: pass an integer >= 0")
    if kind not in FIGURE_KINDS:
        raise ValueError(f"figure kind={kind!r} is not one of {list(FIGURE_KINDS)}")
    if kind == "png":
        if not isinstance(data, bytes | bytearray | memoryview):
            raise ValueError(
                f"a png figure's data is the PNG's bytes, not a {type(data).__name__} "
                "(e.g. fig.savefig(buf, format='png'); buf.getvalue())"
            )
        raw = bytes(data)
        if not raw.startswith(_PNG):
            raise ValueError("a png figure's data does not start with the PNG signature")
    elif kind == "plotly":
        raw = _plotly_json(data)
    else:
        try:
            raw = json.dumps(_points(data), allow_nan=False).encode()
        except TypeError as exc:
            raise ValueError(f"a scatter figure's values are numbers: {exc}") from None
    if len(raw) > MAX_FIGURE_BYTES:
        raise ValueError(
            f"figure {name!r} is {len(raw)} bytes, more than {MAX_FIGURE_BYTES}: pass a "
            "smaller picture or fewer points"
        )
    return FigureReady(name=name, epoch=epoch, figure_kind=kind, data=raw)


@dataclass(frozen=True)
class FigureEntry:
    """One figure of a run folder, known from its file name and size alone."""

    name: str
    epoch: int
    kind: str
    path: Path
    bytes: int

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "epoch": self.epoch, "kind": self.kind, "bytes": self.bytes}


def figure_path(run_dir: Path, name: str, epoch: int, kind: str) -> Path:
    return Path(run_dir) / FIGURES_DIR / name / f"{epoch:06d}.{_EXT[kind]}"


def list_figures(run_dir: str | Path) -> list[FigureEntry]:
    """The run folder's figures, by name then epoch; files that are not figures are left out."""
    root = Path(run_dir) / FIGURES_DIR
    out: list[FigureEntry] = []
    if not root.is_dir() or root.is_symlink():
        return out
    for folder in sorted(root.iterdir()):
        if folder.is_symlink() or not folder.is_dir() or not _NAME.fullmatch(folder.name):
            continue
        for file in sorted(folder.iterdir()):
            m = _FILE.fullmatch(file.name)
            if m is None or file.is_symlink() or not file.is_file():
                continue
            kind = {"png": "png", "plotly.json": "plotly", "scatter.json": "scatter"}[m[2]]
            out.append(FigureEntry(folder.name, int(m[1]), kind, file, file.stat().st_size))
    return out


def read_figure(entry: FigureEntry) -> bytes:
    """A listed figure's bytes, checked as what its name says it is (``ValueError`` else)."""
    if entry.bytes > MAX_FIGURE_BYTES:
        raise ValueError(f"{entry.path}: {entry.bytes} bytes, more than {MAX_FIGURE_BYTES}")
    raw = entry.path.read_bytes()[: MAX_FIGURE_BYTES + 1]
    if len(raw) > MAX_FIGURE_BYTES:
        raise ValueError(f"{entry.path}: more than {MAX_FIGURE_BYTES} bytes")
    if entry.kind == "png":
        if not raw.startswith(_PNG):
            raise ValueError(f"{entry.path}: not a PNG (no PNG signature)")
    else:
        try:
            json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"{entry.path}: not JSON ({exc})") from None
    return raw


def write_figure(run_dir: str | Path, event: FigureReady) -> Path | None:
    """Keep one figure in the run folder, atomically (the same name and epoch again:
    replaced). None when the run folder's figures would pass ``MAX_RUN_FIGURE_BYTES``."""
    path = figure_path(Path(run_dir), event.name, event.epoch, event.figure_kind)
    held = sum(e.bytes for e in list_figures(run_dir) if e.path != path)
    if held + len(event.data) > MAX_RUN_FIGURE_BYTES:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    for other in path.parent.glob(f"{event.epoch:06d}.*"):  # another kind, same epoch
        if other != path and _FILE.fullmatch(other.name):
            other.unlink(missing_ok=True)
    atomic_write_bytes(path, event.data)
    return path
