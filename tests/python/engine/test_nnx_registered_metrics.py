"""NNx's metric registry functions (issue 29): ``register_metric(id, version, factory,
*, input, mode, check_config, replace)`` with NNx's accumulator protocol,
``unregister_metric`` and ``registered_metrics``, through training, ``evaluate``,
``StreamingMetrics``, ``streaming_eval_step`` and a run folder loaded elsewhere."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import ClassVar

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx_lab import (
    ConfigError,
    Losses,
    MetricSpec,
    MonitorSpec,
    NNModel,
    NNModelParams,
    NNParams,
    NNRun,
    NNTrainParams,
    StreamingMetrics,
    TaskSpec,
    register_metric,
    registered_metrics,
    streaming_eval_step,
    unregister_metric,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Accuracy:
    """An accumulator in NNx's protocol: counts right labels (``config["weight"]``
    scales the result, so a test sees that the config arrived)."""

    made: ClassVar[list[Accuracy]] = []

    def __init__(self, config):
        self.config = config
        self.right = self.seen = 0
        Accuracy.made.append(self)

    def update(self, target, prediction):
        assert isinstance(target, np.ndarray)
        assert isinstance(prediction, np.ndarray)
        self.right += int((target == prediction).sum())
        self.seen += len(target)

    def result(self):
        return None if not self.seen else self.config.get("weight", 1.0) * self.right / self.seen


class MeanAbsolute:
    def __init__(self, config):
        self.total, self.count = 0.0, 0

    def update(self, target, prediction):
        self.total += float(np.abs(target - prediction).sum())
        self.count += target.size

    def result(self):
        return None if not self.count else self.total / self.count


@pytest.fixture
def registered():
    """Register the test metrics; remove them afterwards (the registry is per process)."""
    Accuracy.made.clear()
    register_metric("t_acc", 1, Accuracy, input="labels", mode="max")
    register_metric("t_mae", 1, MeanAbsolute, input="continuous", mode="min")
    yield
    for key in [k for k in registered_metrics() if k[0].startswith("t_")]:
        unregister_metric(*key)


def _data(n=90, seed=2):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 5, generator=g)
    y = (X[:, :3] + 0.8 * torch.randn(n, 3, generator=g)).argmax(1)
    return X, y


def _params(root, X, y, **kw):
    base = {
        "n_epochs": 2,
        "seed": 1,
        "train_loader": DataLoader(TensorDataset(X, y), batch_size=16),
        "val_loader": DataLoader(TensorDataset(X, y), batch_size=25),
        "runs_root": str(root),
        "progress": False,
        "checkpoint_every_s": 0,
    }
    return NNTrainParams(**{**base, **kw})


def test_an_accumulator_metric_trains_is_logged_and_equals_its_result(tmp_path, registered):
    X, y = _data()
    model = NNModel(NNParams(input_dim=5, output_dim=3, hidden_dims=[8]), NNModelParams())
    spec = MetricSpec("t_acc", config={"weight": 2.0})
    run = model.train(_params(tmp_path, X, y, metrics=[spec], monitor=MonitorSpec(spec.key)))
    by_hand = 2.0 * float((model.predict(X).logits.argmax(1) == y).double().mean())
    val = run.idps[-1].val_edp
    assert val.metrics[spec.key] == pytest.approx(by_hand, rel=1e-12)
    assert MonitorSpec(spec.key).mode == "max"  # the registered mode
    log = [json.loads(line) for line in (tmp_path / run.id / "metrics.jsonl").open()]
    epochs = [r for r in log if "val" in r and "train" in r]
    assert [spec.key in r["train"]["metrics"] for r in epochs] == [True, True]
    assert epochs[-1]["val"]["metrics"][spec.key] == pytest.approx(by_hand, rel=1e-12)
    # one accumulator per finalized split, each handed the config read-only
    assert Accuracy.made
    assert all(a.config == {"weight": 2.0} for a in Accuracy.made)
    with pytest.raises(TypeError):
        Accuracy.made[0].config["weight"] = 3.0
    again = model.evaluate(DataLoader(TensorDataset(X, y), batch_size=7), [spec])
    assert again.metrics[spec.key] == pytest.approx(by_hand, rel=1e-12)


def test_streaming_metrics_and_streaming_eval_step_read_the_registration(registered):
    g = torch.Generator().manual_seed(5)
    X = torch.randn(40, 4, generator=g)
    y = X[:, :1] * 1.5
    y[3] = math.nan  # a missing target is not handed to the accumulator
    model = NNModel(
        NNParams(input_dim=4, output_dim=1, hidden_dims=[6]),
        NNModelParams(loss=Losses.MEAN_SQUARED_ERROR, task=TaskSpec.regression(1)),
    )
    loader = DataLoader(TensorDataset(X, y), batch_size=12)
    out = model.predict(X).logits.double().reshape(-1)
    keep = ~torch.isnan(y.reshape(-1))
    by_hand = float((out[keep] - y.reshape(-1)[keep].double()).abs().mean())
    got = streaming_eval_step(
        model.net, loader, model.loss_fn, model.task(), metrics=[MetricSpec("t_mae")]
    )
    assert got.metrics["t_mae"] == pytest.approx(by_hand, rel=1e-9)
    assert got.metrics["t_mae"] == pytest.approx(got.metrics["mae"], rel=1e-9)
    stream = StreamingMetrics([MetricSpec("t_mae")], "continuous")
    stream.update(
        torch.tensor([[1.0], [2.0], [math.nan]]), values=torch.tensor([[0.0], [4.0], [9.0]])
    )
    other = StreamingMetrics([MetricSpec("t_mae")], "continuous")
    other.update(torch.tensor([[0.0]]), values=torch.tensor([[3.0]]))
    assert stream.merge(other).finalize().values["t_mae"] == pytest.approx((1 + 2 + 3) / 3)
    empty = StreamingMetrics([MetricSpec("t_mae")], "continuous").finalize()
    assert empty.values["t_mae"] is None  # nothing seen: no value, as NNx's result() None


def test_bernoulli_accumulators_get_the_valid_entries_element_wise(registered):
    """A multilabel batch: each valid (row, output) entry is one sample, as in NNx."""
    register_metric("t_acc_b", 1, Accuracy, input="labels", mode="max")
    register_metric("t_mean_p", 1, MeanAbsolute, input="probabilities", mode="min")
    target = torch.tensor([[1.0, 0.0], [0.0, math.nan], [1.0, 1.0]])
    p = torch.tensor([[0.9, 0.7], [0.2, 0.5], [0.4, 0.8]])
    stream = StreamingMetrics([MetricSpec("t_acc_b"), MetricSpec("t_mean_p")], "bernoulli")
    stream.update(target, probabilities=p)
    values = stream.finalize().values
    valid = ~torch.isnan(target)
    decided = (p >= 0.5).double()
    assert values["t_acc_b"] == pytest.approx(
        float((decided[valid] == target[valid]).double().mean())
    )
    assert values["t_mean_p"] == pytest.approx(float((p[valid] - target[valid]).abs().mean()))


def test_nnx_monitors_module_holds_the_registry_and_the_monitor():
    import nnx_lab.monitors as monitors

    assert monitors.register_metric is register_metric
    assert monitors.MonitorSpec is MonitorSpec
    assert monitors.METRIC_INPUTS == ("labels", "probabilities", "continuous")
    assert isinstance(Accuracy({}), monitors.MetricAccumulator)


def test_registration_is_checked_and_keyed_by_id_and_version(registered):
    assert ("t_acc", 1) in registered_metrics()
    assert ("accuracy", 1) in registered_metrics()
    assert list(registered_metrics()) == sorted(registered_metrics())
    with pytest.raises(ConfigError, match="replace=True"):
        register_metric("t_acc", 1, Accuracy, input="labels", mode="max")
    register_metric("t_acc", 1, MeanAbsolute, input="continuous", mode="min", replace=True)
    assert MetricSpec("t_acc").info.input == "values"  # the replacement is what reads
    register_metric("t_acc", 2, Accuracy, input="labels", mode="max")  # both versions
    v2 = MetricSpec("t_acc", version=2)
    assert (v2.id, v2.version) == ("t_acc", 2)
    assert MetricSpec.from_state(v2.state()) == v2
    for bad, field in [
        ({"input": "values"}, "input"),
        ({"mode": "up"}, "mode"),
        ({"version": 0}, "version"),
        ({"factory": "Accuracy"}, "factory"),
        ({"id": "accuracy"}, "built-in"),
    ]:
        kw = {"id": "t_new", "version": 1, "factory": Accuracy, "input": "labels", "mode": "max"}
        with pytest.raises(ConfigError, match=field):
            register_metric(**{**kw, **bad})
    assert ("t_new", 1) not in registered_metrics()
    assert unregister_metric("t_acc", 2) is True
    assert unregister_metric("t_acc", 2) is False
    with pytest.raises(
        ConfigError,
        match=r"version=2 is invalid: that version is not registered \(registered: \[1\]\)",
    ):
        MetricSpec("t_acc", version=2)
    with pytest.raises(ConfigError, match="built-in"):
        unregister_metric("accuracy", 1)


def test_check_config_refuses_a_spec_before_any_run(tmp_path, registered):
    def check(config):
        weight = config.get("weight", 1.0)
        if isinstance(weight, float) and weight <= 0:
            raise ValueError(f"weight must be > 0, got {config['weight']}")

    register_metric("t_w", 1, Accuracy, input="labels", mode="max", check_config=check)
    with pytest.raises(ValueError, match="weight must be > 0"):
        MetricSpec("t_w", config={"weight": -1.0})
    with pytest.raises(ConfigError, match=r"config\.weight"):
        MetricSpec("t_w", config={"weight": {"nested": 1}})
    assert Accuracy.made == []
    assert not any(tmp_path.iterdir())
    assert MetricSpec("t_w", config={"weight": [1, 2]}).config == {"weight": [1, 2]}


def test_a_run_folder_naming_a_custom_metric_loads_without_it(tmp_path, registered):
    """Files are data: another process reads the run with the metric unregistered,
    and nothing of the metric registry is imported to do it."""
    X, y = _data(n=40)
    model = NNModel(NNParams(input_dim=5, output_dim=3, hidden_dims=[8]), NNModelParams())
    run = model.train(_params(tmp_path, X, y, n_epochs=1, metrics=[MetricSpec("t_acc")]))
    want = run.idps[-1].val_edp.metrics["t_acc"]
    code = (
        "import sys, nnx_lab\n"
        f"run = nnx_lab.NNRun.load({run.id!r}, runs_root={str(tmp_path)!r})\n"
        "print(run.idps[-1].val_edp.metrics['t_acc'])\n"
        "print('nnx_lab.data.metrics' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert float(out[0]) == pytest.approx(want)
    assert out[1] == "False"
    assert NNRun.load(run.id, runs_root=tmp_path).idps[-1].val_edp.metrics["t_acc"] == want


def test_nnx_name_is_the_key_the_value_is_reported_under(tmp_path, registered):
    """NNx's ``MetricSpec(id, config=..., name=...)`` reports under ``name``, through
    training, the log, a plan's JSON and a reload."""
    from nnx_lab import ExperimentPlan

    X, y = _data(n=40)
    model = NNModel(NNParams(input_dim=5, output_dim=3, hidden_dims=[8]), NNModelParams())
    spec = MetricSpec("t_acc", config={"weight": 3.0}, name="acc3")
    assert spec.key == "acc3"
    assert MetricSpec.from_state(spec.state()).key == "acc3"
    assert MetricSpec("t_acc").state() == {"name": "t_acc", "options": {}}  # no label
    monitor_ok = MonitorSpec("acc3", mode="max")
    run = model.train(_params(tmp_path, X, y, n_epochs=1, metrics=[spec], monitor=monitor_ok))
    assert run.epochs[-1]["selection"]["status"] == "improved"
    by_hand = 3.0 * float((model.predict(X).logits.argmax(1) == y).double().mean())
    assert run.idps[-1].val_edp.metrics == {"acc3": pytest.approx(by_hand, rel=1e-12)}
    reloaded = NNRun.load(run.id, runs_root=tmp_path)
    assert reloaded.idps[-1].val_edp.metrics["acc3"] == pytest.approx(by_hand, rel=1e-12)
    with pytest.raises(ConfigError, match="needs mode='min' or 'max'"):
        MonitorSpec("acc3")
    wrong = MonitorSpec("acc3", mode="min")  # t_acc is higher-is-better
    with pytest.raises(ConfigError, match=r"MonitorSpec\.mode='min'.*pass mode='max'"):
        model.train(_params(tmp_path / "wrong", X, y, metrics=[spec], monitor=wrong))
    assert not (tmp_path / "wrong").exists()
    monitor = MonitorSpec("acc3", mode="max", on_missing="error")
    plan = ExperimentPlan().with_train(metrics=[spec], monitor=monitor)
    back = ExperimentPlan.from_json(json.loads(json.dumps(plan.to_json()))).resolve()
    assert [m.key for m in back.value("train.metrics")] == ["acc3"]
    assert back.value("train.monitor") == monitor
