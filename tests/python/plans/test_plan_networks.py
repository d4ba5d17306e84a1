"""A plan builds Nets.FEED_FWD from its net.* fields; a network it cannot build (a spec
with no factory registered here, a built-in network given no params) is refused by
validate() (before any fit or process) with the fix. What plans do build is in
test_plan_model_spec.py."""

from __future__ import annotations

import pytest
from plan_factories import NET, toy_plan

from nnx_lab import ModelSpec, Nets, NNModelParams, PlanError


@pytest.mark.parametrize("net", [ModelSpec("acme.encoder", 1), Nets.CONV, Nets.TRANSFORMER])
def test_a_plan_refuses_a_network_it_does_not_build(tmp_path, net):
    plan = toy_plan(tmp_path / "runs", 1).with_model(NNModelParams(net=net))
    problems = {p.field: p.fix for p in plan.validate()}
    fix = problems.pop("model.net")
    assert "register_model_factory" in fix or "plan.with_net(NN" in fix
    # the MLP's net.* fields the toy plan sets do not apply to another network (a spec
    # given to with_model removes them, as with_net(spec) does)
    mlp = {f"net.{name}" for name in NET.to_json()}
    assert set(problems) == (set() if isinstance(net, ModelSpec) else mlp)
    with pytest.raises(PlanError):
        plan.fit()
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_the_feed_forward_plan_is_unchanged(tmp_path):
    assert not toy_plan(tmp_path / "runs", 1).validate()
