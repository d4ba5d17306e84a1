"""ModelSummary: a network's module tree as a table you can fold and search.

The engine computes everything (``nnx_lab.engine.model_summary.summarize_model``): the
tree, each layer's type, parameter counts, trainable or frozen, dtype and device; with a
sample batch the output shape of each layer from one no-grad forward on a temporary copy
of the network; the totals and the memory of parameters, gradients and the configured
optimizer's state. This widget holds the result in one synced trait and draws it.

What it adds over a printed summary: subtrees fold and unfold (the folded paths are a
page trait, so a reload keeps them), a search box filters rows by name or type, and with
``live=True`` the trainable / frozen state follows the model: a thread looks at the
parameters' ``requires_grad`` (and dtype, device) once a second and sends a new summary
when they changed (no forward: the shapes are kept). ``refresh()`` recomputes now.
"""

from __future__ import annotations

import threading
from typing import Any

import traitlets as t

from ..engine.model_summary import ModelSummaryData, summarize_model
from ..errors import ConfigError
from ._base import NNxWidget

__all__ = ["ModelSummary"]


def _signature(net: Any) -> tuple[Any, ...]:
    return tuple(
        (name, p.requires_grad, p.dtype, p.device, tuple(p.shape))
        for name, p in net.named_parameters()
    )


class ModelSummary(NNxWidget):
    """``ModelSummary(model, batch=None, *, optim=None, live=True)``.

    ``model``: an ``NNModel`` or an ``nn.Module``. ``batch``: a sample (inputs, an
    ``(X, y)`` batch, or what the model's adapter reads) for the output shapes; the model
    itself is never run (a temporary copy is). ``optim``: the ``NNOptimParams`` whose
    state memory is counted (Adam by default); given, each row also shows the
    fine-tuning rule that matched its parameters, their effective learning rate and
    weight decay, and whether they are frozen (docs/finetuning.md). ``summary_data`` is
    the engine's ``ModelSummaryData`` (``.rows``, ``.totals``, ``.find(text)``,
    ``.text()``, ``.parameters``).
    """

    _bundle_name = "model_summary"
    _page_traits = NNxWidget._page_traits | {"query", "collapsed"}

    data = t.Dict(help="The engine's summary as JSON (ModelSummaryData.to_json()).").tag(sync=True)
    query = t.Unicode("", help="Show only the rows whose path or type holds this text.").tag(
        sync=True
    )
    collapsed = t.List(t.Unicode(), help="The paths whose subtrees are folded.").tag(sync=True)
    version = t.Int(0, help="Counts the summaries computed.").tag(sync=True)

    def __init__(
        self,
        model: Any,
        batch: Any = None,
        *,
        optim: Any = None,
        live: bool = True,
        collapse_below: int | None = 2,
    ) -> None:
        if not isinstance(live, bool):
            raise ConfigError("ModelSummary.live", live, "pass True or False")
        if collapse_below is not None and (
            not isinstance(collapse_below, int) or isinstance(collapse_below, bool)
        ):
            raise ConfigError(
                "ModelSummary.collapse_below", collapse_below, "pass a depth (int) or None"
            )
        data = summarize_model(model, batch, optim=optim)  # refusals before a widget exists
        folded = [
            r.path
            for r in data.rows
            if r.has_children and collapse_below is not None and r.depth >= collapse_below
        ]
        super().__init__(collapsed=folded)
        self._model, self._optim, self._lock = model, optim, threading.RLock()
        self._shapes = {r.path: r.output_shape for r in data.rows}
        self._input_shape, self._notes = data.input_shape, list(data.notes)
        self._net = getattr(model, "net", model)
        self._seen = _signature(self._net)
        self._set(data)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if live:
            self._thread = threading.Thread(target=self._follow, name="nnx-model-summary")
            self._thread.daemon = True
            self._thread.start()

    @property
    def summary_data(self) -> ModelSummaryData:
        return self._data

    def _set(self, data: ModelSummaryData) -> None:
        self._data = data
        self.data = data.to_json()
        self.version += 1

    def refresh(self) -> None:
        """Recompute the counts and states now (the output shapes are kept)."""
        with self._lock:
            data = summarize_model(self._model, None, optim=self._optim)
            for r in data.rows:
                r.output_shape = self._shapes.get(r.path)
            data.input_shape, data.notes = self._input_shape, list(self._notes)
            self._seen = _signature(self._net)
            self._set(data)

    def poll(self) -> bool:
        """Refresh if the parameters' trainable state, dtype or device changed; whether
        it did (what the live thread calls once a second)."""
        if _signature(self._net) == self._seen:
            return False
        self.refresh()
        return True

    def _follow(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.poll()
            except Exception as exc:  # shown under the widget; the thread stops
                self.show_error(exc)
                return

    def close(self) -> None:
        stop = getattr(self, "_stop", None)  # None: refused before it was made
        if stop is not None:
            stop.set()
        super().close()

    def _on_refresh(self, _content: dict[str, Any], _buffers: list[Any]) -> None:
        self.refresh()

    def find(self, text: str) -> list[str]:
        """The paths of the rows whose path or type holds ``text``."""
        return [r.path for r in self._data.find(text)]

    def text(self, max_depth: int | None = None) -> str:
        return self._data.text(max_depth)

    def summary(self) -> str:
        t_ = self._data.totals
        return f"{t_['modules']} modules, {t_['params']:,} parameters ({t_['frozen']:,} frozen)"

    def _repr_notes(self) -> list[str]:
        return [self._data.text(), *super()._repr_notes()]
