"""The public surface and lazy imports. The layers themselves are import-linter's
contracts (pyproject.toml, run by the test command as `lint-imports`)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import nnx_lab

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = {
    "NNxError",
    "FieldError",
    "FileError",
    "TrainingStateError",
    "ComponentRestoreError",
    "RunDirectoryError",
    "SplitError",
    "StandardizerError",
    "CalibrationFitError",
    "AbstentionError",
    "RunRecordError",
    "LogDamagedError",
    "PlanError",
    "AbstentionExplorer",
    "Activations",
    "CalibrationExplorer",
    "Callback",
    "CheckpointCorruptError",
    "Checkpoints",
    "ConfigError",
    "DataError",
    "DatasetSummary",
    "Devices",
    "EDP",
    "EarlyStopping",
    "ExperimentPlan",
    "FitResult",
    "IDP",
    "LaunchHandle",
    "LRFinderResult",
    "MetricSpec",
    "MonitorRecord",
    "MonitorSpec",
    "Losses",
    "NNCheckpoint",
    "NNModel",
    "NNModelParams",
    "NNOptimParams",
    "NNParams",
    "NNRun",
    "NNSchedulerParams",
    "NNTabularDataset",
    "NNGraphDataset",
    "graphs",
    "graph_tasks",
    "link_tasks",
    "NNTrainParams",
    "Nets",
    "Optims",
    "PlanBuilder",
    "PrecisionPolicy",
    "PrecisionUnsupportedError",
    "Prediction",
    "PredictionBatch",
    "PredictionResult",
    "PredictionValidationError",
    "ProbabilitySpec",
    "ResumeError",
    "RunStatus",
    "StreamingMetrics",
    "TaskSpec",
    "TrainingControl",
    "TrainingMonitor",
    "TrainingState",
    "__version__",
    "data_splits",
    "distributed",
    "drift_report",
    "events",
    "launch",
    "list_runs",
    "lr_finder",
    "open_in_panel",
    "request_stop",
    "precision",
    "precision_support",
    "preprocessing",
    "provenance",
    "prediction_from_logits",
    "streaming_eval_step",
    "Objective",
    "ObjectiveContext",
    "ObjectiveResult",
    "LossTerm",
    "supervised_objective",
    "TrainStepContext",
    "default_train_step",
    "EvalStepContext",
    "ComponentSpec",
    # issue 22: your own nn.Module (§2.14)
    "BatchAdapter",
    "KeywordInputs",
    "MissingModelFactoryError",
    "NNConvParams",
    "NNDataset",
    "NNMoEParams",
    "NNTransformerParams",
    "NNViTParams",
    "ModelSummary",
    "ModelSpec",
    "PositionalInputs",
    "register_model_factory",
    "registered_model_factories",
    "unregister_model_factory",
    # issue 29: what a user porting NNx code imports from the top level
    "TaskValidationError",
    "ResumePointError",
    "calibration",
    "abstention",
    "peft",
    "streaming",
    "seeding",
    "set_seed",
    # issue 23: the switch of the batched fast path for tensor data
    "set_fast_batches",
    # issue 27: §2.8
    "TensorBoardCallback",
    "report",
    # issue 29: NNx's metric registry functions
    "register_metric",
    "unregister_metric",
    "registered_metrics",
    "MonitorUnavailableError",
    "monitors",
    # issue 24: the multi-optimizer Trainer (§3.2)
    "Trainer",
    "TrainerStepContext",
    # issue 28: gradient health and the pre-flight
    "HealthProbe",
    "preflight",
    "PreflightReport",
    "NNTrainerParams",
    "trainer",
    # issue 24: fine-tuning (§3.1)
    "LoadPretrainedResult",
    "NNParamGroupSpec",
    "freeze",
    "frozen",
    "load_pretrained",
    "unfreeze",
    # issue 25: denoising diffusion (§3.3)
    "diffusion",
    # issue 28: the mistakes a model makes
    "Interpretation",
    # issue 26: causal language models (§3.6)
    "lm_tasks",
    "GenerativeNNModel",
    "GenerationPlayground",
    # issue 28: sweeps with parallel coordinates
    "Sweep",
    # issue 26: ranking and retrieval evaluation (§3.7)
    "ranking",
    # issue 25: training paradigms (§3.4)
    "paradigms",
    # issue 25: a train() call as data, raced beside plans
    "TrainJob",
    # issue 27: the W&B logger (§2.8)
    "WandbCallback",
}


def test_the_exported_names_are_pinned():
    assert set(nnx_lab.__all__) == EXPECTED


def test_the_widget_names_are_pinned():
    import nnx_lab.widgets

    assert set(nnx_lab.widgets.__all__) == {
        "AbstentionExplorer",
        "BundleMissingError",
        "CalibrationExplorer",
        "DatasetSummary",
        "DriftReport",
        "Interpretation",
        "GenerationPlayground",
        "LRFinderWidget",
        "ModelSummary",
        "PlanBuilder",
        "Sweep",
        "TrainingMonitor",
        "open_in_panel",
    }
    # the widget that draws a report is not the report: nnx_lab.drift_report returns data
    assert nnx_lab.widgets.DriftReport is not nnx_lab.plans.DriftReport
    assert "DriftReport" not in nnx_lab.__all__


MODULES = {
    "events",
    "preflight",
    "precision",
    "data_splits",
    "preprocessing",
    "provenance",
    "distributed",
    "calibration",
    "abstention",
    "peft",
    "streaming",
    "seeding",
    "monitors",
    "trainer",
    "graphs",
    "graph_tasks",
    "link_tasks",
    "diffusion",
    "lm_tasks",
    "ranking",
    "paradigms",
}


@pytest.mark.parametrize("name", sorted(EXPECTED - {"__version__"}))
def test_every_exported_name_is_nnx_labs_own_class_function_or_module(name):
    obj = getattr(nnx_lab, name)
    if name in MODULES:
        assert inspect.ismodule(obj)
        assert obj.__name__.startswith("nnx_lab.")
        return
    assert inspect.isclass(obj) or inspect.isfunction(obj), f"{name} is a {type(obj)}"
    assert obj.__module__.startswith("nnx_lab."), obj.__module__
    assert obj.__name__ == name  # not an alias of something else
    assert nnx_lab.__dict__[name] is obj  # cached: the next lookup skips __getattr__


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Trainr'"):
        nnx_lab.Trainr  # noqa: B018


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"import sys; {code}; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return set(out.stdout.split())


def test_importing_nnx_lab_is_cheap_and_loads_no_torch():
    mods = _modules_after("import nnx_lab")
    assert "torch" not in mods
    assert "nnx_lab.engine.model" not in mods


@pytest.mark.parametrize(
    ("value", "disabled"),
    [
        ("1", True),
        ("true", True),
        ("YES", True),
        ("True", True),
        ("0", False),
        ("", False),
        ("no", False),
        ("off", False),
    ],
)
def test_nnx_tqdm_disable_values(monkeypatch, value, disabled):
    from nnx_lab.engine.handlers import tqdm_disabled

    monkeypatch.setenv("NNX_TQDM_DISABLE", value)
    assert tqdm_disabled() is disabled


def test_the_progress_bar_draws_unless_disabled(runs_root, monkeypatch, capsys):
    import engine_factories as f

    monkeypatch.setenv("NNX_TQDM_DISABLE", "0")
    f.model().train(f.train_params(runs_root / "a", n_epochs=1))
    assert "8/8" in capsys.readouterr().err
    monkeypatch.setenv("NNX_TQDM_DISABLE", "yes")
    f.model().train(f.train_params(runs_root / "b", n_epochs=1))
    assert "8/8" not in capsys.readouterr().err


def test_devices_get_picks_the_best_present_device():
    import torch

    from nnx_lab import Devices

    expected = Devices.CUDA if torch.cuda.is_available() else Devices.CPU
    if torch.backends.mps.is_available():
        expected = Devices.MPS
    assert Devices.get() is expected


def test_optim_builder_form():
    from nnx_lab import NNOptimParams, Optims

    built = NNOptimParams.builder().adamw(max_lr=1e-3).grad_clip_norm(1.0).build()
    assert built == NNOptimParams(name=Optims.ADAMW, max_lr=1e-3, grad_clip_norm=1.0)


def test_exported_functions_stay_functions_after_every_submodule_is_imported():
    """Importing a submodule binds it on its package: a module named like an exported
    function (nnx_lab/lr_finder.py once) would replace the function."""
    code = (
        "import importlib, pkgutil, nnx_lab\n"
        "for m in pkgutil.walk_packages(nnx_lab.__path__, 'nnx_lab.'):\n"
        "    if '.widgets' not in m.name and '.server' not in m.name:\n"
        "        importlib.import_module(m.name)\n"
        "import inspect\n"
        "bad = [n for n, mod in nnx_lab._EXPORTS.items() if n not in nnx_lab._MODULES\n"
        "       and inspect.ismodule(getattr(nnx_lab, n))]\n"
        "print(bad)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.stdout.strip() == "[]", out.stdout
