"""``launch`` with a registered factory's network: the workers import the factory the
plan's JSON names (a plan reference, resolved in the worker) and register it before
building; what the workers could not rebuild is refused before any process starts."""

from __future__ import annotations

import json

import model_factories as mf
import pytest
import torch

from nnx_lab import (
    ConfigError,
    ExperimentPlan,
    ModelSpec,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNParams,
    NNTrainParams,
    RunStatus,
    launch,
    register_model_factory,
    unregister_model_factory,
)
from nnx_lab.plans import set_config_report


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    mf.register_small_cnn()
    before = set_config_report(False)
    yield
    set_config_report(before)


def _plan(root, net) -> ExperimentPlan:
    return (
        ExperimentPlan()
        .with_net(net)
        .with_train(NNTrainParams(n_epochs=1))
        .with_data(mf.few_digits_train_loader, val=mf.few_digits_val_loader, identity="few")
        .with_seed(3)
        .with_runs_root(root)
    )


def test_two_processes_train_a_registered_cnn_the_workers_import(runs_root):
    spec = ModelSpec(*mf.CNN_ID, {"width": 4}, seed=1)
    handle = launch(_plan(runs_root, spec), 2, monitor=False)
    run = handle.wait(timeout=180)
    assert run.status is RunStatus.FINISHED
    assert run.id == handle.run_id
    sent = json.loads((handle.folder / "plan.json").read_text())["values"]["model.net"]
    assert sent["factory"] == "model_factories:small_cnn"
    assert sent["config"] == {"width": 4}
    # rank 0's weights rebuild here through the registry, as a spec's checkpoint does
    rebuilt = NNModel.from_checkpoint(NNCheckpoint.load(run))
    assert isinstance(rebuilt.net[0], torch.nn.Conv2d)
    assert rebuilt.params.net == spec


def test_what_the_workers_cannot_rebuild_is_refused_before_any_process(runs_root):
    wrapped = NNModel(module=torch.nn.Linear(64, 10), params=NNModelParams())
    runtime = _plan(runs_root, NNParams(input_dim=64, output_dim=10)).with_model(wrapped.params)
    with pytest.raises(ConfigError, match="register a factory and use ModelSpec"):
        launch(runtime, 2, monitor=False)
    register_model_factory("tests.lambda_cnn", 1, lambda config: mf.small_cnn(config))
    try:
        unnamed = _plan(runs_root, ModelSpec("tests.lambda_cnn", 1))
        with pytest.raises(ConfigError, match="no importable name"):
            launch(unnamed, 2, monitor=False)
    finally:
        unregister_model_factory("tests.lambda_cnn", 1)
    assert not (runs_root / ".launches").exists()
