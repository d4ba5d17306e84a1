"""``nnx_lab.trainer``: the multi-optimizer Trainer (§3.2), re-exported from the engine."""

from .engine.trainer import Trainer, TrainerStepContext
from .engine.trainer_params import NNTrainerParams

__all__ = ["NNTrainerParams", "Trainer", "TrainerStepContext"]
