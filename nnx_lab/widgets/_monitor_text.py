"""What the monitor shows where no live view is: its one-line summary (``repr``, a
terminal, a notebook on GitHub) and the fallback output a reopened notebook shows once
its kernel is gone (the last picture of the charts and how to bring them back).

A mixin of ``TrainingMonitor`` (``_monitor``).
"""

from __future__ import annotations

import base64
import html
import logging
import math
from collections.abc import Callable
from typing import Any

__all__ = ["MonitorText"]

log = logging.getLogger("nnx_lab.widgets")

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_MAX_PNG_BYTES = 4 * 1024 * 1024
# a run's states past which its summary no longer changes
_ENDED = frozenset({"stopped", "finished", "failed", "interrupted", "skipped"})


class MonitorText:
    """``summary()``, and the fallback output under the live view."""

    # What the text uses of the monitor it is mixed into (TrainingMonitor).
    _lock: Any
    _lanes: list[Any]
    _comparing: bool
    _progress: Any
    model_id: str
    run_id: str
    status: str
    epoch: int
    n_epochs: int
    step: int
    total_steps: int | None
    snapshot_of: str
    _repr_mimebundle_: Callable[..., Any]

    def _init_text(self) -> None:
        self._snapshot_png: bytes | None = None
        self._fallback: Any = None  # the DisplayHandle of the fallback output

    def summary(self) -> str:
        """One line: run, status, epoch, step, the last loss (and non-finite losses);
        for a race or a comparison, each run's name, status and last loss."""
        with self._lock:
            lanes = [lane.info() for lane in self._lanes]
        if lanes:
            kind = "compare" if self._comparing else "race"
            runs = []
            for lane in lanes:
                text = f"{lane['name']} {lane['status']}"
                if lane["loss_nonfinite_since"] is not None:
                    text += f" loss non-finite since step {lane['loss_nonfinite_since']}"
                elif lane["last_loss"] is not None:
                    text += f" loss {lane['last_loss']:.4g}"
                runs.append(text)
            return f"{kind} of {len(lanes)} runs: " + "; ".join(runs)
        parts = [f"run={self.run_id or '-'}", f"status={self.status}"]
        if self.n_epochs:
            parts.append(f"epoch {self.epoch}/{self.n_epochs}")
        elif self.epoch:
            parts.append(f"epoch {self.epoch}")
        if self.total_steps:
            parts.append(f"step {self.step}/{self.total_steps}")
        else:
            parts.append(f"step {self.step}")
        with self._lock:
            last, since = self._progress.last_loss, self._progress.nonfinite_since
        if since is not None:
            parts.append(f"loss non-finite since step {since}")
        elif last is not None and math.isfinite(last):
            parts.append(f"loss {last:.4g}")
        return ", ".join(parts)

    def _on_snapshot_png(self, content: dict[str, Any], buffers: list[Any]) -> None:
        """A picture of the charts from a view, for the notebook's fallback output."""
        if len(buffers) != 1:
            raise ValueError(f"snapshot_png carries {len(buffers)} buffers, expected 1")
        png = bytes(buffers[0])
        if not png.startswith(_PNG_MAGIC) or len(png) > _MAX_PNG_BYTES:
            raise ValueError(
                f"snapshot_png: not a PNG of at most {_MAX_PNG_BYTES} bytes "
                f"({len(png)} bytes); the view sends the charts' picture here"
            )
        with self._lock:
            if content.get("run_id") != self.run_id:
                return  # a picture of a run this monitor no longer shows
            self._snapshot_png = png
            self.snapshot_of = f"{self.run_id}:{content.get('status', '')}"
        self._update_fallback()

    def _ipython_display_(self, **kwargs: Any) -> None:
        """Display the live view, and under it the output a reopened notebook falls back on.

        A saved notebook keeps the widget's output, but the widget's model lives in
        the kernel: after a kernel restart JupyterLab shows "model not found" there.
        The second output (hidden while the live view is shown) holds the last
        picture of the charts and the ``from_run`` call that brings the monitor back.
        """
        from IPython.display import display

        bundle = self._repr_mimebundle_(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, None)
        display(data, raw=True, metadata=metadata)
        handle = display(
            self._fallback_bundle(), raw=True, display_id=f"nnx-monitor-{self.model_id}"
        )
        if handle is not None:
            self._fallback = handle

    def _fallback_bundle(self) -> dict[str, str]:
        """The reopened notebook's output, saying only what it holds: the picture when
        a view sent one (and the run's state it shows), else that there is none; a run
        still going when the output was last written is said to be so."""
        run_id = self.run_id
        summary = self.summary()
        if run_id:
            hint = (
                f'To bring the live monitor back, run <code>TrainingMonitor.from_run("'
                f'{html.escape(run_id)}")</code> (from <code>nnx_lab.widgets</code>).'
            )
            text_hint = f'TrainingMonitor.from_run("{run_id}") brings the live monitor back.'
        else:
            hint = "The live monitor needs its kernel: run this cell again."
            text_hint = hint
        picture = self._snapshot_png is not None
        shown = self.snapshot_of.rpartition(":")[2] if picture else ""
        if picture:
            when = html.escape(shown or "as drawn")
            what = f"A static picture of the charts ({when}), saved with the notebook."
        elif run_id:
            what = "No picture of the charts was saved with this output: only the text below."
        else:
            what = ""
        state = f"TrainingMonitor({summary})"
        if run_id and not self._lanes and self.status not in _ENDED:
            state += (
                f", as this output was last written while the run was {self.status}: "
                "the run's metrics.jsonl holds what followed"
            )
        image = ""
        if picture:
            data = base64.b64encode(self._snapshot_png).decode("ascii")
            image = (
                f'<img src="data:image/png;base64,{data}" alt="TrainingMonitor: '
                f'{html.escape(summary)}" style="max-width: 100%; display: block">'
            )
        lead = f"{what} " if what else ""
        body = (
            f'<div class="nnx-monitor-snapshot">{image}'
            f"<p>{lead}<b>{html.escape(state)}</b>. {hint}</p></div>"
        )
        return {"text/html": body, "text/plain": f"{lead}{state}. {text_hint}"}

    def _update_fallback(self) -> None:
        handle = self._fallback
        if handle is None:
            return
        try:
            handle.update(self._fallback_bundle(), raw=True)
        except Exception:  # no kernel to publish to (a script, a test)
            log.debug("could not update the fallback output", exc_info=True)
