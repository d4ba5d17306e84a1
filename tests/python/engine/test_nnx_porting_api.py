"""Issue 29: the public API a user porting NNx code calls, as NNx spells it (our own
spellings stay beside it)."""

from __future__ import annotations

import random

import engine_factories as f
import numpy as np
import pytest
import torch

import nnx_lab
from nnx_lab import (
    ConfigError,
    Devices,
    Losses,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNRun,
    NNSchedulerParams,
    NNTrainParams,
    NNxError,
    PrecisionPolicy,
    PrecisionUnsupportedError,
    precision_support,
)


def test_devices_give_torch_devices():
    assert Devices.CPU.torch_device() == torch.device("cpu")
    assert Devices.CPU() == torch.device("cpu")
    assert Devices.CUDA.torch_device() == torch.device("cuda")  # present or not, as NNx
    assert Devices.get_torch_device() == Devices.get().torch_device()
    assert Devices("cpu") is Devices.CPU  # the enum's own call is unchanged


def test_losses_members_make_fresh_loss_modules():
    made = {
        Losses.CROSS_ENTROPY: torch.nn.CrossEntropyLoss,
        Losses.NEGATIVE_LOG_LIKELIHOOD: torch.nn.NLLLoss,
        Losses.MEAN_SQUARED_ERROR: torch.nn.MSELoss,
        Losses.BINARY_CROSS_ENTROPY: torch.nn.BCEWithLogitsLoss,
    }
    for member, cls in made.items():
        a, b = member(), member()
        assert type(a) is cls
        assert a is not b
    assert Losses.CROSS_ENTROPY(ignore_index=-1).ignore_index == -1
    # the member itself is still what NNModelParams takes (not a custom loss)
    assert NNModelParams(loss=Losses.CROSS_ENTROPY).loss is Losses.CROSS_ENTROPY


def test_precision_support_takes_a_device_type():
    assert set(precision_support()) == {"cpu", "cuda", "mps"}
    assert precision_support("cpu") == {"cpu": precision_support()["cpu"]}
    assert precision_support(torch.device("cpu")) == precision_support("cpu")
    assert precision_support("xpu") == {
        "xpu": {"fp32": "unverified", "fp16": "unsupported", "bf16": "unsupported"}
    }
    with pytest.raises(RuntimeError):
        precision_support("tpu")  # not a device type at all: torch says so


def test_precision_policy_resolves_on_a_device():
    assert PrecisionPolicy("fp32").resolve("cpu").effective == "fp32"
    assert PrecisionPolicy("bf16").resolve(torch.device("cpu")).effective == "bf16"
    with pytest.raises(ValueError, match="fp16") as caught:  # a ValueError, as in NNx
        PrecisionPolicy("fp16").resolve("cpu")
    assert isinstance(caught.value, PrecisionUnsupportedError)
    assert isinstance(caught.value, RuntimeError)  # and still the RuntimeError it was
    fell = PrecisionPolicy("fp16", fallback="fp32").resolve("cpu")
    assert fell.effective == "fp32"
    assert fell.fallback_reason
    assert PrecisionPolicy("fp16", fallback="error") == PrecisionPolicy("fp16")


def test_accumulate_grad_batches_on_the_optimizer_is_accumulation_steps(runs_root):
    nnx = f.train_params(
        runs_root,
        n_epochs=1,
        optim=NNOptimParams(max_lr=1e-2, accumulate_grad_batches=2),
    )
    ours = f.train_params(runs_root, n_epochs=1, optim=NNOptimParams(max_lr=1e-2))
    ours = ours.replace(accumulation_steps=2)
    assert nnx.accumulation_steps == 2
    assert f.model().expected_run_id(nnx) == f.model().expected_run_id(ours)
    with pytest.raises(ConfigError, match="accumulate_grad_batches"):
        NNOptimParams(accumulate_grad_batches=0)
    with pytest.raises(ConfigError, match="same setting"):
        NNTrainParams(optim=NNOptimParams(accumulate_grad_batches=2), accumulation_steps=3)
    # a plan's fields stay nnx-lab's: the alias is not a second plan field
    assert "train.optim.accumulate_grad_batches" not in {
        x.path for x in nnx_lab.ExperimentPlan.fields()
    }
    plan = nnx_lab.ExperimentPlan().with_optim(NNOptimParams(accumulate_grad_batches=3))
    assert plan.value("train.accumulation_steps") == 3
    assert NNOptimParams(accumulate_grad_batches=3) == NNOptimParams()  # not an optim field


