"""Sweep: a plan's trials fitted in the background into one TrainingMonitor race, and a
parallel-coordinates chart of them (one line per trial; axes: the swept fields, then
the final metrics) filled in as each trial ends.

The trials are drawn and checked by ``nnx_lab.plans`` (``plan.sweep`` without the
widget); this widget only schedules them: trials whose run already finished are read
from disk, the others go to ``monitor.race`` and a sink here turns each run's last
epoch into its row. Brushing an axis (page trait ``brushes``) and picking lines (page
trait ``selected``) cost no message; Compare and "Branch from the best" are messages.
"""

from __future__ import annotations

import threading
from typing import Any

import traitlets as t
from anywidget import WidgetTrait

from ..errors import ConfigError
from ..plans import ExperimentPlan
from ..plans._problems import json_safe
from ..plans._sweep import (
    SweepResult,
    SweepTrial,
    _read_finished,
    _trial_plan,
    plan_trials,
    sampler_search,
)
from ..plans._sweep_space import Distribution
from ..runs import resolve_runs_root
from ._base import NNxWidget
from ._race import MAX_LANES
from ._sweep_asked import TrialAsker

__all__ = ["Sweep", "passes_brushes"]

_METRICS = ("val.loss", "val.accuracy", "train.loss")
_LANES = MAX_LANES  # TrainingMonitor.race draws at most 12 runs


def passes_brushes(row: dict[str, Any], axes: list[dict[str, Any]], brushes: dict) -> bool:
    """Whether a trial's row lies in every brushed range (a choice axis is brushed in
    choice indices); a row without a value on a brushed axis does not. The page's
    filter (js/sweep/pcoords.js ``passes``) is the same rule."""
    for axis in axes:
        span = brushes.get(axis["key"])
        if not span:
            continue
        v = axis_value(row, axis)
        if v is None or not (span[0] <= v <= span[1]):
            return False
    return True


def axis_value(row: dict[str, Any], axis: dict[str, Any]) -> float | None:
    if axis["kind"] == "value":
        v = row["values"].get(axis["key"])
        if axis["scale"] == "choice":
            return float(axis["choices"].index(v)) if v in axis["choices"] else None
    else:
        v = row["metrics"].get(axis["key"])
    return float(v) if isinstance(v, (int, float)) and v == v else None


class _TrialSink:
    """Fills a trial's row from its run's events, as the race trains it."""

    def __init__(self, widget: Sweep) -> None:
        self.widget, self.trial, self.last = widget, None, None

    def on_run_started(self, event: Any) -> None:
        self.trial = self.widget._by_run.get(event.run_id)
        self.last = None
        if self.trial is not None:
            self.trial.status = "running"
            self.widget._publish()

    def on_epoch_ended(self, event: Any) -> None:
        self.last = event.to_json()

    def on_run_finished(self, event: Any) -> None:
        trial = self.trial
        if trial is None:
            return
        if self.last:
            trial.metrics = {
                split: {k: v for k, v in self.last[split].items() if k != "samples"}
                for split in ("train", "val")
                if self.last.get(split)
            }
        trial.status = event.status
        trial.error = event.error
        self.widget._publish()


