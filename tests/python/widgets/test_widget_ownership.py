"""A page cannot set what the kernel owns (issue 20, section 6).

Every synced trait of every widget is the kernel's unless the widget names it in
``_page_traits`` (its inputs). A fake front end sends the ``update`` message a page's
``model.set(...); model.save_changes()`` sends, for each owned trait of each widget: the
kernel keeps its value, sends it back to the page, echoes nothing to the other views,
and shows no error (the refusal is not a validation error). Then the cases the issue
names: a page setting ``PlanBuilder.busy`` no longer freezes the run-id preview at
"deferred", nor ``TrainingMonitor.status`` / ``step`` or the LR finder's ``status``
what the kernel believes.
"""

from __future__ import annotations

import json

import pandas as pd
import plan_factories as pf
import pytest
import torch
import traitlets as t

import nnx_lab.widgets as widgets
from nnx_lab import (
    ExperimentPlan,
    NNModel,
    NNModelParams,
    NNParams,
    NNTabularDataset,
    ProbabilitySpec,
    prediction_from_logits,
)
from nnx_lab.data_splits import SplitManifest
from nnx_lab.widgets import (
    AbstentionExplorer,
    CalibrationExplorer,
    DatasetSummary,
    DriftReport,
    GenerationPlayground,
    Interpretation,
    LRFinderWidget,
    ModelSummary,
    PlanBuilder,
    Sweep,
    TrainingMonitor,
)
from nnx_lab.widgets._base import NNxWidget
from nnx_lab.widgets._testing import FakeFrontend

# What each widget's page writes (js/*/view.js): nothing else is the page's.
PAGE_TRAITS = {
    AbstentionExplorer: {
        "threshold",
        "risk_ceiling",
        "guarantee",
        "use",
        "path",
        "abstained_start",
    },
    CalibrationExplorer: {"temperature", "path"},
    DatasetSummary: set(),
    DriftReport: {"changed_only"},
    Interpretation: {"normalize", "cell"},
    GenerationPlayground: {
        "prompt",
        "temperature",
        "top_k",
        "top_p",
        "seed",
        "n",
        "max_new_tokens",
    },
    LRFinderWidget: {"chosen_lr"},
    ModelSummary: {"query", "collapsed"},
    PlanBuilder: set(),
    Sweep: {"brushes", "selected"},
    TrainingMonitor: {"smoothing"},
}


def plan_for(tmp_path) -> ExperimentPlan:
    return (
        ExperimentPlan()
        .with_net(input_dim=8, output_dim=3, hidden_dims=[16])
        .with_data(pf.make_train_loader, val=pf.make_val_loader, identity="toy")
        .with_epochs(1)
        .with_runs_root(str(tmp_path / "runs"))
    )


def prediction_and_labels():
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (300,), generator=g)
    z = 2.0 * torch.randn(300, 3, generator=g)
    z[torch.arange(300), y] += 2.0
    return prediction_from_logits(z, ProbabilitySpec("categorical")), y


def make(cls, tmp_path):
    if cls is TrainingMonitor:
        return TrainingMonitor()
    if cls is PlanBuilder:
        return PlanBuilder(plan_for(tmp_path), run_id=False)
    if cls is Sweep:  # not started: the traits are what is checked
        return Sweep(plan_for(tmp_path), {"train.optim.max_lr": [1e-3, 1e-2]}, start=False)
    if cls is LRFinderWidget:
        return LRFinderWidget(plan_for(tmp_path), num_iter=10, end_lr=1.0, autostart=False)
    if cls is DriftReport:
        plan = plan_for(tmp_path)
        return DriftReport(plan, plan.with_lr(0.01))
    if cls is Interpretation:
        net = NNModel(NNParams(input_dim=3, output_dim=2, hidden_dims=[4]), NNModelParams())
        return Interpretation(net, (torch.rand(5, 3), torch.tensor([0, 1, 0, 1, 1])))
    if cls is ModelSummary:
        return ModelSummary(torch.nn.Sequential(torch.nn.Linear(3, 2)), live=False)
    if cls is GenerationPlayground:
        from nnx_lab import NNTransformerParams
        from nnx_lab.engine.nets_transformer import TransformerNN
        from nnx_lab.lm_tasks import CharTokenizer

        net = TransformerNN(NNTransformerParams(vocab_size=5, n_layers=1, d_model=8, n_heads=2))
        return GenerationPlayground(net, CharTokenizer("abc"), "ab", max_new_tokens=3)
    if cls is DatasetSummary:
        frame = pd.DataFrame({"id": range(6), "a": [1.0, 2, 3, 4, 5, 6], "y": list("xyxyxy")})
        split = SplitManifest(train=(0, 1, 2, 3), val=(4,), test=(5,))
        return DatasetSummary(NNTabularDataset(frame, ["a"], "y", split=split, id_col="id"))
    prediction, y = prediction_and_labels()
    if cls is CalibrationExplorer:
        return CalibrationExplorer(prediction, y, model_id="m", compute="kernel")
    if cls is AbstentionExplorer:
        return AbstentionExplorer(prediction, y, model_id="m")
    raise AssertionError(cls)


