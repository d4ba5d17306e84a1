"""PlanBuilder: a form for an ``ExperimentPlan``, generated from the plan's fields.

The form is made from ``ExperimentPlan.fields()`` (which reads the params dataclasses),
so a field added to a params class appears in it with no other change. Every edit from
the browser is checked with ``plan.check(path, value)`` before it reaches the plan: a
refused value stays in the field as typed, with the problem next to it, and the plan
keeps its last valid state. ``builder.plan`` is a traitlet: setting it from Python
refreshes the form, and an accepted edit sets it (observe it, or ``traitlets.link`` it
to another widget's ``plan``).

The builder fits nothing itself: Fit and Fit branches hand the plan (or the named
variants) to its ``TrainingMonitor`` (``fit_plan``, ``race``), which trains in a
background thread with a Stop button; the monitor is drawn inside the builder. With
``processes`` N > 1, Fit hands the plan to ``nnx_lab.launch(plan, nproc_per_node=N)``
instead, and the monitor drawn in the builder is the one that follows the launched run.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import traitlets as t
from anywidget import WidgetTrait

from ..errors import ConfigError
from ..plans import ExperimentPlan, PlanError, PlanField, Problem, Problems
from ..runs import effective_status, read_record, resolve_runs_root, run_dir
from ._base import NNxWidget
from ._monitor import TrainingMonitor

__all__ = ["PlanBuilder"]

log = logging.getLogger("nnx_lab.widgets")

# Form sections: title, and whether it starts open. A section the plan grows later
# gets its id as title and starts open.
_SECTIONS = {
    "net": ("Network", True),
    "model": ("Model", True),
    "optim": ("Optimizer", True),
    "scheduler": ("Learning-rate scheduler (on plateau)", True),
    "train": ("Training", True),
    "early_stopping": ("Early stopping", True),
    "data": ("Data", True),
    "run": ("Run settings (do not change results)", False),
    "resume": ("Resume", False),
}
_RUN_ID_DELAY_S = 0.25  # a burst of edits computes the run id once
_BRANCH_NAME = re.compile(r"^[\w .,:+=()-]{1,40}$")
# A bound on the processes one Fit starts on this machine: a typo (200 for 2) would
# otherwise start that many workers. Larger or multi-node runs: nnx_lab.launch directly.
MAX_PROCESSES = 64


def check_processes(value: Any) -> int:
    """``value`` as a number of processes, or ``ValueError`` naming the fix."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            raise ValueError(
                f"processes={text!r}: type a whole number, 1 (train in the kernel) or "
                f"2 to {MAX_PROCESSES} (launch that many processes)"
            ) from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"processes={value!r}: pass a whole number, 1 (train in the kernel) or "
            f"2 to {MAX_PROCESSES} (launch that many processes)"
        )
    if not 1 <= value <= MAX_PROCESSES:
        raise ValueError(
            f"processes={value}: pass 1 (train in the kernel) or 2 to {MAX_PROCESSES} "
            "(launch that many processes); for more, or several machines, call "
            "nnx_lab.launch(plan, nproc_per_node=..., nnodes=...)"
        )
    return value


def _label(f: PlanField) -> str:
    return f.name.replace("_", " ")


def field_json(f: PlanField) -> dict[str, Any]:
    """A field as the form draws it (``PlanField.to_json()`` plus a label)."""
    return {**f.to_json(), "label": _label(f)}


def sections_of(fields: Iterable[PlanField]) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for f in fields:
        if f.section not in out:
            title, open_ = _SECTIONS.get(f.section, (f.section.replace("_", " ").title(), True))
            out[f.section] = {"id": f.section, "title": title, "open": open_}
    return list(out.values())


def parse_text(f: PlanField, text: str) -> Any:
    """What the user typed, as the field's type; text that does not parse is passed on
    as it is, so the plan's own check names the problem (one wording for form and code)."""
    s = text.strip()
    if s == "" and f.nullable:
        return None
    try:
        if f.type == "int":
            return int(s)
        if f.type == "float":
            return float(s)
        if f.type == "int_list":
            inner = s.strip("[]() ")
            if not inner:
                return []
            return [int(p) for p in re.split(r"[,\s]+", inner) if p]
        if f.type == "bool":
            lowered = s.lower()
            if lowered in ("true", "1", "yes", "on"):
                return True
            if lowered in ("false", "0", "no", "off"):
                return False
            return text
        if f.type == "any":
            return json.loads(s.replace("(", "[").replace(")", "]"))
    except ValueError:
        return text
    return text


