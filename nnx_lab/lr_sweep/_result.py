"""The result of an LR sweep: its curve, the suggestions, and a Plotly figure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["LRFinderResult"]


@dataclass
class LRFinderResult:
    """The sweep: its learning rates, raw and smoothed losses, and the suggestions."""

    lrs: list[float]
    losses: list[float]
    smoothed: list[float]
    suggested_lr: float | None
    rule: str
    suggestions: dict[str, float | None]
    stopped_early: bool
    reason: str | None  # why the sweep ended before num_iter (divergence, NaN, a stop)
    num_iter: int  # asked for
    cycled: bool  # the loader was shorter than num_iter and started over
    mode: str = "exp"
    seconds: float = 0.0
    status: str = "finished"  # "finished" | "stopped"
    _figure: Any = field(default=None, repr=False)

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame({"lr": self.lrs, "loss": self.losses, "smoothed": self.smoothed})

    @property
    def figure(self) -> Any:
        """A Plotly figure: loss against log learning rate, the suggestion marked (built
        on first access; plotly is imported only then)."""
        if self._figure is None:
            self._figure = _figure(self)
        return self._figure

    def __repr__(self) -> str:
        lr = "none" if self.suggested_lr is None else f"{self.suggested_lr:.3g}"
        end = f", stopped early: {self.reason}" if self.stopped_early else ""
        return (
            f"LRFinderResult(suggested_lr={lr} by {self.rule!r}, {len(self.lrs)} of "
            f"{self.num_iter} steps{end})"
        )


def _figure(result: LRFinderResult) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=result.lrs,
            y=result.losses,
            mode="lines",
            name="loss",
            line={"width": 1, "color": "#90a4ae"},
        )
    )
    fig.add_trace(
        go.Scatter(
            x=result.lrs,
            y=result.smoothed,
            mode="lines",
            name="smoothed loss",
            line={"width": 2, "color": "#1976d2"},
        )
    )
    for rule, lr in result.suggestions.items():
        if lr is None:
            continue
        chosen = lr == result.suggested_lr and rule == result.rule
        fig.add_vline(
            x=lr,
            line={
                "dash": "solid" if chosen else "dot",
                "width": 2 if chosen else 1,
                "color": "#e65100" if chosen else "#bdbdbd",
            },
            annotation_text=f"{rule} {lr:.2g}" if chosen else None,
        )
    fig.update_layout(
        xaxis={"type": "log", "title": "learning rate"},
        yaxis={"title": "loss"},
        title="LR finder",
        template="plotly_white",
    )
    return fig