def page_value(widget, name: str):
    """A value of the trait's own type that differs from the kernel's: what a buggy or
    hostile page would plausibly send."""
    trait = widget.traits()[name]
    current = getattr(widget, name)
    if isinstance(trait, t.Enum):
        return next(v for v in trait.values if v != current)
    if isinstance(trait, t.Bool):
        return not current
    if isinstance(trait, t.Int):
        return (current or 0) + 7
    if isinstance(trait, t.Float):
        return (current or 0.0) + 0.25
    if isinstance(trait, t.Unicode):
        return f"{current}set by the page"
    if isinstance(trait, t.List | t.Tuple):
        return [] if current else [{"page": 1}]
    if isinstance(trait, t.Dict):
        return {"page": 1}
    return "IPY_MODEL_" + "f" * 32  # a widget reference (the builder's monitor, a layout)


def owned_cases():
    for cls in PAGE_TRAITS:
        for name in sorted(cls.kernel_owned()):
            yield pytest.param(cls, name, id=f"{cls.__name__}.{name}")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One instance of each widget, shared by the cases (each case restores nothing: a
    refused change leaves nothing to restore)."""
    root = tmp_path_factory.mktemp("owned")
    made = {cls: make(cls, root) for cls in PAGE_TRAITS}
    yield made
    for w in made.values():
        w.close()


def test_every_widget_is_covered_and_declares_what_its_page_sets():
    public = [getattr(widgets, name) for name in widgets.__all__]
    exported = {w for w in public if isinstance(w, type) and issubclass(w, NNxWidget)}
    assert exported == set(PAGE_TRAITS)
    for cls, page in PAGE_TRAITS.items():
        synced = set(cls.class_trait_names(sync=True))
        assert cls._page_traits - {"_view_count"} == page, cls.__name__
        assert page <= synced, cls.__name__
        assert cls.kernel_owned() == synced - page - {"_view_count"}, cls.__name__
    # the cases, by name
    assert {"busy", "run_id", "run_state", "monitor"} <= PlanBuilder.kernel_owned()
    assert {"status", "step", "epoch", "can_stop"} <= TrainingMonitor.kernel_owned()
    assert {"status", "can_stop", "suggested_lr"} <= LRFinderWidget.kernel_owned()
    assert {"_esm", "_css", "error"} <= NNxWidget.kernel_owned()


def state_of(widget) -> str:
    """The widget's whole state, less the explorers' answer counter (every message a page
    sends is answered by bumping ``revision``, a refused one too)."""
    state = {k: v for k, v in widget.get_state().items() if k != "revision"}
    return json.dumps(state, sort_keys=True, default=str)


@pytest.mark.parametrize(("cls", "name"), list(owned_cases()))
def test_a_page_cannot_set_a_trait_the_kernel_owns(built, cls, name):
    widget = built[cls]
    before = state_of(widget)
    fe = FakeFrontend(widget)
    fe.set_traits(**{name: page_value(widget, name)})
    # the kernel kept its value (and every other), and said so to the page
    assert state_of(widget) == before
    sent_back = [u for u in fe.updates if name in u]
    assert sent_back, f"{name}: the kernel's value was not sent back"
    assert sent_back[-1][name] == widget.get_state(name)[name]
    # no other view was told the page's value, and no validation error was shown
    echoes = [m for m, _ in fe.messages if m.get("method") == "echo_update"]
    assert all(name not in m["state"] for m in echoes)
    assert widget.error == ""


def test_a_page_trait_in_the_same_message_still_applies():
    monitor = TrainingMonitor(smoothing=0.5)
    try:
        fe = FakeFrontend(monitor)
        fe.set_traits(smoothing=0.7, status="finished", step=10**6)
        assert monitor.smoothing == 0.7
        assert (monitor.status, monitor.step) == ("created", 0)
        back = {k: v for u in fe.updates for k, v in u.items()}
        assert (back["status"], back["step"]) == ("created", 0)
        echoed = [m["state"] for m, _ in fe.messages if m.get("method") == "echo_update"]
        assert echoed == [{"smoothing": 0.7}]
    finally:
        monitor.close()


def test_a_page_setting_busy_does_not_freeze_the_run_id_preview(tmp_path):
    builder = PlanBuilder(plan_for(tmp_path))
    try:
        fe = FakeFrontend(builder)
        fe.set_traits(busy="fit")
        assert builder.busy == ""
        assert fe.updates[-1] == {"busy": ""}
        # the preview goes on: an edit gets its run id, never "deferred"
        builder.set_value("train.optim.max_lr", 0.02)
        run_id = builder.refresh_run_id()
        assert builder.run_state == "ready", builder.run_note
        assert run_id == builder.plan.expected_run_id()
    finally:
        builder.close()


def test_a_page_cannot_say_the_run_or_the_sweep_ended(tmp_path):
    monitor = TrainingMonitor()
    finder = LRFinderWidget(plan_for(tmp_path), num_iter=10, end_lr=1.0, autostart=False)
    try:
        fm, ff = FakeFrontend(monitor), FakeFrontend(finder)
        fm.set_traits(status="running", step=500)
        ff.set_traits(status="finished")
        assert (monitor.status, monitor.step) == ("created", 0)
        assert finder.status == "created"
        assert repr(monitor).startswith("TrainingMonitor(")
        assert "running" not in repr(monitor)
    finally:
        monitor.close()
        finder.close()
