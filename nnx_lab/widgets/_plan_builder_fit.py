"""What the PlanBuilder's Fit and Fit branches do: the current plan fitted in the
builder's monitor, its branches raced there, or (``processes`` > 1) the plan launched
as that many processes with a monitor of the builder's own following it.

A mixin of ``PlanBuilder`` (``_plan_builder``): the builder trains nothing itself; the
monitor (``TrainingMonitor.fit_plan``, ``race``) and the launcher
(``nnx_lab.distributed.launch``) do.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..plans import ExperimentPlan, Problems
from ._monitor import TrainingMonitor

__all__ = ["PlanBuilderFits"]

log = logging.getLogger("nnx_lab.widgets")


class PlanBuilderFits:
    """``fit``, ``fit_branches``, ``wait``, and ``launched`` (the ``LaunchHandle``)."""

    # What the fits use of the builder they are mixed into (PlanBuilder).
    _lock: Any
    _branches: dict[str, ExperimentPlan]
    _id_plan: ExperimentPlan | None
    plan: ExperimentPlan
    monitor: Any
    launched: Any
    processes: int
    busy: str
    run_id: str
    run_exists: str
    _set_run_id: Callable[..., None]
    _request_run_id: Callable[[ExperimentPlan, Problems], None]

    def _ensure_monitor(self) -> TrainingMonitor:
        """The monitor a fit in the kernel trains in: a new one after a launch (that
        one follows a log and cannot train)."""
        if self.monitor is None or self.launched is not None:
            self.launched = None
            self.monitor = TrainingMonitor()
        return self.monitor

    def fit(self, **fit_kwargs: Any) -> TrainingMonitor:
        """Fit the current plan in the builder's monitor (a background thread, with
        Stop); returns the monitor (``wait()`` gives the ``FitResult``). A plan with
        problems, or whose run exists already, is refused before anything starts.

        With ``processes`` N > 1 the plan is launched instead
        (``nnx_lab.launch(plan, nproc_per_node=N)``): ``builder.launched`` is the
        ``LaunchHandle``, ``builder.monitor`` the monitor following the run (its Stop
        stops every process) and ``wait()`` gives the ``NNRun``. ``fit_kwargs`` apply
        to a fit in the kernel only.
        """
        self._refuse_while_launched()
        plan = self.plan
        plan.validate().raise_for_errors()
        self._refuse_existing(plan, fit_kwargs)
        if self.processes > 1:
            return self._launch(plan, fit_kwargs)
        monitor = self._ensure_monitor()
        monitor.fit_plan(plan, **fit_kwargs)
        self._watch(monitor, "fit")
        return monitor

    def _refuse_while_launched(self) -> None:
        """One run of this builder at a time: a launched one ends first (a fit in the
        kernel is refused by its monitor)."""
        handle = self.launched
        if handle is not None and handle.returncode is None:
            raise RuntimeError(
                f"the launched run {handle.run_id[:12]} is still running: stop it in the "
                "monitor (or builder.launched.stop()), or wait for it (builder.wait())"
            )

    def _launch(self, plan: ExperimentPlan, fit_kwargs: Mapping[str, Any]) -> TrainingMonitor:
        n = self.processes
        monitor = self.monitor
        job = getattr(monitor, "_job", None)
        if job is not None and job.is_alive():
            raise RuntimeError(
                "a fit of this builder is training in the kernel: stop it in the monitor, "
                "or wait for it (builder.wait())"
            )
        if fit_kwargs:
            raise ValueError(
                f"fit({', '.join(sorted(fit_kwargs))}=...) with processes={n}: fit options "
                "apply to a fit in the kernel; put them in the plan, or set processes to 1"
            )
        from ..distributed import launch  # torch and torchrun only when asked for

        # launch() refuses (plan, factories another process cannot import, a batch that
        # does not split, an existing run) before it starts anything
        handle = launch(plan, nproc_per_node=n)
        monitor = TrainingMonitor.for_launch(handle)  # the builder's own, on the handle
        self.launched = handle
        self.monitor = monitor  # the view draws the new monitor in the builder
        self._watch(handle, "launch")
        return monitor

    def fit_branches(self, names: Iterable[str] | None = None, **fit_kwargs: Any) -> Any:
        """Fit the named variants one after another into the builder's monitor, each in
        its own colour (``TrainingMonitor.race``); returns the monitor."""
        with self._lock:
            chosen = list(self._branches) if names is None else list(names)
            if not chosen:
                raise ValueError(
                    "no branches yet: Branch keeps the current plan as a named variant; "
                    "keep two or more, then fit them"
                )
            missing = [n for n in chosen if n not in self._branches]
            if missing:
                raise KeyError(f"no branch named {missing}; branches: {list(self._branches)}")
            plans = {n: self._branches[n] for n in chosen}
        if self.processes > 1:
            raise ValueError(
                f"Fit branches with processes={self.processes}: branches race in the "
                "kernel, one after another; set processes to 1, or load a branch and Fit "
                "it with several processes"
            )
        self._refuse_while_launched()
        monitor = self._ensure_monitor()
        monitor.race(plans, **fit_kwargs)
        self._watch(monitor, "race")
        return monitor

    def _refuse_existing(self, plan: ExperimentPlan, fit_kwargs: Mapping[str, Any]) -> None:
        overwrite = fit_kwargs.get("overwrite_existing", plan.value("train.overwrite_existing"))
        if self._id_plan is plan and self.run_exists and not overwrite:
            raise FileExistsError(
                f"run {self.run_id} exists already ({self.run_exists}); change a value to "
                "make another run, or set train.overwrite_existing (Run settings) to fit "
                "it again"
            )

    def _watch(self, running: Any, kind: str) -> None:
        """While the monitor (or the launched processes) train: busy; afterwards the run
        id (which now exists)."""
        self.busy = kind
        self._set_run_id(self.plan, "", "deferred", "computed when the fit ends")

        def wait() -> None:
            try:
                running.wait()
            except BaseException:  # the monitor shows it
                log.debug("the builder's fit ended with an error", exc_info=True)
            finally:
                self.busy = ""
                plan = self.plan
                self._request_run_id(plan, plan.validate())

        threading.Thread(target=wait, name="nnx-plan-builder-wait", daemon=True).start()

    def wait(self, timeout: float | None = None) -> Any:
        """Wait for the builder's fit or race: its ``FitResult`` or ``{name: FitResult}``;
        for a launched fit (``processes`` > 1) the ``NNRun``."""
        if self.launched is not None:
            return self.launched.wait(timeout)
        if self.monitor is None:
            return None
        return self.monitor.wait(timeout)
