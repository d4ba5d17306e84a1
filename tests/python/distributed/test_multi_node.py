"""Several nodes, for real on one machine: two launches (``nnodes=2``, ``node_rank`` 0
and 1, one process each, a c10d rendezvous on 127.0.0.1) train one run that rank 0
writes, equal to the one-node two-process run: the same run id, the same weights, the
same logged losses."""

from __future__ import annotations

import json
import socket

import launch_factories as lf
import pytest
import torch

from nnx_lab import ExperimentPlan, NNCheckpoint, NNParams, NNTrainParams, RunStatus
from nnx_lab.distributed import launch
from nnx_lab.plans import set_config_report


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    before = set_config_report(False)
    yield
    set_config_report(before)


def _plan(root):
    return (
        ExperimentPlan()
        .with_net(NNParams(input_dim=8, output_dim=3, hidden_dims=[16]))
        .with_train(NNTrainParams(n_epochs=2))
        .with_data(lf.make_train_loader, val=lf.make_val_loader, identity="two-nodes")
        .with_seed(4)
        .with_runs_root(root)
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _logged(run_dir):
    """Every step's and every epoch's logged losses."""
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [(r["step"], r["loss"]) for r in lines if r.get("event") == "step"]
    epochs = [
        (r["epoch"], r["train"]["loss"], r["val"]["loss"])
        for r in lines
        if r.get("event") == "epoch_ended"
    ]
    return steps, epochs


def test_two_nodes_of_one_process_train_the_run_of_one_node_with_two(tmp_path):
    endpoint = f"127.0.0.1:{_free_port()}"
    nodes = [
        launch(
            _plan(tmp_path / "shared"),
            1,
            nnodes=2,
            node_rank=rank,
            rdzv_endpoint=endpoint,
            rdzv_id="two-nodes-test",
        )
        for rank in (0, 1)
    ]
    runs = [node.wait(timeout=240) for node in nodes]
    assert [node.status for node in nodes] == ["finished", "finished"]
    assert [node.returncode for node in nodes] == [0, 0]
    assert runs[0].status is RunStatus.FINISHED
    assert runs[1].id == runs[0].id  # node 1's handle follows the same run folder
    # global rank 0 lives on node 0 and wrote the run; node 1 wrote none of it
    assert (nodes[0].folder / "run.json").is_file()
    assert not (nodes[1].folder / "run.json").is_file()
    assert sorted(p.name for p in nodes[1].folder.glob("rank*.log")) == ["rank1.log"]

    one = launch(_plan(tmp_path / "one"), 2)
    single = one.wait(timeout=240)
    assert single.id == runs[0].id == nodes[0].run_id
    a, b = NNCheckpoint.load(runs[0]).model_state, NNCheckpoint.load(single).model_state
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    two_nodes, one_node = _logged(runs[0].run_dir), _logged(single.run_dir)
    assert len(two_nodes[0]) == 16
    assert len(two_nodes[1]) == 2
    assert two_nodes == one_node  # every logged loss, to the bit
