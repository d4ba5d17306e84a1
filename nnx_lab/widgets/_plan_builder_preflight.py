"""The PlanBuilder's Pre-flight button: ``plan.preflight()`` on the form's plan, its
report as the ``preflight`` trait (one row per check: pass, or the named problem and
its fix). The builder computes nothing: ``nnx_lab.preflight`` does, writing nothing.
The checks run in the kernel (seconds on a notebook's model), so the click waits."""

from __future__ import annotations

from typing import Any

import traitlets as t

__all__ = ["PlanBuilderPreflight"]


class PlanBuilderPreflight(t.HasTraits):
    preflight_report = t.Dict(
        {}, help="The last pre-flight's report (PreflightReport.to_json()); {}: none yet."
    ).tag(sync=True)

    plan: Any

    def preflight(self, **kwargs: Any) -> Any:
        """``plan.preflight(**kwargs)`` on the current plan; the report is shown below
        the form and returned."""
        report = self.plan.preflight(**kwargs)
        self.preflight_report = report.to_json()
        return report

    def _on_preflight(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self._run_action(self.preflight, takes_form="Pre-flight")  # type: ignore[attr-defined]
