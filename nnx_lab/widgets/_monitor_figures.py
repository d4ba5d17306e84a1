"""The TrainingMonitor's figures: what a callback hands it per epoch (``show_figure``).

The kernel keeps the list of figures in the synced ``figures`` trait (name, epoch, kind,
size: small) and their bytes here, up to ``HELD_BYTES`` (past that the oldest are dropped
from memory; the run folder still has them). A view asks for the one it shows
(``{"kind": "figure", "view", "name", "epoch"}``) and gets it alone, as one binary buffer
(``{"kind": "figure_data", "to", "name", "epoch", "figure_kind"}``), so a long run's
figures never travel all at once. A run read from its log lists the run folder's
figures (``nnx_lab.runs.list_figures``: file names only) and reads one when it is asked
for; nothing in them runs.
"""

from __future__ import annotations

import logging
import pathlib
from collections import OrderedDict
from typing import Any

from ..engine.events import FigureReady
from ..runs import list_figures, read_figure
from ._base import never_breaks

__all__ = ["FIGURE", "FIGURE_DATA", "HELD_BYTES", "MonitorFigures"]

log = logging.getLogger("nnx_lab.widgets")

FIGURE = "figure"  # view -> kernel: send me this figure
FIGURE_DATA = "figure_data"  # kernel -> the view that asked: the figure's bytes
HELD_BYTES = 64 * 1024 * 1024


class MonitorFigures:
    """Mixed into ``TrainingMonitor`` (which declares the ``figures`` trait)."""

    figures: list[dict[str, Any]]
    _lock: Any
    _run_dir: pathlib.Path | None

    def _init_figures(self) -> None:
        self._figure_bytes: OrderedDict[tuple[str, int], tuple[str, bytes]] = OrderedDict()
        self._figure_meta: dict[tuple[str, int], dict[str, Any]] = {}

    def _clear_figures(self) -> None:
        self._figure_bytes.clear()
        self._figure_meta.clear()
        self.figures = []

    def _publish_figures(self) -> None:
        self.figures = [self._figure_meta[k] for k in sorted(self._figure_meta)]

    @never_breaks("training")
    def on_figure_ready(self, event: FigureReady) -> None:
        key = (event.name, int(event.epoch))
        with self._lock:
            self._figure_bytes.pop(key, None)
            self._figure_bytes[key] = (event.figure_kind, event.data)
            held = sum(len(b) for _, b in self._figure_bytes.values())
            while held > HELD_BYTES and len(self._figure_bytes) > 1:
                old, (_, data) = self._figure_bytes.popitem(last=False)
                held -= len(data)
                if self._run_dir is None:  # no folder to read it back from: gone
                    self._figure_meta.pop(old, None)
            self._figure_meta[key] = {
                "name": event.name,
                "epoch": int(event.epoch),
                "kind": event.figure_kind,
                "bytes": len(event.data),
            }
            self._publish_figures()

    def _scan_figures(self) -> None:
        """The run folder's figures (a run read from its log): listed, not read."""
        if self._run_dir is None:
            return
        entries = list_figures(self._run_dir)
        with self._lock:
            known = {(e.name, e.epoch): e.info() for e in entries}
            if known.keys() - self._figure_meta.keys():
                self._figure_meta.update(known)
                self._publish_figures()

    def _figure_payload(self, name: str, epoch: int) -> tuple[str, bytes] | None:
        with self._lock:
            held = self._figure_bytes.get((name, epoch))
            meta = self._figure_meta.get((name, epoch))
        if held is not None:
            return held
        if meta is None or self._run_dir is None:
            return None
        for entry in list_figures(self._run_dir):
            if entry.name == name and entry.epoch == epoch:
                return entry.kind, read_figure(entry)
        return None

    def _on_figure(self, content: dict[str, Any], buffers: list[Any]) -> None:
        view, name, epoch = content.get("view"), content.get("name"), content.get("epoch")
        if not isinstance(view, str) or not isinstance(name, str) or not isinstance(epoch, int):
            raise ValueError(f"a figure request names a view, a name and an epoch: {content!r}")
        reply: dict[str, Any] = {"kind": FIGURE_DATA, "to": view, "name": name, "epoch": epoch}
        try:
            found = self._figure_payload(name, epoch)
        except (OSError, ValueError) as exc:  # a damaged or vanished file: say so there
            found, reply["error"] = None, str(exc)
        if found is None:
            reply.setdefault("error", f"figure {name!r} of epoch {epoch} is not held")
            self.send(reply, [])  # type: ignore[attr-defined]
            return
        reply["figure_kind"] = found[0]
        self.send(reply, [found[1]])  # type: ignore[attr-defined]
