"""Interpretation: the mistakes a model makes on a split, drawn in the page.

``nnx_lab.interpretation.interpret`` computes everything in the kernel (one streamed
pass); this widget sends its payload once, in one trait, and the page pages through it:
the confusion matrix (counts or row-normalized: the page trait ``normalize``), the
samples of a clicked cell (the page trait ``cell``), the top-losses table, the samples
drawn as images, table rows or text; for regression the residuals-vs-target scatter
and the largest errors. Paging, the toggle and a cell click cost no message to the
kernel and no re-send.
"""

from __future__ import annotations

from typing import Any

import traitlets as t

from ..errors import ConfigError
from ..interpretation import InterpretationResult, interpret
from ._base import NNxWidget

__all__ = ["Interpretation"]


class Interpretation(NNxWidget):
    """``Interpretation(run_or_model, loader, *, split="val", calibrator=None,
    policy=None, page_size=12, **interpret_options)``.

    ``run_or_model`` and ``loader`` and the options are ``interpret``'s (a run is read at
    its BEST checkpoint); an ``InterpretationResult`` may be passed instead, with no
    loader. ``result`` is the computed ``InterpretationResult``."""

    _bundle_name = "interpretation"
    _page_traits = NNxWidget._page_traits | {"normalize", "cell"}

    data = t.Dict(help="The result's payload (InterpretationResult.to_json()), sent once.").tag(
        sync=True
    )
    page_size = t.Int(12, help="Rows per page of each table.").tag(sync=True)
    normalize = t.Bool(False, help="Show the confusion matrix row-normalized.").tag(sync=True)
    cell = t.List(t.Int(), help="The clicked cell [truth, prediction]; [] for none.").tag(sync=True)

    def __init__(
        self,
        run_or_model: Any,
        loader: Any = None,
        *,
        page_size: int = 12,
        max_points: int = 10_000,
        **options: Any,
    ) -> None:
        for name, value, low in (("page_size", page_size, 1), ("max_points", max_points, 2)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"Interpretation.{name}", value, f"pass an integer >= {low}")
        if isinstance(run_or_model, InterpretationResult):
            if loader is not None or options:
                raise ConfigError(
                    "Interpretation.loader",
                    "given with a result",
                    "a result is already computed: pass it alone, or a model and a loader",
                )
            result = run_or_model
        else:
            if loader is None:
                raise ConfigError(
                    "Interpretation.loader", None, "pass the split's loader of (x, y) batches"
                )
            result = interpret(run_or_model, loader, **options)  # refusals before a widget
        super().__init__(page_size=page_size)
        self._result = result
        self.data = result.to_json(max_points=max_points)

    @property
    def result(self) -> InterpretationResult:
        return self._result

    @t.validate("cell")
    def _check_cell(self, proposal: dict[str, Any]) -> list[int]:
        cell = list(proposal["value"])
        k = len(self.data.get("labels", ())) if self.data else 0
        if cell and (len(cell) != 2 or not all(0 <= c < k for c in cell)):
            raise t.TraitError(f"cell={cell} is invalid: pick [truth, prediction] in [0, {k})")
        return cell

    def summary(self) -> str:
        return self._result.summary()
