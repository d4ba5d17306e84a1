"""DriftReport: the config-drift report (``nnx_lab.drift_report``) as a live table.

The widget renders what the engine reports: ``drift_report(a, b).to_json()``, side by
side (then / now, or A / B), changed rows highlighted, rows that change the run id
marked, and a "changed only" filter. A side can be anything ``drift_report`` takes (a
plan, a model, a run id, an ``NNRun``, a ``FitResult``) or a widget that holds one, and
then the report follows it:

* a ``PlanBuilder`` (or any widget with a ``plan`` trait): its plan, recomputed at every
  accepted edit;
* a ``TrainingMonitor``: the run it shows, recomputed when that run ends.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any

import traitlets as t

from ..plans import DriftReport as DriftData
from ..plans import drift_report, record_of
from ._base import NNxWidget
from ._jobs import format_exception

__all__ = ["DriftReport"]

log = logging.getLogger("nnx_lab.widgets")

_ENDED = ("finished", "stopped", "failed", "interrupted")


def _is_monitor(obj: Any) -> bool:
    from ._monitor import TrainingMonitor

    return isinstance(obj, TrainingMonitor)


def _holds_plan(obj: Any) -> bool:
    return isinstance(obj, t.HasTraits) and obj.has_trait("plan")


def _describe(obj: Any) -> str:
    if obj is None:
        return "the present"
    if _is_monitor(obj):
        return f"the run of a TrainingMonitor ({obj.run_id[:8] or 'none yet'})"
    if _holds_plan(obj):
        return f"the plan of a {type(obj).__name__} (followed)"
    if isinstance(obj, str):
        return f"run {obj}"
    return type(obj).__name__


class DriftReport(NNxWidget):
    """``drift_report(a, b)`` as a table that follows its sides.

    ``DriftReport(plan)`` compares a plan as built with the present (``b=None``);
    ``DriftReport(run_a, run_b)`` two runs; ``DriftReport(result.run, builder)`` a
    finished run with the plan a ``PlanBuilder`` holds now (recomputed at every edit);
    ``DriftReport(builder, monitor)`` the builder's plan with the run a monitor shows,
    once it ends. ``report`` is the engine's ``DriftReport`` (``.rows``, ``.to_frame()``),
    ``a`` / ``b`` can be reassigned, ``refresh()`` recomputes. A side that cannot be
    compared is shown under the widget and the last report stays.
    """

    _bundle_name = "drift"
    # What the page may set: the changed-only filter. The kernel owns the rest.
    _page_traits = NNxWidget._page_traits | {"changed_only"}

    data = t.Dict(help="The engine's report as JSON (DriftReport.to_json()).").tag(sync=True)
    changed_only = t.Bool(False, help="Show only the rows that differ.").tag(sync=True)
    side_names = t.List(t.Unicode(), help="What each side is, in words.").tag(sync=True)
    waiting = t.Unicode("", help="Why the report waits (a run that has not ended).").tag(sync=True)
    version = t.Int(0, help="Counts the reports computed (the view marks what moved).").tag(
        sync=True
    )

    def __init__(
        self,
        a: Any,
        b: Any = None,
        *,
        changed_only: bool = False,
        runs_root: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(changed_only=bool(changed_only))
        self._lock = threading.RLock()
        self._runs_root = runs_root
        self._a: Any = None
        self._b: Any = None
        self._watched: list[tuple[t.HasTraits, str]] = []
        self._report: DriftData | None = None
        with self._lock:
            self._a, self._b = a, b
            self._watch()
        self.refresh()

    # ------------------------------------------------------------------ sides

    @property
    def a(self) -> Any:
        return self._a

    @a.setter
    def a(self, value: Any) -> None:
        with self._lock:
            self._unwatch()
            self._a = value
            self._watch()
        self.refresh()

    @property
    def b(self) -> Any:
        return self._b

    @b.setter
    def b(self, value: Any) -> None:
        with self._lock:
            self._unwatch()
            self._b = value
            self._watch()
        self.refresh()

    @property
    def report(self) -> DriftData | None:
        """The engine's report last computed (``None`` before the first one)."""
        return self._report

    def _watch(self) -> None:
        for side in (self._a, self._b):
            if _is_monitor(side):
                names = ["status", "run_id"]
            elif _holds_plan(side):
                names = ["plan"]
            else:
                continue
            for name in names:
                side.observe(self._side_changed, names=name)
                self._watched.append((side, name))

    def _unwatch(self) -> None:
        for side, name in self._watched:
            with contextlib.suppress(ValueError):  # already gone
                side.unobserve(self._side_changed, names=name)
        self._watched = []

    def _side_changed(self, change: dict[str, Any]) -> None:
        owner = change["owner"]
        if _is_monitor(owner) and change["name"] == "status" and change["new"] not in _ENDED:
            return  # a run that has not ended: nothing to read yet
        try:
            self.refresh()
        except Exception as exc:  # never into the training thread or the form's edit
            log.exception("refreshing the drift report failed")
            self.show_error(exc)

    def _value(self, side: Any) -> tuple[Any, str]:
        """(what drift_report takes, why it must wait or '')."""
        if _is_monitor(side):
            if not side.run_id:
                return None, "waiting for the monitor's run to start"
            if side.status not in _ENDED:
                return None, f"waiting for run {side.run_id[:8]} to end ({side.status})"
            run_dir = side.run_dir
            if run_dir is None or run_dir.name != side.run_id:
                return side.run_id, ""
            # the run's own folder: the monitor may show a run of another runs root
            return record_of(side.run_id, runs_root=run_dir.parent), ""
        if _holds_plan(side):
            return side.plan, ""
        return side, ""

    # ------------------------------------------------------------------ computing

    def refresh(self) -> DriftData | None:
        """Compute the report again from the sides as they are now."""
        with self._lock:
            a, b = self._a, self._b
            names = [_describe(a), _describe(b)]
            if isinstance(a, DriftData) and b is None:
                report, wait = a, ""
            else:
                (va, wa), (vb, wb) = self._value(a), self._value(b)
                wait = wa or wb
                report = None
                if not wait:
                    try:
                        report = drift_report(va, vb, runs_root=self._runs_root)
                    except Exception as exc:  # shown; the last report stays
                        log.info("drift_report failed: %s", exc)
                        with self.hold_sync():
                            self.side_names = names
                            self.waiting = ""
                            self.error = format_exception(exc)
                        return self._report
            with self.hold_sync():
                self.side_names = names
                self.waiting = wait
                if report is not None:
                    self._report = report
                    self.data = report.to_json()
                    self.version += 1
                    self.error = ""
            return self._report

    # ------------------------------------------------------------------ text, lifecycle

    def summary(self) -> str:
        r = self._report
        if r is None:
            return self.waiting or "no report yet"
        ids = sum(1 for row in r.changed if row.changes_run_id)
        a, b = r.labels
        return (
            f"{a} = {r.sides[0]}; {b} = {r.sides[1]}: {len(r.changed)} of {len(r.rows)} "
            f"rows differ ({ids} change the run id)"
        )

    def close(self) -> None:
        with getattr(self, "_lock", threading.RLock()):
            if hasattr(self, "_watched"):
                self._unwatch()
        super().close()
