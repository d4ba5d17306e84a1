"""The monitor's gradient-health view (``TrainingMonitor(health=True)``, issue 28).

The engine measures (``nnx_lab.HealthProbe``, carried as ``health_probe`` so the run
attaches it); this keeps the ``health`` events, live or replayed from a log, as the
``health`` trait the page draws as a heatmap (tensors x sampled steps, log colours):
bounded at ``MAX_COLUMNS`` sampled steps (past that, every other older one is dropped).
The header names the first problem (non-finite, vanishing, exploding) and its step.
No training logic here, and no torch at import.
"""

from __future__ import annotations

import math
from typing import Any

import traitlets as t

from ._base import never_breaks

__all__ = ["MAX_COLUMNS", "MonitorHealth"]

MAX_COLUMNS = 400
_METRICS = ("grad_norm", "update_ratio", "weight_norm")


class MonitorHealth(t.HasTraits):
    health = t.Dict(
        {}, help="Gradient health: names, modules, steps, one matrix per metric, alerts."
    ).tag(sync=True)

    def _init_health(self, health: Any) -> None:
        self.health_probe: Any = None
        if health is True:
            from ..engine.handlers import HealthProbe  # torch, only when asked for

            self.health_probe = HealthProbe()
        elif health not in (False, None):
            from ..engine.handlers import HealthProbe

            if not isinstance(health, HealthProbe):
                raise ValueError(
                    f"health={health!r} is invalid: pass True, False or a HealthProbe(...)"
                )
            self.health_probe = health
        self._clear_health()

    def _clear_health(self) -> None:
        self._health_cols: list[dict[str, Any]] = []
        self._health_names: list[str] = []
        self._health_alerts: dict[str, dict[str, Any]] = {}
        self.health = {}

    @never_breaks("training")
    def on_health(self, event: Any) -> None:
        with self._lock:  # type: ignore[attr-defined]
            if list(event.names) != self._health_names:
                self._health_cols = []  # another network: start over
                self._health_names = list(event.names)
                self._health_modules = list(event.modules)
            self._health_cols.append(
                {
                    "step": int(event.step),
                    **{m: [_num(v) for v in getattr(event, m)] for m in _METRICS},
                    "dead": {k: _num(v) for k, v in (event.dead or {}).items()},
                }
            )
            if len(self._health_cols) > MAX_COLUMNS:
                old = self._health_cols[: MAX_COLUMNS // 2]
                self._health_cols = old[::2] + self._health_cols[MAX_COLUMNS // 2 :]
            for alert in event.alerts or ():
                self._health_alerts.setdefault(alert["kind"], dict(alert))
            self.health = self.health_payload()

    def health_payload(self) -> dict[str, Any]:
        """What the page draws: ``names``, ``modules``, ``steps``, ``grad_norm`` /
        ``update_ratio`` / ``weight_norm`` (one row per tensor, one column per sampled
        step; None: not measured or not finite), ``dead`` {module: [per step]},
        ``alerts`` (the first of each kind) and ``first`` (the earliest of them)."""
        cols = self._health_cols
        if not cols:
            return {}
        n = len(self._health_names)
        dead_names = sorted({k for c in cols for k in c["dead"]})
        alerts = sorted(self._health_alerts.values(), key=lambda a: a["step"])
        return {
            "names": self._health_names,
            "modules": self._health_modules,
            "steps": [c["step"] for c in cols],
            **{m: [[c[m][i] for c in cols] for i in range(n)] for m in _METRICS},
            "nonfinite": [[c["grad_norm"][i] is None for c in cols] for i in range(n)],
            "dead": {k: [c["dead"].get(k) for c in cols] for k in dead_names},
            "alerts": alerts,
            "first": alerts[0] if alerts else None,
        }


def _num(v: Any) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)
