"""The run folder's figures: what callbacks hand the monitor (``show_figure``), kept.

Each ``FigureReady`` becomes ``figures/<name>/<epoch>.<kind>.<ext>`` in the run folder,
written atomically (``nnx_lab.runs.write_figure``), so a reloaded monitor and the runs
panel find them. A run's figures are bounded (``MAX_RUN_FIGURE_BYTES``): past that, a
figure is shown live but not kept, and a warning says so once.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from ...runs import write_figure
from ...runs._figures import MAX_RUN_FIGURE_BYTES
from ..events import FigureReady

__all__ = ["FigureWriter"]


class FigureWriter:
    """A sink that keeps each figure of the stream in the run folder ``run_dir``."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.written = 0
        self._warned = False

    def on_figure_ready(self, event: FigureReady) -> None:
        if write_figure(self.run_dir, event) is not None:
            self.written += 1
        elif not self._warned:
            self._warned = True
            warnings.warn(
                f"the run's figures reached {MAX_RUN_FIGURE_BYTES} bytes: figure "
                f"{event.name!r} of epoch {event.epoch} and later ones are shown, not kept",
                stacklevel=2,
            )
