"""Fine-tuning rules in a plan: they travel through the plan JSON (strictly checked),
enter the run id, and a rule with no parameter is refused before the run exists."""

from __future__ import annotations

import json

import plan_factories as pf
import pytest

from nnx_lab import ConfigError, ExperimentPlan, NNParamGroupSpec
from nnx_lab.plans import set_config_report
from nnx_lab.runs import PlanSchemaError

RULE = NNParamGroupSpec("layers.0.*", lr_multiplier=0.1, weight_decay=0.0)


@pytest.fixture(autouse=True)
def _quiet():
    before = set_config_report(False)
    yield
    set_config_report(before)


def test_param_groups_round_trip_through_the_plan_json(runs_root):
    base = pf.toy_plan(runs_root, n_epochs=1)
    plan = base.with_optim(param_groups=[RULE])
    data = json.loads(json.dumps(plan.to_json()))
    assert data["values"]["train.optim.param_groups"] == [RULE.to_json()]
    back = ExperimentPlan.from_json(data).resolve()
    assert back == plan
    assert back.expected_run_id() == plan.expected_run_id() != base.expected_run_id()
    _model, params, _ = back.materialize()
    assert params.optim.param_groups == (RULE,)


def test_the_plan_schema_refuses_a_misspelled_rule(runs_root):
    data = pf.toy_plan(runs_root, n_epochs=1).with_optim(param_groups=[RULE]).to_json()
    data["values"]["train.optim.param_groups"][0]["lr_mult"] = 0.1
    with pytest.raises(PlanSchemaError, match="lr_mult"):
        ExperimentPlan.from_json(data)


def test_a_plan_rule_that_matches_nothing_fails_before_the_run(runs_root):
    plan = pf.toy_plan(runs_root, n_epochs=1).with_optim(
        param_groups=[NNParamGroupSpec("encoder.*")]
    )
    with pytest.raises(ConfigError, match="matches no parameter"):
        plan.fit()
    assert not runs_root.exists() or not any(p.is_dir() for p in runs_root.iterdir())


def test_the_plan_builder_takes_the_rules_as_json_text(runs_root):
    from nnx_lab import PlanBuilder

    builder = PlanBuilder(pf.toy_plan(runs_root, n_epochs=1))
    try:
        path = "train.optim.param_groups"
        good = '[{"name_pattern": "layers.0.*", "lr_multiplier": 0.1, "weight_decay": 0.0}]'
        builder._on_edit({"path": path, "text": good}, [])
        _, params, _ = builder.plan.materialize()
        assert params.optim.param_groups == (RULE,)
        bad = '[{"name_pattern": "*", "lr": 1e-3, "lr_multiplier": 2}]'
        problems = builder.set_value(path, json.loads(bad), text=bad)
        assert problems  # refused, shown next to the field; the plan keeps the good rule
        assert "not both" in builder.errors[path]
        assert builder.drafts[path] == bad
        assert builder.plan.materialize()[1].optim.param_groups == (RULE,)
    finally:
        builder.close()
