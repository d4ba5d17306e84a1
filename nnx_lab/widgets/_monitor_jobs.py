"""The monitor's jobs: a model, a plan or a race of plans and ``TrainJob``s trained in
a background thread (``fit``, ``fit_plan``, ``race``), and waiting for them.

A mixin of ``TrainingMonitor`` (``_monitor``): the training itself is the engine's
(``NNModel.train``, ``ExperimentPlan.fit``); the monitor is one of its sinks and keeps
the thread (``_jobs.BackgroundJob``), so the kernel stays free to serve the Stop button.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from ..errors import FieldError, NNxError
from ..runs import check_run_name
from ._jobs import BackgroundJob, format_exception
from ._race import MAX_LANES, RaceLane

__all__ = ["MonitorJobs"]

log = logging.getLogger("nnx_lab.widgets")

_M = TypeVar("_M", bound="MonitorJobs")


def _check_plan(plan: Any, where: str, job: str = "") -> None:
    from ..plans import ExperimentPlan  # no torch

    if not isinstance(plan, ExperimentPlan):
        raise TypeError(f"{where}: {plan!r} is not an ExperimentPlan{job}; pass one")


def _named_plans(
    plans: Mapping[str, Any] | Iterable[Any], callbacks: Iterable[Any] = ()
) -> list[tuple[str, Any]]:
    """``(name, plan or TrainJob)`` pairs, every entry checked before anything starts:
    a plan by ``validate()``, a job by the engine's own pre-run checks (the ones
    ``train`` makes before its run directory exists). Every problem of every entry is
    listed in one ``PlanError``."""
    if isinstance(plans, Mapping):
        items = [(str(name), plan) for name, plan in plans.items()]
    else:
        items = [(f"run {i}", plan) for i, plan in enumerate(plans, start=1)]
    if not items:
        raise ValueError("race() needs at least one plan")
    if len(items) > MAX_LANES:
        raise ValueError(
            f"race() got {len(items)} plans; at most {MAX_LANES} are drawn at once (one "
            "colour each): race fewer"
        )
    from ..engine.train_job import TrainJob  # torch: importing the widgets loads none
    from ..plans import PlanError, Problem

    problems, first_job_error = [], None
    run_ids: dict[str, str] = {}  # a job's run id -> its name
    for name, entry in items:
        if isinstance(entry, TrainJob):
            try:
                run_id = entry.check(callbacks).pre.run_id
            except NNxError as exc:
                first_job_error = first_job_error or exc
                problems.append(_job_problem(Problem, name, exc))
                continue
            first = run_ids.setdefault(run_id, name)
            if first != name:  # the second would find (or overwrite) the first's run
                fix = f"it is {first!r}'s run too: pass one of them salt= (or change it)"
                problems.append(Problem(f"{name}: run id", run_id, fix))
            continue
        _check_plan(entry, f"race(): {name!r}", " nor an nnx_lab.TrainJob")
        problems += [Problem(f"{name}: {p.field}", p.value, p.fix) for p in entry.validate()]
    problems += _shared_objects(Problem, items)
    if problems:
        raise PlanError(problems) from first_job_error
    return items


def _job_problem(problem: Any, name: str, exc: Exception) -> Any:
    """A job's refusal as a race problem: the field it names, else its whole message."""
    if isinstance(exc, FieldError):
        return problem(f"{name}: {exc.field}", exc.value, exc.fix)
    return problem(name, type(exc).__name__, str(exc))


def _shared_objects(problem: Any, items: list[tuple[str, Any]]) -> list[Any]:
    """Two jobs sharing a model, a Trainer (or a step with its generator) would not
    train what each trains alone: the second would go on from the first's weights,
    optimizers or draws. One problem per pair of jobs (a shared Trainer shares its
    model too: the first shared object, the Trainer, is named)."""
    from ..engine.train_job import TrainJob

    owners: dict[int, str] = {}
    found, pairs = [], set()
    for name, entry in items:
        for obj in entry.owned if isinstance(entry, TrainJob) else ():
            first = owners.setdefault(id(obj), name)
            if first != name and (first, name) not in pairs:
                pairs.add((first, name))
                found.append(
                    problem(
                        f"{name}: TrainJob",
                        type(obj).__name__,
                        f"it is {first!r}'s too, so this run would go on from that run's "
                        "state: build one model (one Trainer) and one step per job (call "
                        "the factory once per job)",
                    )
                )
    return found


def _run_name(plan: Any, branch: str) -> str | None:
    """The name a race gives a plan's run: the branch's ("high lr"), after the plan's
    own name when it has another ("baseline · high lr"); a name too long to keep is
    the branch's alone."""
    return _name_after(plan.value("train.name"), branch)


