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
import re
import threading
from typing import Any

import traitlets as t
from anywidget import WidgetTrait

from ..errors import ConfigError
from ..plans import ExperimentPlan, PlanError, Problems
from ..runs import effective_status, read_record, resolve_runs_root, run_dir
from ._base import NNxWidget
from ._plan_builder_fit import PlanBuilderFits
from ._plan_builder_preflight import PlanBuilderPreflight
from ._plan_form import (
    PREVIEW_MAX_PARAMETERS,
    branch_rows,
    check_processes,
    field_json,
    form_problems,
    network_parameters,
    parse_text,
    plain,
    problem_json,
    sections_of,
    size_problems,
)
from ._plan_net_form import NetForm, form_fields, net_change, net_form, net_label

__all__ = ["PlanBuilder"]

log = logging.getLogger("nnx_lab.widgets")

_RUN_ID_DELAY_S = 0.25  # a burst of edits computes the run id once
_BRANCH_NAME = re.compile(r"^[\w .,:+=()-]{1,40}$")


class PlanBuilder(PlanBuilderFits, PlanBuilderPreflight, NNxWidget):
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
    this builder runs, since that fit's randomness must not be touched, nor for a
    network above ``PREVIEW_MAX_PARAMETERS`` (its size is read on the ``meta`` device,
    allocating nothing; its run id, which hashes the initial weights, comes at Fit).

    Typed values are refused past each field's bound and the form's own limits (named
    in the refusal; ``PlanField.bound``, docs/plan_widgets.md). While a field shows a
    refused value, Fit, Fit branches and Branch from the page are refused: they would
    use the last valid value, which the form no longer shows.
    """

    _bundle_name = "plan_builder"
    # What the page may set: nothing. Edits and buttons are messages the kernel checks;
    # the kernel owns every trait.
    _page_traits = NNxWidget._page_traits

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
        ("pending", "ready", "blocked", "deferred", "large", "error"),
        default_value="pending",
        help="pending: being computed; ready; blocked: the plan has problems; deferred: "
        "a fit runs; large: the network is too large to build for a preview (the id "
        "comes at Fit); error: computing it failed (run_note says why).",
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
        self._net_memory: dict[str, Any] = {}  # network values by name, across kind swaps
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
        form = net_form(plan.value("model.net"))
        with self.hold_sync():
            self._show_fields(form)
            values = {path: plain(v) for path, v in plan.values().items()}
            set_paths = [f.path for f in plan.fields() if plan.is_set(f.path)]
            if form is not None:  # a spec's config or a built-in network's params
                values = {p: v for p, v in values.items() if not p.startswith("net.")}
                values.update({**plain(form.values), "model.net": form.label})
                set_paths += list(form.values)
            self.values, self.set_paths = values, set_paths
            self.problems = [problem_json(p) for p in problems]
            self.objects = [
                {"what": w, "description": d, "via": v} for w, d, v in plan.binding_report().objects
            ]
            if self._editing is None:  # another plan: what was typed no longer applies
                self.drafts, self.errors = {}, {}
            else:  # and a field another network kind showed is gone with it
                keep = self._index.keys() - {self._editing}
                self.drafts = {k: v for k, v in self.drafts.items() if k in keep}
                self.errors = {k: v for k, v in self.errors.items() if k in keep}
            self._update_branch_list()
        self._request_run_id(plan, problems)

    def _show_fields(self, form: NetForm | None) -> None:
        shown = form_fields(ExperimentPlan.fields(), form)
        self._index = {f.path: f for f in shown}
        out = [field_json(f) for f in shown]
        for f in out:  # the select shows the spec (or the params' member) it holds
            if form is not None and f["path"] == "model.net" and form.label not in f["choices"]:
                f["choices"] = [*f["choices"], form.label]
        if out != self.fields:
            self.fields, self.sections = out, sections_of(shown)

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
            if path == "model.net" and value == net_label(plan.value("model.net")):
                return Problems()  # the spec or params it holds, chosen again
            change = net_change(plan, path, value, self._net_memory)
            edited, problems = change or (None, form_problems(f, value) or plan.check(path, value))
            if not problems and f.section == "net":
                after = edited if edited is not None else plan.with_value(path, value)
                problems = size_problems(path, value, after)
            if problems:
                shown = text if text is not None else json.dumps(plain(value))
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
                self.plan = edited if edited is not None else plan.with_value(path, value)
            finally:
                self._editing = None
            if path in self.drafts or path in self.errors:
                # the last valid value typed again: an equal plan changes no trait, so
                # the refusal it replaces goes here
                with self.hold_sync():
                    self.drafts = {k: v for k, v in self.drafts.items() if k != path}
                    self.errors = {k: v for k, v in self.errors.items() if k != path}
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
        if not plan.resolved:
            # the run id calls the plan's factories: for a plan read from a file that
            # imports the modules it names, which only the user may ask for
            note = (
                "the plan was read from a file and names code it has not imported: "
                "its run id is computed at Fit, or after plan.resolve()"
            )
            self._set_run_id(plan, "", "blocked", note)
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
            size = network_parameters(plan)  # on the meta device: nothing allocated
            if size is not None and size > PREVIEW_MAX_PARAMETERS:
                note = (
                    f"the network has {size:,} parameters: its run id (a hash that "
                    "includes the initial weights) is computed when Fit starts; the "
                    f"preview builds networks of up to {PREVIEW_MAX_PARAMETERS:,}"
                )
                self._set_run_id(plan, "", "large", note)
                return
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
        self.branch_list = branch_rows(self._initial, self._branches, self.plan)

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

    def reset(self) -> ExperimentPlan:
        """Back to the plan the builder started from (branches are kept)."""
        self.plan = self._initial
        return self.plan

    # ------------------------------------------------------------------ buttons

    def _run_action(self, action: Any, *, takes_form: str | None = None) -> None:
        """A button: a refusal is a one-line message under the widget, not a traceback.
        A button that ``takes_form`` (its name) is refused while a field is refused."""
        self.error = ""
        try:
            if takes_form is not None:
                self._refuse_while_refused(takes_form)
            action()
        except (ConfigError, PlanError, FileExistsError, ValueError, KeyError, RuntimeError) as e:
            self.error = f"{type(e).__name__}: {e}"

    def _refuse_while_refused(self, action: str) -> None:
        """While a field shows a refused value the plan holds that field's last valid
        value, which the form no longer shows: a button that takes the form's plan is
        refused (the view disables it too; this covers a click sent before the refusal
        reached the page, and a page that ignores it)."""
        refused = [f"{self._index[p].name.replace('_', ' ')} ({p})" for p in self.errors]
        if self.processes_error:
            refused.append("processes")
        if refused:
            verb = "shows" if len(refused) == 1 else "show"
            raise ValueError(
                f"{action}: {', '.join(refused)} {verb} a refused value, and the plan "
                "still holds the last valid one; fix the field (or Reset) first"
            )

    def _on_fit(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self._run_action(self.fit, takes_form="Fit")

    def _on_fit_branches(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self._run_action(self.fit_branches, takes_form="Fit branches")

    def _on_branch(self, content: dict[str, Any], buffers: list[Any]) -> None:
        self._run_action(lambda: self.branch(content.get("name")), takes_form="Branch")

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