def test_train_salt_gives_another_run_id_and_is_recorded(runs_root):
    params = f.train_params(runs_root, n_epochs=1)
    plain = f.model().train(params)
    salted = f.model().train(params, salt="a")
    assert salted.id != plain.id
    assert salted.salt == "a"
    assert plain.salt is None
    assert NNRun.load(salted.id, runs_root).salt == "a"
    assert f.model().expected_run_id(params, salt="a") == salted.id
    for bad in ("", "  ", 3):
        with pytest.raises(ValueError, match="non-empty string"):
            f.model().train(params, salt=bad)


def test_params_round_trip_through_state():
    objs = [
        NNParams(input_dim=4, output_dim=3, hidden_dims=[8]),
        NNModelParams(loss=Losses.MEAN_SQUARED_ERROR),
        NNOptimParams(max_lr=3e-3, weight_decay=1e-4, grad_clip_norm=1.0),
        NNSchedulerParams(min_lr=1e-7, factor=0.5, patience=3, cooldown=1, threshold=1e-3),
        NNTrainParams(n_epochs=4, seed=7, scheduler=NNSchedulerParams(), accumulation_steps=2),
    ]
    for obj in objs:
        state = obj.state()
        assert isinstance(state, dict)
        assert type(obj).from_state(state) == obj
    with pytest.raises(ConfigError):
        NNParams.from_state("input_dim=4")


def test_nn_run_all_lists_the_runs_and_passes_over_other_entries(runs_root):
    assert NNRun.all(runs_root) == []  # no runs root yet
    a = f.model().train(f.train_params(runs_root, n_epochs=1))
    b = f.model().train(f.train_params(runs_root, n_epochs=2))
    (runs_root / "notes.txt").write_text("not a run")
    (runs_root / "best").symlink_to(runs_root / a.id)
    found = NNRun.all(runs_root)
    assert sorted(r.id for r in found) == sorted([a.id, b.id])
    assert all(isinstance(r, NNRun) for r in found)


def test_set_seed_seeds_every_generator(monkeypatch):
    from nnx_lab import seeding

    monkeypatch.setattr(torch.backends.cudnn, "deterministic", torch.backends.cudnn.deterministic)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", torch.backends.cudnn.benchmark)
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    assert nnx_lab.set_seed is seeding.set_seed
    nnx_lab.set_seed(5)
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    nnx_lab.set_seed(5)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first
    assert torch.backends.cudnn.deterministic is True
    assert torch.backends.cudnn.benchmark is False
    import os

    assert os.environ["PYTHONHASHSEED"] == "5"
    for bad in (-1, 2**32, 1.5, True):
        with pytest.raises(ValueError, match="between 0 and 2\\*\\*32 - 1"):
            nnx_lab.set_seed(bad)
    seeding.dataloader_worker_init_fn(0)
    snap = seeding.env_snapshot()
    assert snap["torch"] == str(torch.__version__)
    assert seeding.env_snapshot() == snap


def test_set_seed_strict_turns_on_deterministic_algorithms(monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", torch.backends.cudnn.deterministic)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", torch.backends.cudnn.benchmark)
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    before = torch.are_deterministic_algorithms_enabled()
    try:
        nnx_lab.set_seed(1, strict=True)
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(before)


