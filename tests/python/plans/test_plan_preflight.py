"""ExperimentPlan.preflight() and the PlanBuilder's Pre-flight button (issue 28)."""

from __future__ import annotations

from pathlib import Path

from plan_factories import toy_plan

from nnx_lab.widgets import PlanBuilder


def test_a_plan_preflights_the_model_fit_would_build_writing_nothing(tmp_path):
    root = tmp_path / "runs"
    report = toy_plan(root, 2).preflight(checks=["data", "gradients", "overfit"])
    assert [c.name for c in report.checks] == ["data", "gradients", "overfit"]
    assert report.passed, str(report)
    assert not Path(root).exists()


def test_the_builder_button_shows_the_report(tmp_path):
    builder = PlanBuilder(toy_plan(tmp_path / "runs", 2))
    try:
        builder._on_preflight({"kind": "preflight"}, [])
        assert builder.error == ""
        report = builder.preflight_report
        assert [c["name"] for c in report["checks"]] == ["data", "gradients", "overfit", "lr"]
        assert all(
            set(c) == {"name", "passed", "problem", "fix", "details"} for c in report["checks"]
        )
        assert not (tmp_path / "runs").exists()
    finally:
        builder.close()
