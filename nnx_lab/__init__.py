"""nnx-lab: train, watch and understand PyTorch models from JupyterLab.

The public API is the NNx quickstart's (``nnx`` replaced by ``nnx_lab``). Names load
lazily on first use, so ``import nnx_lab`` stays cheap: torch is imported only when an
engine name is touched.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # the error family (nnx_lab/errors.py): every error derives from NNxError
    "NNxError": "nnx_lab.errors",
    "FieldError": "nnx_lab.errors",
    "FileError": "nnx_lab.errors",
    "ConfigError": "nnx_lab.errors",
    "DataError": "nnx_lab.errors",
    "PredictionValidationError": "nnx_lab.errors",
    "PrecisionUnsupportedError": "nnx_lab.errors",
    "ResumeError": "nnx_lab.errors",
    "ComponentRestoreError": "nnx_lab.errors",
    "TrainingStateError": "nnx_lab.errors",
    "RunDirectoryError": "nnx_lab.errors",
    "SplitError": "nnx_lab.errors",
    "StandardizerError": "nnx_lab.errors",
    "CalibrationFitError": "nnx_lab.errors",
    "AbstentionError": "nnx_lab.errors",
    "TaskValidationError": "nnx_lab.errors",
    "ResumePointError": "nnx_lab.errors",
    "RunRecordError": "nnx_lab.errors",
    "LogDamagedError": "nnx_lab.errors",
    "CheckpointCorruptError": "nnx_lab.errors",
    "MissingModelFactoryError": "nnx_lab.errors",
    "PlanError": "nnx_lab.plans",
    "Activations": "nnx_lab.engine.enums",
    "Checkpoints": "nnx_lab.engine.enums",
    "Devices": "nnx_lab.engine.enums",
    "Losses": "nnx_lab.engine.enums",
    "Nets": "nnx_lab.engine.enums",
    "Optims": "nnx_lab.engine.enums",
    "RunStatus": "nnx_lab.engine.enums",
    "NNParams": "nnx_lab.engine.params",
    "NNConvParams": "nnx_lab.engine.conv_params",
    "NNDataset": "nnx_lab.data",
    "NNTransformerParams": "nnx_lab.engine.transformer_params",
    "NNViTParams": "nnx_lab.engine.transformer_params",
    "NNMoEParams": "nnx_lab.engine.moe_params",
    "NNModelParams": "nnx_lab.engine.params",
    "NNTrainParams": "nnx_lab.engine.params",
    "NNOptimParams": "nnx_lab.engine.params",
    "NNSchedulerParams": "nnx_lab.engine.params",
    "PrecisionPolicy": "nnx_lab.engine.precision",
    "precision_support": "nnx_lab.engine.precision",
    "NNModel": "nnx_lab.engine.model",
    # your own nn.Module (§2.14): the registry, specs and batch adapters
    "ModelSpec": "nnx_lab.engine.registry",
    "register_model_factory": "nnx_lab.engine.registry",
    "unregister_model_factory": "nnx_lab.engine.registry",
    "registered_model_factories": "nnx_lab.engine.registry",
    "BatchAdapter": "nnx_lab.engine.adapters",
    "PositionalInputs": "nnx_lab.engine.adapters",
    "KeywordInputs": "nnx_lab.engine.adapters",
    "Prediction": "nnx_lab.engine.prediction",
    "ProbabilitySpec": "nnx_lab.engine.probabilities",
    "PredictionResult": "nnx_lab.engine.probabilities",
    "PredictionBatch": "nnx_lab.engine.probabilities",
    "prediction_from_logits": "nnx_lab.engine.probabilities",
    "MetricSpec": "nnx_lab.data.metrics",
    "register_metric": "nnx_lab.data.metrics",
    "unregister_metric": "nnx_lab.data.metrics",
    "registered_metrics": "nnx_lab.data.metrics",
    "MonitorSpec": "nnx_lab.engine.selection",
    "MonitorRecord": "nnx_lab.engine.selection",
    "MonitorUnavailableError": "nnx_lab.errors",
    "TaskSpec": "nnx_lab.engine.task_spec",
    "StreamingMetrics": "nnx_lab.data.streaming",
    "streaming_eval_step": "nnx_lab.engine.streaming_eval",
    "Objective": "nnx_lab.engine.objective",
    "ObjectiveContext": "nnx_lab.engine.objective",
    "ObjectiveResult": "nnx_lab.engine.objective",
    "LossTerm": "nnx_lab.engine.objective",
    "supervised_objective": "nnx_lab.engine.objective",
    "TrainStepContext": "nnx_lab.engine.custom_step",
    "Trainer": "nnx_lab.engine.trainer",
    "TrainerStepContext": "nnx_lab.engine.trainer",
    "NNTrainerParams": "nnx_lab.engine.trainer_params",
    "default_train_step": "nnx_lab.engine.custom_step",
    "EvalStepContext": "nnx_lab.engine.eval_context",
    "ComponentSpec": "nnx_lab.engine.components",
    "NNRun": "nnx_lab.engine.run_handle",
    "IDP": "nnx_lab.engine.run_handle",
    "EDP": "nnx_lab.engine.edp",
    "NNCheckpoint": "nnx_lab.engine.checkpoint",
    "TrainingState": "nnx_lab.engine.training_state",
    "EarlyStopping": "nnx_lab.engine.handlers",
    "TensorBoardCallback": "nnx_lab.engine.handlers.tensorboard",
    "report": "nnx_lab.reports",  # one HTML file of a run (docs/report.md)
    "Callback": "nnx_lab.engine.sinks",
    "TrainingControl": "nnx_lab.engine.events",
    "events": "nnx_lab.engine.events",
    "precision": "nnx_lab.precision",
    "data_splits": "nnx_lab.data_splits",
    "monitors": "nnx_lab.monitors",
    "trainer": "nnx_lab.trainer",
    # issue 26: ranking and retrieval evaluation (§3.7)
    "ranking": "nnx_lab.ranking",
    "preprocessing": "nnx_lab.preprocessing",
    "TrainingMonitor": "nnx_lab.widgets",
    "PlanBuilder": "nnx_lab.widgets",
    "CalibrationExplorer": "nnx_lab.widgets",
    "AbstentionExplorer": "nnx_lab.widgets",
    "DatasetSummary": "nnx_lab.widgets",
    "ModelSummary": "nnx_lab.widgets",
    "Interpretation": "nnx_lab.widgets",  # issue 28: the mistakes a model makes
    "Sweep": "nnx_lab.widgets",  # issue 28: sweeps with parallel coordinates
    "open_in_panel": "nnx_lab.widgets",
    "list_runs": "nnx_lab.runs",
    "lr_finder": "nnx_lab.lr_sweep",
    "LRFinderResult": "nnx_lab.lr_sweep",
    "request_stop": "nnx_lab.runs",
    "NNTabularDataset": "nnx_lab.data",
    "NNGraphDataset": "nnx_lab.graphs",  # the graph extra (§2.12)
    "graphs": "nnx_lab.graphs",
    "graph_tasks": "nnx_lab.graph_tasks",
    "link_tasks": "nnx_lab.link_tasks",
    "ExperimentPlan": "nnx_lab.plans",
    "FitResult": "nnx_lab.plans",
    "drift_report": "nnx_lab.plans",
    "provenance": "nnx_lab.provenance",
    "launch": "nnx_lab.widgets._launch",  # the launcher with a monitor attached
    "LaunchHandle": "nnx_lab.distributed",
    "distributed": "nnx_lab.distributed",
    # NNx's submodules and names a porting user imports from the top level
    "calibration": "nnx_lab.calibration",
    "abstention": "nnx_lab.abstention",
    "peft": "nnx_lab.peft",  # §3.5: LoRA, DoRA, IA3, adapters, prefix and prompt tuning
    "streaming": "nnx_lab.streaming",
    "seeding": "nnx_lab.seeding",
    "set_seed": "nnx_lab.seeding",
    # fine-tuning (§3.1): parameter-group rules, freezing by glob, pretrained weights
    "NNParamGroupSpec": "nnx_lab.engine.param_groups",
    "freeze": "nnx_lab.engine.finetune",
    "unfreeze": "nnx_lab.engine.finetune",
    "frozen": "nnx_lab.engine.finetune",
    "load_pretrained": "nnx_lab.engine.pretrained",
    "LoadPretrainedResult": "nnx_lab.engine.pretrained",
    # issue 23: the batched fast path for tensor data, on by default
    "set_fast_batches": "nnx_lab.engine.fast_batches",
    # issue 25: denoising diffusion (§3.3)
    "diffusion": "nnx_lab.diffusion",
    # issue 26: causal language models (§3.6)
    "lm_tasks": "nnx_lab.lm_tasks",
    "GenerativeNNModel": "nnx_lab.lm_tasks",
    "GenerationPlayground": "nnx_lab.widgets",
    # issue 28: gradient health and the pre-flight
    "HealthProbe": "nnx_lab.engine.handlers",
    "preflight": "nnx_lab.preflight",
    "PreflightReport": "nnx_lab.preflight",
    # issue 25 (§3.4): distillation, SimCLR, Mixup and CutMix steps
    "paradigms": "nnx_lab.paradigms",
    # issue 25: a train() call as data, raced in a TrainingMonitor beside plans
    "TrainJob": "nnx_lab.engine.train_job",
    "WandbCallback": "nnx_lab.engine.handlers.wandb_logger",  # issue 27: §2.8, W&B
}

_MODULES = (
    "events",
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
    "preflight",
    "paradigms",
)

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'nnx_lab' has no attribute {name!r}")
    mod = importlib.import_module(module)
    value = mod if name in _MODULES else getattr(mod, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