def test_nnx_modules_and_error_classes_are_where_nnx_has_them():
    import nnx_lab.abstention
    import nnx_lab.calibration
    import nnx_lab.preprocessing
    import nnx_lab.streaming

    for module in ("calibration", "abstention", "streaming", "seeding"):
        assert module in nnx_lab.__all__
    expected = {
        nnx_lab.calibration.CalibrationError: (ValueError,),
        nnx_lab.calibration.CalibrationFitError: (nnx_lab.calibration.CalibrationError,),
        nnx_lab.calibration.CalibrationMismatchError: (nnx_lab.calibration.CalibrationError,),
        nnx_lab.abstention.AbstentionError: (ValueError,),
        nnx_lab.abstention.AbstentionSchemaError: (nnx_lab.abstention.AbstentionError,),
        nnx_lab.preprocessing.PreprocessingError: (ValueError,),
        nnx_lab.StandardizerError: (nnx_lab.preprocessing.PreprocessingError,),
        nnx_lab.TaskValidationError: (ValueError,),
        nnx_lab.ResumePointError: (ValueError,),
        nnx_lab.PredictionValidationError: (ValueError,),
        nnx_lab.PrecisionUnsupportedError: (ValueError,),
        nnx_lab.PlanError: (ValueError, TypeError),
        nnx_lab.SplitError: (ValueError,),
        nnx_lab.streaming.MetricMergeError: (ValueError,),
        nnx_lab.streaming.StreamClosedError: (RuntimeError,),
    }
    for cls, bases in expected.items():
        assert issubclass(cls, NNxError), cls
        for base in bases:
            assert issubclass(cls, base), (cls, base)


def test_the_raised_errors_are_nnx_classes():
    import nnx_lab.streaming
    from nnx_lab import MetricSpec, StreamingMetrics, TaskSpec

    with pytest.raises(nnx_lab.TaskValidationError):
        TaskSpec.categorical(1)
    a = StreamingMetrics([MetricSpec("accuracy")], "categorical")
    b = StreamingMetrics([MetricSpec("nll")], "categorical")
    with pytest.raises(nnx_lab.streaming.MetricMergeError):
        a.merge(b)
    model = f.model()
    stream = model.iter_predict([(torch.zeros(2, 8), torch.zeros(2).long())])
    with pytest.raises(nnx_lab.streaming.StreamClosedError):
        list(stream)  # read outside its with block


def test_task_spec_categorical_without_n_and_with_labels():
    from nnx_lab import NNModel, TaskSpec, TaskValidationError

    bare = TaskSpec.categorical()
    assert bare.n_outputs is None  # taken from the network
    model = NNModel(NNParams(input_dim=8, output_dim=3), NNModelParams(task=bare))
    assert model.params.task == TaskSpec.categorical(3)
    named = TaskSpec.categorical(labels=("a", "b", "c"))
    assert named.n_outputs == 3
    assert named.probability_spec().labels == ("a", "b", "c")
    assert TaskSpec.from_json(named.to_json()) == named
    assert "labels" not in TaskSpec.categorical(3).to_json()  # run ids without labels unchanged
    with pytest.raises(TaskValidationError, match=r"2 label\(s\) but num_outputs=3"):
        TaskSpec.categorical(3, labels=("a", "b"))
    with pytest.raises(TaskValidationError, match="non-empty strings"):
        TaskSpec.categorical(labels=("a", ""))
    assert TaskSpec.multilabel(labels=("x", "y")).n_outputs == 2
    assert TaskSpec.regression(labels=("price",)).n_outputs == 1
    ds_model = NNModel(
        NNParams(input_dim=8, output_dim=3), NNModelParams(task=named)
    ).predict_proba(torch.randn(2, 8))
    assert list(ds_model.decoded_labels()) == [
        ("a", "b", "c")[i] for i in ds_model.decoded.tolist()
    ]
