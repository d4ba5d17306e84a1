"""torchrun's arguments are checked before torchrun starts, as the docs promise: each
refusal names the argument, its value and the fix, and no process, launch folder or
run folder exists afterwards."""

from __future__ import annotations

import os
import re

import launch_factories as lf
import pytest

from nnx_lab import ConfigError, ExperimentPlan, NNParams, NNTrainParams, launch
from nnx_lab.distributed import _launch
from nnx_lab.distributed._launch_args import machine_capacity
from nnx_lab.plans import set_config_report

CPUS = machine_capacity()[0]


@pytest.fixture(autouse=True)
def _no_process(monkeypatch):
    """A refused launch never reaches the point where torchrun would be started."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(_launch, "_spawn", refuse)
    before = set_config_report(False)
    yield
    set_config_report(before)


def _plan(root):
    return (
        ExperimentPlan()
        .with_net(NNParams(input_dim=8, output_dim=3, hidden_dims=[16]))
        .with_train(NNTrainParams(n_epochs=1))
        .with_data(lf.make_train_loader, identity="args")
        .with_seed(1)
        .with_runs_root(root)
    )


REFUSED = [
    # (kwargs, field, what the fix says)
    ({"nproc_per_node": 10**6}, "nproc_per_node", f"this machine has {CPUS} "),
    ({"nproc_per_node": CPUS + 1}, "nproc_per_node", f"pass at most {CPUS}"),
    ({"nproc_per_node": 0}, "nproc_per_node", "integer >= 1"),
    ({"nproc_per_node": 2.0}, "nproc_per_node", "integer >= 1"),
    ({"nproc_per_node": True}, "nproc_per_node", "integer >= 1"),
    ({"nnodes": 0}, "nnodes", "integer >= 1"),
    ({"nnodes": 2, "node_rank": 2, "rdzv_endpoint": "h:29400"}, "node_rank", "0 to 1"),
    ({"nnodes": 3, "node_rank": 7, "rdzv_endpoint": "h:29400"}, "node_rank", "0 to 2"),
    ({"node_rank": 1}, "node_rank", "0 to 0"),
    ({"node_rank": -1}, "node_rank", "integer >= 0"),
    ({"nnodes": 2}, "rdzv_endpoint", "several nodes meet at an endpoint"),
    ({"nnodes": 2, "rdzv_endpoint": "node0"}, "rdzv_endpoint", "'host:port'"),
    ({"nnodes": 2, "rdzv_endpoint": "node0:"}, "rdzv_endpoint", "'host:port'"),
    ({"nnodes": 2, "rdzv_endpoint": ":29400"}, "rdzv_endpoint", "'host:port'"),
    ({"nnodes": 2, "rdzv_endpoint": "node0:0"}, "rdzv_endpoint", "'host:port'"),
    ({"nnodes": 2, "rdzv_endpoint": "node0:70000"}, "rdzv_endpoint", "'host:port'"),
    ({"nnodes": 2, "rdzv_endpoint": "a b:29400"}, "rdzv_endpoint", "'host:port'"),
    ({"nnodes": 2, "rdzv_endpoint": "h:29400 --x"}, "rdzv_endpoint", "'host:port'"),
    ({"nnodes": 2, "rdzv_endpoint": 29400}, "rdzv_endpoint", "'host:port'"),
    ({"nnodes": 2, "rdzv_endpoint": "h:1", "rdzv_id": "a/b"}, "rdzv_id", "letters, digits"),
    ({"nnodes": 2, "rdzv_endpoint": "h:1", "master_port": 5}, "master_port", "rdzv_endpoint"),
    ({"rdzv_endpoint": "h:29400"}, "rdzv_endpoint", "one node meets itself"),
    ({"rdzv_id": "exp"}, "rdzv_id", "one node meets itself"),
    ({"master_port": 0}, "master_port", "1 to 65535"),
    ({"master_port": 65536}, "master_port", "1 to 65535"),
    ({"env": {"A": 1}}, "env", "dict of str to str"),
    ({"env": "A=1"}, "env", "dict of str to str"),
]


@pytest.mark.parametrize(("kwargs", "field", "fix"), REFUSED, ids=[str(r[0]) for r in REFUSED])
def test_a_refused_argument_starts_nothing_and_names_the_field_the_value_and_the_fix(
    runs_root, kwargs, field, fix
):
    kwargs = {"nproc_per_node": 1, **kwargs}
    with pytest.raises(ConfigError) as refused:
        launch(_plan(runs_root), monitor=False, **kwargs)
    err = refused.value
    assert err.field == field
    assert err.value == kwargs.get(field, err.value)
    assert fix in err.fix
    assert str(err).startswith(f"{field}=")
    assert not runs_root.exists()  # no launch folder, no run folder


def test_well_formed_endpoints_are_accepted(runs_root):
    from nnx_lab.distributed._launch_args import check_endpoint

    for endpoint in ("127.0.0.1:29400", "node0.cluster:1", "[::1]:29400", "h-1.x:65535"):
        assert check_endpoint(endpoint) == endpoint


def test_the_capacity_is_this_machines(monkeypatch):
    count, what = machine_capacity()
    assert count == len(os.sched_getaffinity(0))
    assert re.search("CPUs", what)
