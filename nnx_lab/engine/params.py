"""Frozen, validated parameter dataclasses with a canonical JSON form.

Every check runs in ``__post_init__``, so a bad value is refused where it is typed,
long before a run directory exists. ``to_json()`` gives the canonical form that enters
the run id; fields that do not change the result (paths, progress, logging) are kept
out of it by ``NNTrainParams.identity()``.

This module is where they are imported from (``nnx_lab.engine.params``); each family
lives in its own: ``model_params`` (NNParams, NNModelParams), ``optim_params``
(NNOptimParams, NNSchedulerParams), ``train_params`` (NNTrainParams), and what they
share in ``params_base``.
"""

from __future__ import annotations

from .model_params import CustomLossRef, NNModelParams, NNParams
from .optim_params import NNOptimParams, NNOptimParamsBuilder, NNSchedulerParams
from .train_params import RESUME_CHECKPOINTS, RESUME_EPOCHS, RESUME_MODES, NNTrainParams

__all__ = [
    "RESUME_CHECKPOINTS",
    "RESUME_EPOCHS",
    "RESUME_MODES",
    "CustomLossRef",
    "NNModelParams",
    "NNOptimParams",
    "NNOptimParamsBuilder",
    "NNParams",
    "NNSchedulerParams",
    "NNTrainParams",
]

# The names plans/_fields.py reads (the choices of the resume fields).
