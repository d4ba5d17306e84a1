"""A plan builds Nets.FEED_FWD; the other networks and a ModelSpec are refused by
validate() (before any fit or process) with the fix, until plans build them."""

from __future__ import annotations

import pytest
from plan_factories import toy_plan

from nnx_lab import ModelSpec, Nets, NNModelParams, PlanError


@pytest.mark.parametrize("net", [ModelSpec("acme.encoder", 1), Nets.CONV, Nets.TRANSFORMER])
def test_a_plan_refuses_a_network_it_does_not_build(tmp_path, net):
    plan = toy_plan(tmp_path / "runs", 1).with_model(NNModelParams(net=net))
    problems = plan.validate()
    assert [p.field for p in problems] == ["model.net"]
    assert "train it with NNModel directly" in problems[0].fix
    with pytest.raises(PlanError):
        plan.fit()
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_the_feed_forward_plan_is_unchanged(tmp_path):
    assert not toy_plan(tmp_path / "runs", 1).validate()