class Sweep(NNxWidget):
    """``Sweep(plan, space, n_trials=None, search="grid", seed=0, *, seeds="per_trial",
    objective="val.loss", direction="min", pruner=None, metrics=None, monitor=None,
    builder=None, start=True)``: ``plan.sweep``'s arguments: a grid, a random search or
    an Optuna sampler (``search=`` or ``sampler=``), with an Optuna ``pruner``; an
    Optuna trial's row appears when it is asked for (``_sweep_asked``). ``monitor`` (a
    ``TrainingMonitor``, made if None) races the trials; ``builder`` (a
    ``PlanBuilder``) receives "Branch from the best". ``result`` is the ``SweepResult``
    as far as it has gone."""

    _bundle_name = "sweep"
    _page_traits = NNxWidget._page_traits | {"brushes", "selected"}

    axes = t.List(t.Dict(), help="Swept fields then metrics: key, kind, scale, choices.").tag(
        sync=True
    )
    trials = t.List(t.Dict(), help="One row per trial (SweepTrial.to_json()).").tag(sync=True)
    status = t.Unicode("queued", help="queued, running, finished").tag(sync=True)
    best = t.Int(-1, help="Index of the best finished trial, -1 before one ends.").tag(sync=True)
    objective = t.Unicode("val.loss").tag(sync=True)
    direction = t.Unicode("min").tag(sync=True)
    brushes = t.Dict(help="Page: {axis key: [low, high]} ranges that filter the lines.").tag(
        sync=True
    )
    selected = t.List(t.Int(), help="Page: the trials picked to compare.").tag(sync=True)
    monitor = WidgetTrait().tag(sync=True)
    comparison = WidgetTrait().tag(sync=True)
    has_builder = t.Bool(False).tag(sync=True)

    def __init__(
        self,
        plan: ExperimentPlan,
        space: Any,
        n_trials: int | None = None,
        search: Any = "grid",
        seed: int = 0,
        *,
        seeds: str = "per_trial",
        objective: str = "val.loss",
        direction: str = "min",
        sampler: Any = None,
        pruner: Any = None,
        metrics: list[str] | None = None,
        monitor: Any = None,
        builder: Any = None,
        start: bool = True,
    ) -> None:
        search = sampler_search(search, sampler)
        if direction not in ("min", "max"):
            raise ConfigError("Sweep.direction", direction, "pass 'min' or 'max'")
        if not isinstance(plan, ExperimentPlan):
            raise ConfigError("Sweep.plan", plan, "pass an ExperimentPlan")
        checked, pairs, asker = plan_trials(plan, space, n_trials, search, seed, seeds, pruner)
        from ._monitor import TrainingMonitor

        self._own_monitor = monitor is None
        self._monitor = monitor if monitor is not None else TrainingMonitor()
        self._builder = builder
        self._result = SweepResult([], checked, objective, direction)
        self._asker = None if asker is None else TrialAsker(self, plan, pairs, asker)
        if asker is None:  # an Optuna search's trials are asked for as the race goes
            for i, (values, s) in enumerate(pairs):
                trial = SweepTrial(i, dict(values), s, _trial_plan(plan, values, s))
                self._result.trials.append(trial)
        self._metrics = list(metrics) if metrics is not None else None
        self._by_run: dict[str, SweepTrial] = {}
        self._lock = threading.RLock()
        self._thread: threading.Thread | None = None
        super().__init__(
            monitor=self._monitor,
            objective=objective,
            direction=direction,
            has_builder=builder is not None,
        )
        self._publish()
        if start:
            self.start()

    # ------------------------------------------------------------------ running
    @property
    def result(self) -> SweepResult:
        return self._result

    def start(self) -> Sweep:
        """Run the trials in a background thread (returns at once)."""
        if self._thread is not None:
            raise RuntimeError("this sweep has started already; make a new Sweep")
        self._thread = threading.Thread(target=self._run, name="nnx-sweep", daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> SweepResult:
        """Wait for every trial; the ``SweepResult``."""
        if self._thread is None:
            raise RuntimeError("the sweep has not started: call start()")
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the sweep is still running after {timeout}s")
        return self._result

    def _run(self) -> None:
        try:
            self.status = "running"
            if self._asker is not None:
                self._run_asked()
                return
            pending = []
            for trial in self._result.trials:
                trial.run_id = trial.plan.expected_run_id()
                root = resolve_runs_root(trial.plan.value("train.runs_root"))
                if not _read_finished(trial, root):
                    self._by_run[trial.run_id] = trial
                    pending.append(trial)
                self._publish()
            # a race draws 12 runs at most (one colour each): 12 trials a race, in turn
            for start in range(0, len(pending), _LANES):
                chunk = pending[start : start + _LANES]
                self._monitor.race({t.name: t.plan for t in chunk}, callbacks=[_TrialSink(self)])
                self._monitor.wait()
                errors = self._monitor.race_errors
                halted = False
                for trial in chunk:
                    if trial.name in errors:
                        trial.status = "failed"
                        trial.error = trial.error or str(errors[trial.name])
                    elif trial.status in ("pending", "running"):
                        trial.status, halted = "skipped", True
                    halted = halted or trial.status == "stopped"
                if halted:  # Stop in the monitor ends the sweep, not only this race
                    for trial in pending[start + _LANES :]:
                        trial.status = "skipped"
                    break
        except Exception as exc:  # shown under the widget
            self.show_error(exc)
        finally:
            self._publish()
            self.status = "finished"

    def _run_asked(self) -> None:
        """An Optuna search: races of 12 lanes whose plans are asked for in turn."""
        n = self._asker.sampler.n_trials
        for start in range(0, n, _LANES):
            count = min(_LANES, n - start)
            self._monitor.race(self._asker.plans(start, count), callbacks=[_TrialSink(self)])
            self._monitor.wait()
            if len(self._result.trials) < start + count:  # Stop skipped the rest
                break

    # ------------------------------------------------------------------ display data
    def _axes(self) -> list[dict[str, Any]]:
        axes = []
        for path in self._result.space.paths:
            e = self._result.space.entries[path]
            if isinstance(e, Distribution):
                scale = "log" if e.kind == "loguniform" else "linear"
                axes.append({"key": path, "kind": "value", "scale": scale, "choices": []})
            else:
                choices = [json_safe(c) for c in e]
                axes.append({"key": path, "kind": "value", "scale": "choice", "choices": choices})
        keys = self._metrics
        if keys is None:
            seen = {
                f"{s}.{k}" for tr in self._result.trials for s, m in tr.metrics.items() for k in m
            }
            keys = [self._result.objective] + [
                k for k in _METRICS if k != self._result.objective and k in seen
            ]
        axes += [{"key": k, "kind": "metric", "scale": "linear", "choices": []} for k in keys]
        return axes

    def _publish(self) -> None:
        with self._lock:
            rows = []
            for tr in self._result.trials:
                row = tr.to_json()
                row["metrics"] = {
                    f"{s}.{k}": v for s, m in tr.metrics.items() for k, v in m.items()
                }
                rows.append(row)
            try:
                best = self._result.best().index
            except ConfigError:
                best = -1
            with self.hold_sync():
                self.axes = self._axes()
                self.trials = rows
                self.best = best

    def visible(self) -> list[int]:
        """The trials inside every brushed range, as the chart draws them."""
        return [r["index"] for r in self.trials if passes_brushes(r, self.axes, self.brushes)]

    # ------------------------------------------------------------------ actions
    def compare(self, indices: list[int] | None = None) -> Any:
        """A ``TrainingMonitor.compare`` of the chosen trials' runs (default: the
        selected ones), shown under the chart; returns it."""
        from ._monitor import TrainingMonitor

        picked = self._finished(self.selected if indices is None else indices)
        trials = self._result.trials
        root = trials[picked[0]].plan.value("train.runs_root")
        self.comparison = TrainingMonitor.compare(
            {trials[i].name: trials[i].run_id for i in picked}, runs_root=root
        )
        return self.comparison

    def drift(self, indices: list[int] | None = None) -> Any:
        """The drift report of two chosen trials' runs (default: the two selected):
        what differs between their configurations, shown under the chart; returns the
        ``DriftReport`` widget."""
        from ._drift import DriftReport

        picked = self._finished(self.selected if indices is None else indices)
        if len(picked) != 2:
            raise ConfigError(
                "Sweep.selected", picked, "select exactly two finished trials to compare"
            )
        trials = self._result.trials
        a, b = (trials[i] for i in picked)
        self.comparison = DriftReport(
            a.run_id, b.run_id, changed_only=True, runs_root=a.plan.value("train.runs_root")
        )
        return self.comparison

    def _finished(self, indices: Any) -> list[int]:
        picked = list(indices)
        trials = self._result.trials
        bad = [
            i
            for i in picked
            if not (0 <= i < len(trials))
            or trials[i].status not in ("finished", "reused", "stopped", "pruned")
        ]
        if not picked or bad:
            raise ConfigError(
                "Sweep.selected", bad or picked, "select finished trials (click their lines)"
            )
        return picked

    def branch_from(self, index: int | None = None) -> ExperimentPlan:
        """Put a trial's plan (default: the best) into the linked ``PlanBuilder`` and
        keep it there as a branch named after the trial; returns the plan."""
        if self._builder is None:
            raise ConfigError("Sweep.builder", None, "pass Sweep(..., builder=PlanBuilder())")
        if index is None:
            index = self._result.best().index
        if not (0 <= index < len(self._result.trials)):
            raise ConfigError("Sweep.index", index, f"pick a trial in [0, {len(self.trials)})")
        trial = self._result.trials[index]
        self._builder.plan = trial.plan
        name = f"sweep {trial.name}"
        if name not in self._builder.branches:
            self._builder.branch(name)
        return trial.plan

    def _on_compare(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self.compare()

    def _on_drift(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self.drift()

    def _on_branch(self, content: dict[str, Any], buffers: list[Any]) -> None:
        index = content.get("index")
        self.branch_from(index if isinstance(index, int) and index >= 0 else None)

    def close(self) -> None:
        """Close the widget, its comparison, and the monitor it made (not one passed)."""
        # a Sweep refused in __init__ is closed by ipywidgets' __del__ without its parts
        if hasattr(self, "_thread"):
            if self.comparison is not None:
                self.comparison.close()
            if self._own_monitor and (self._thread is None or not self._thread.is_alive()):
                self._monitor.close()
        super().close()

    def summary(self) -> str:
        done = self._result.done()
        head = f"Sweep: {len(done)} of {len(self._result.trials)} trials done"
        if self.best >= 0:
            b = self._result.trials[self.best]
            head += f"; best {b.name} {self._result.objective}={b.metric(self._result.objective)}"
        return head