def _plain(value: Any) -> Any:
    """A JSON value the front end can show (a non-finite float as its text)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _problem_json(p: Problem) -> dict[str, Any]:
    return {"field": p.field, "value": _plain(p.to_json()["value"]), "fix": p.fix, "text": str(p)}


class PlanBuilder(NNxWidget):
    """A form for an ``ExperimentPlan``: live validation, the run id, Fit, Branch, Reset.

    ``PlanBuilder(plan)`` starts from ``plan`` (``PlanBuilder()`` from an empty one).
    ``builder.plan`` is the current plan, always one that every accepted edit built; set
    it to show another. ``builder.set_value(path, value)`` is what typing in a field
    does. ``builder.branch(name)`` keeps the current plan as a named variant,
    ``builder.branches`` holds them (``{name: plan}``), ``builder.fit()`` fits the current plan and
    ``builder.fit_branches()`` races the variants in ``builder.monitor``.

    The run id the plan would get is computed in a background thread after edits
    (``plan.expected_run_id()``: it calls the data factories and builds a throwaway
    model under a saved and restored random state); it is not computed while a fit of
    this builder runs, since that fit's randomness must not be touched.
    """

    _bundle_name = "plan_builder"

    plan = t.Instance(ExperimentPlan, help="The current plan (every accepted edit makes one).")
    fields = t.List(t.Dict(), help="The form: every plan field, in form order.").tag(sync=True)
    sections = t.List(t.Dict(), help="Form sections: id, title, open.").tag(sync=True)
    values = t.Dict(help="Every field's value in the current plan (JSON), by path.").tag(sync=True)
    set_paths = t.List(t.Unicode(), help="The paths the plan sets (others: default).").tag(
        sync=True
    )
    drafts = t.Dict(help="Text typed into a field and refused, by path.").tag(sync=True)
    errors = t.Dict(help="Why a field's draft was refused, by path.").tag(sync=True)
    problems = t.List(t.Dict(), help="validate() of the current plan.").tag(sync=True)
    objects = t.List(t.Dict(), help="The plan's data sources and callbacks.").tag(sync=True)
    run_id = t.Unicode("", help="The run id a fit of the plan would get ('' unknown).").tag(
        sync=True
    )
    run_state = t.Enum(
        ("pending", "ready", "blocked", "deferred", "error"),
        default_value="pending",
        help="pending: being computed; ready; blocked: the plan has problems; deferred: "
        "a fit runs; error: computing it failed (run_note says why).",
    ).tag(sync=True)
    run_note = t.Unicode("", help="Why there is no run id, or where the run would go.").tag(
        sync=True
    )
    run_exists = t.Unicode("", help="Status of that run if it exists already, else ''.").tag(
        sync=True
    )
    branch_list = t.List(
        t.Dict(), help="The named variants: name, changes from the start, problems, current."
    ).tag(sync=True)
    busy = t.Unicode(
        "", help="'fit', 'race' or 'launch' while one of this builder's runs trains."
    ).tag(sync=True)
    processes = t.Int(
        1, help="Processes Fit trains with: 1 in the kernel, N > 1 nnx_lab.launch(plan, N)."
    ).tag(sync=True)
    processes_error = t.Unicode("", help="Why the last processes typed was refused.").tag(sync=True)
    monitor = WidgetTrait().tag(sync=True)

    def __init__(self, plan: ExperimentPlan | None = None, *, run_id: bool = True) -> None:
        if plan is None:
            plan = ExperimentPlan()
        if not isinstance(plan, ExperimentPlan):
            raise TypeError(
                f"PlanBuilder(plan): {plan!r} is not an ExperimentPlan; pass one, or nothing "
                "for an empty plan"
            )
        all_fields = ExperimentPlan.fields()
        self._index = {f.path: f for f in all_fields}
        self._initial = plan
        self._branches: dict[str, ExperimentPlan] = {}
        self._lock = threading.RLock()
        self._show_run_id = bool(run_id)
        self._id_timer: threading.Timer | None = None
        self._id_compute = threading.Lock()  # one computation at a time (global RNG)
        self._id_plan: ExperimentPlan | None = None  # the plan run_id belongs to
        self._editing: str | None = None
        self._closed = False
        self.launched: Any = None  # the LaunchHandle of the last Fit with processes > 1
        self._ready = False
        super().__init__(
            fields=[field_json(f) for f in all_fields],
            sections=sections_of(all_fields),
            plan=plan,
        )
        self._ready = True
        self._refresh(plan)

    # ------------------------------------------------------------------ plan <-> form

    @t.observe("plan")
    def _on_plan(self, change: dict[str, Any]) -> None:
        if not getattr(self, "_ready", False):  # __init__ refreshes once it is done
            return
        self._refresh(change["new"])

    def _refresh(self, plan: ExperimentPlan) -> None:
        """The form shows ``plan``: values, problems, objects; the run id follows."""
        problems = plan.validate()
        with self.hold_sync():
            self.values = {path: _plain(v) for path, v in plan.values().items()}
            self.set_paths = [f.path for f in plan.fields() if plan.is_set(f.path)]
            self.problems = [_problem_json(p) for p in problems]
            self.objects = [
                {"what": w, "description": d, "via": v} for w, d, v in plan.binding_report().objects
            ]
            if self._editing is None:  # another plan: what was typed no longer applies
                self.drafts, self.errors = {}, {}
            else:
                self.drafts = {k: v for k, v in self.drafts.items() if k != self._editing}
                self.errors = {k: v for k, v in self.errors.items() if k != self._editing}
            self._update_branch_list()
        self._request_run_id(plan, problems)

    def set_value(self, path: str, value: Any, *, text: str | None = None) -> Problems:
        """Set one field, as typing in the form does: the plan changes only when
        ``plan.check(path, value)`` finds no problem; otherwise the problems are shown
        next to the field (``errors``), the typed ``text`` stays in it (``drafts``)
        and the plan keeps its last valid state. Returns the problems (empty when set).
        """
        f = self._index.get(path)
        if f is None:
            raise ConfigError(
                "PlanBuilder.set_value",
                path,
                "no plan field has this path; check the spelling: builder.fields lists them",
            )
        with self._lock:
            plan = self.plan
            problems = plan.check(path, value)
            if problems:
                shown = text if text is not None else json.dumps(_plain(value))
                with self.hold_sync():
                    self.drafts = {**self.drafts, path: shown}
                    self.errors = {
                        **self.errors,
                        path: "; ".join(
                            str(p) if p.field == path else f"makes {p.field} invalid: {p}"
                            for p in problems
                        ),
                    }
                return problems
            self._editing = path
            try:
                self.plan = plan.with_value(path, value)
            finally:
                self._editing = None
        return problems

    def _on_edit(self, content: dict[str, Any], buffers: list[Any]) -> None:
        """A field of the form changed: ``{path, text}`` (typed) or ``{path, value}``."""
        path = content.get("path")
        f = self._index.get(path) if isinstance(path, str) else None
        if f is None:
            raise ValueError(f"an edit of an unknown field {path!r}; reload the page")
        if "text" in content:
            text = str(content["text"])
            self.set_value(path, parse_text(f, text), text=text)
        else:
            self.set_value(path, content.get("value"))

    # ------------------------------------------------------------------ run id

    def _request_run_id(self, plan: ExperimentPlan, problems: Problems) -> None:
        if not self._show_run_id:
            self._set_run_id(plan, "", "blocked", "run ids are not computed (run_id=False)")
            return
        if problems:
            self._set_run_id(plan, "", "blocked", "fix the problems above to see the run id")
            return
        if self.busy:
            self._set_run_id(plan, "", "deferred", "computed when the fit ends")
            return
        self._set_run_id(plan, self.run_id if self._id_plan is plan else "", "pending", "")
        with self._lock:
            if self._id_timer is not None:
                self._id_timer.cancel()
            if self._closed:
                return
            timer = threading.Timer(_RUN_ID_DELAY_S, self._compute_run_id, args=(plan,))
            timer.daemon = True
            self._id_timer = timer
            timer.start()

    def _compute_run_id(self, plan: ExperimentPlan) -> None:
        with self._id_compute:
            if plan is not self.plan or self.busy or self._closed:
                return  # superseded
            try:
                run_id = plan.expected_run_id()
                root = resolve_runs_root(plan.value("train.runs_root"))
                meta = run_dir(root, run_id) / "metadata.yaml"
                exists = effective_status(read_record(meta)) if meta.is_file() else ""
            except Exception as exc:  # a factory that fails: said next to the run id
                log.info("computing the run id failed: %s", exc)
                self._set_run_id(plan, "", "error", f"{type(exc).__name__}: {exc}")
                return
            where = f"{root}/{run_id}"
            note = f"exists under {root} ({exists})" if exists else f"new: {where}"
            self._set_run_id(plan, run_id, "ready", note, exists)

    def _set_run_id(
        self, plan: ExperimentPlan, run_id: str, state: str, note: str, exists: str = ""
    ) -> None:
        with self._lock:
            if plan is not self.plan:
                return
            self._id_plan = plan
            with self.hold_sync():
                self.run_id = run_id
                self.run_state = state
                self.run_note = note
                self.run_exists = exists

    def refresh_run_id(self, wait: bool = True, timeout: float = 60.0) -> str:
        """Compute the run id of the current plan now; with ``wait`` return it."""
        plan = self.plan
        self._request_run_id(plan, plan.validate())
        if not wait or self.run_state != "pending":
            return self.run_id
        with self._lock:
            timer = self._id_timer
        if timer is not None:
            timer.join(timeout)
        return self.run_id

    # ------------------------------------------------------------------ branches

    @property
    def branches(self) -> dict[str, ExperimentPlan]:
        """The named variants, in the order they were kept (a copy)."""
        with self._lock:
            return dict(self._branches)

    def branch(self, name: str | None = None) -> str:
        """Keep the current plan as a named variant (``"branch 1"``, ... by default);
        returns the name. A name in use is refused: drop that branch first."""
        with self._lock:
            if name is None or not str(name).strip():
                n = len(self._branches) + 1
                while f"branch {n}" in self._branches:
                    n += 1
                name = f"branch {n}"
            name = str(name).strip()
            if not _BRANCH_NAME.match(name):
                raise ValueError(
                    f"branch name {name!r}: use 1 to 40 letters, digits, spaces or "
                    ". , : + = - _ ( )"
                )
            if name in self._branches:
                raise ValueError(
                    f"a branch named {name!r} exists already: pick another name, or drop it "
                    f"first (builder.drop_branch({name!r}))"
                )
            self._branches[name] = self.plan
            self._update_branch_list()
            return name

    def drop_branch(self, name: str) -> None:
        with self._lock:
            if name not in self._branches:
                raise KeyError(f"no branch named {name!r}; branches: {list(self._branches)}")
            del self._branches[name]
            self._update_branch_list()

    def load_branch(self, name: str) -> ExperimentPlan:
        """Show a kept variant in the form (it becomes ``builder.plan``)."""
        with self._lock:
            if name not in self._branches:
                raise KeyError(f"no branch named {name!r}; branches: {list(self._branches)}")
            self.plan = self._branches[name]
            return self.plan

    def _update_branch_list(self) -> None:
        start = self._initial.values()
        current = self.plan
        rows = []
        for name, plan in self._branches.items():
            values = plan.values()
            changes = [
                {"path": p, "value": _plain(v)}
                for p, v in values.items()
                if start.get(p) != v and not p.startswith("train.overwrite")
            ]
            rows.append(
                {
                    "name": name,
                    "changes": changes,
                    "problems": len(plan.validate()),
                    "current": plan == current,
                }
            )
        self.branch_list = rows

    # ------------------------------------------------------------------ fit

    @t.validate("processes")
    def _valid_processes(self, proposal: dict[str, Any]) -> int:
        try:
            return check_processes(proposal["value"])
        except ValueError as exc:
            raise t.TraitError(str(exc)) from None

    @t.observe("processes")
    def _processes_changed(self, change: dict[str, Any]) -> None:
        self.processes_error = ""

    def _on_set_processes(self, content: dict[str, Any], buffers: list[Any]) -> None:
        """The processes box: ``{text}``. A refused text is shown beside the box, and the
        box gets the kept value back."""
        try:
            value = check_processes(str(content.get("text", "")))
        except ValueError as exc:
            self.processes_error = str(exc)
            self.send_state("processes")
            return
        self.processes = value
        self.processes_error = ""

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

    def reset(self) -> ExperimentPlan:
        """Back to the plan the builder started from (branches are kept)."""
        self.plan = self._initial
        return self.plan

    # ------------------------------------------------------------------ buttons

    def _run_action(self, action: Any) -> None:
        """A button: a refusal is a one-line message under the widget, not a traceback."""
        self.error = ""
        try:
            action()
        except (ConfigError, PlanError, FileExistsError, ValueError, KeyError, RuntimeError) as e:
            self.error = f"{type(e).__name__}: {e}"

    def _on_fit(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self._run_action(self.fit)

    def _on_fit_branches(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self._run_action(self.fit_branches)

    def _on_branch(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self._run_action(lambda: self.branch(content.get("name")))

    def _on_load_branch(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self._run_action(lambda: self.load_branch(str(content.get("name"))))

    def _on_drop_branch(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self._run_action(lambda: self.drop_branch(str(content.get("name"))))

    def _on_reset(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self._run_action(self.reset)

    # ------------------------------------------------------------------ text, lifecycle

    def summary(self) -> str:
        p = self.plan
        problems = len(self.problems)
        parts = [repr(p)]
        parts.append(f"{problems} problem{'s' if problems != 1 else ''}" if problems else "valid")
        if self.run_id:
            parts.append(
                f"run {self.run_id[:8]}" + (f" ({self.run_exists})" if self.run_exists else "")
            )
        if self._branches:
            parts.append(f"branches: {', '.join(self._branches)}")
        if self.processes > 1:
            parts.append(f"Fit launches {self.processes} processes")
        return "; ".join(parts)

    def close(self) -> None:
        """Close the form and its monitor (a fit still running goes on without them)."""
        lock = getattr(self, "_lock", None)  # absent if __init__ failed
        if lock is not None:
            with lock:
                self._closed = True
                if self._id_timer is not None:
                    self._id_timer.cancel()
            monitor = self.monitor
            if monitor is not None:
                monitor.close()
        super().close()