def _name_after(own: str | None, branch: str) -> str | None:
    """``_run_name`` for any run's own name (a job's ``NNTrainParams.name``)."""
    candidates = [branch] if own in (None, branch) else [f"{own} · {branch}", branch]
    for text in candidates:
        try:
            return check_run_name(text)
        except ValueError:
            continue
    return own


def _run_entry(
    entry: Any, branch: str | None, lane: RaceLane, extra: list[Any], fit_kwargs: dict[str, Any]
) -> Any:
    """Fit a plan (its ``FitResult``) or train a job (its ``NNRun``), named ``branch``."""
    from ..engine.train_job import TrainJob

    if isinstance(entry, TrainJob):
        job = entry
        if branch is not None:
            job = entry.renamed(_name_after(entry.params.name, branch))
        return job.run([lane, *extra])
    kwargs = fit_kwargs
    if branch is not None and "name" not in fit_kwargs:
        kwargs = {**fit_kwargs, "name": _run_name(entry, branch)}
    return entry.fit(callbacks=[lane, *extra], **kwargs)


class MonitorJobs:
    """``fit``, ``fit_plan``, ``race``, ``wait``, ``run``, ``results``: see each."""

    # What the jobs use of the monitor they are mixed into (TrainingMonitor.__init__,
    # the traits, the lanes' and the state's methods).
    _lock: Any
    _transport: Any
    _lanes: list[RaceLane]
    _follower: Any
    _log_path: Any
    _comparing: bool
    _finished: bool
    _stop_pending: str | None
    run_id: str
    error: str
    status: str
    can_stop: bool
    hold_sync: Callable[[], Any]
    _reset_run_state: Callable[[], None]
    _clear_lanes: Callable[[], None]
    _new_lane: Callable[..., RaceLane]
    _lane_changed: Callable[[], None]
    _update_fallback: Callable[[], None]

    def _init_jobs(self) -> None:
        self._job: BackgroundJob | None = None
        self._race_halt: str | None = None
        self._results: dict[str, Any] = {}
        self._race_errors: dict[str, BaseException] = {}

    def fit(
        self: _M, model: Any, params: Any, *, callbacks: Iterable[Any] = (), **train_kwargs: Any
    ) -> _M:
        """Train ``model`` in a background thread and return at once (returns ``self``).

        Runs ``model.train(params=params, callbacks=[self, *callbacks], **train_kwargs)``.
        ``stop()`` or the Stop button ends it after the current step; ``wait()`` gives
        the ``NNRun`` (or re-raises the training error); ``run`` is the ``NNRun`` once
        done.
        """
        sinks = [self, *callbacks]

        def target() -> Any:
            return model.train(params=params, callbacks=sinks, **train_kwargs)

        self._start(target, "nnx-monitor-fit")
        return self

    def _start(
        self, target: Callable[[], Any], name: str, lanes: Iterable[str] = ()
    ) -> list[RaceLane]:
        """Start ``target`` in the background thread; ``lanes`` names a race's runs."""
        with self._lock:
            if self._job is not None and self._job.is_alive():
                raise RuntimeError(
                    f"this monitor is already training (run {self.run_id or 'starting'}); "
                    f"call stop() or wait() first, or use another TrainingMonitor"
                )
            if self._log_path is not None or self._comparing:
                raise RuntimeError(
                    "this monitor shows runs from their logs (from_run / compare); create "
                    "a new TrainingMonitor() to train"
                )
            self._reset_run_state()
            self._clear_lanes()
            made = [self._new_lane(lane, forward=True) for lane in lanes]
            self._transport.flush()
            self._stop_pending = None
            self._race_halt = None
            self._results, self._race_errors = {}, {}
            self._job = BackgroundJob(target, name=name, on_error=self._on_training_error)
            self._job.start()
        return made

    def _on_training_error(self, exc: BaseException) -> None:
        with self._lock:
            with self.hold_sync():
                if not self.error:  # RunFinished may already have brought it
                    self.error = format_exception(exc)
                self.status = "failed"
                self.can_stop = False
            self._finished = True
            self._transport.flush()
            self._update_fallback()

    @property
    def run(self) -> Any:
        """The ``NNRun`` of the last ``fit`` or ``fit_plan``, once it has ended; else
        ``None`` (also after a ``race``: see ``results``)."""
        job = self._job
        if job is None or job.is_alive() or self._lanes:
            return None
        result = job.result
        return getattr(result, "run", result)  # fit_plan's FitResult holds it

    def wait(self, timeout: float | None = None) -> Any:
        """Wait for the ``fit`` run; return its ``NNRun`` or re-raise its exception.

        Raises ``TimeoutError`` when it is still running after ``timeout`` seconds.
        Without a ``fit`` (a blocking ``train`` or ``from_run``) it returns ``None``
        at once, unless it follows a log: then it waits for the run to finish.
        """
        job = self._job
        if job is None:
            follower = self._follower
            if follower is not None and not follower.join(timeout):
                raise TimeoutError(f"run {self.run_id} still being written after {timeout}s")
            return None
        if not job.join(timeout):
            raise TimeoutError(
                f"training still running after {timeout}s; call wait() again or stop()"
            )
        if job.exception is not None:
            raise job.exception
        return job.result

    # ------------------------------------------------------------------ plans and races

    def fit_plan(self: _M, plan: Any, *, callbacks: Iterable[Any] = (), **fit_kwargs: Any) -> _M:
        """Fit an ``ExperimentPlan`` in a background thread and return at once.

        Runs ``plan.fit(callbacks=[self, *callbacks], report=False, **fit_kwargs)``
        (``report=True`` prints the binding report as a plain fit does). Stop and
        ``wait()`` work as for ``fit``; ``wait()`` returns the ``FitResult``.
        """
        _check_plan(plan, "fit_plan(plan)")
        fit_kwargs.setdefault("report", False)
        sinks = [self, *callbacks]

        def target() -> Any:
            return plan.fit(callbacks=sinks, **fit_kwargs)

        self._start(target, "nnx-monitor-fit")
        return self

    def race(
        self: _M,
        plans: Mapping[str, Any] | Iterable[Any],
        *,
        callbacks: Iterable[Any] = (),
        **fit_kwargs: Any,
    ) -> _M:
        """Fit several ``ExperimentPlan``s (or train ``TrainJob``s) one after another,
        drawn on top of each other.

        ``plans`` maps names to plans or jobs (or is a list of them, named "run 1",
        ...). A ``nnx_lab.TrainJob(model, params, train_step_fn=..., ...)`` is a
        ``model.train`` call written down, for what a plan cannot hold (a custom step
        such as Mixup's); ``TrainJob(trainer, trainer_params, trainer_step_fn=...)`` a
        multi-optimizer ``Trainer.train`` call (its lane draws each optimizer's lr).
        Each run gets a colour and a legend entry: its loss per step
        and its per-epoch metric, and its own status (queued, running, finished,
        stopped, failed, skipped). The header and Stop follow the run that trains; Stop
        ends it and skips the runs still queued. Every entry is checked before the
        first starts (a plan by ``validate()``, a job by the checks ``train`` makes
        before its run directory exists; two jobs sharing a model, a Trainer or a
        step are refused): a refusal is one ``PlanError`` listing every problem, and starts
        nothing. A run that fails is shown under the widget and the race goes on.
        ``wait()`` returns ``{name: FitResult}`` for plans and ``{name: NNRun}`` for
        jobs, of the runs that ended (``results`` holds them too); ``fit_kwargs`` go to
        the plans' ``fit`` only. The runs are fitted one after another, never in
        parallel threads: a run seeds the process-wide random streams, so parallel
        runs would change each other's randomness (and on a 2-core machine they were
        not faster: see ``benchmarks/race.py``).
        """
        extra = list(callbacks)
        items = _named_plans(plans, extra)
        named = isinstance(plans, Mapping)  # names the user gave ("high lr"), not "run 1"
        fit_kwargs.setdefault("report", False)

        def target() -> dict[str, Any]:
            with self._lock:
                lanes = list(self._lanes)  # made by _start before this thread began
            for lane, (name, plan) in zip(lanes, items, strict=True):
                with self._lock:
                    halt = self._race_halt
                if halt is not None:
                    lane.skip(f"not started: {halt}")
                    continue
                try:
                    result = _run_entry(plan, name if named else None, lane, extra, fit_kwargs)
                except Exception as exc:  # shown under the widget; the race goes on
                    log.info("race run %r failed: %s", name, exc)
                    with self._lock:
                        self._race_errors[name] = exc
                    if lane.status not in ("failed", "stopped"):
                        lane.fail(exc)
                    else:
                        self._lane_changed()
                    continue
                lane.result = result
                with self._lock:
                    self._results[name] = result
            with self._lock:
                self._stop_pending = None
                return dict(self._results)

        self._start(target, "nnx-monitor-race", [name for name, _ in items])
        return self

    @property
    def results(self) -> dict[str, Any]:
        """``{name: FitResult}`` of the race's runs that have ended (finished or stopped)."""
        with self._lock:
            return dict(self._results)

    @property
    def race_errors(self) -> dict[str, BaseException]:
        """``{name: exception}`` of the race's runs that failed."""
        with self._lock:
            return dict(self._race_errors)
