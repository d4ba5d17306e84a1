"""Converting a finished run's log for other tools (docs/logging.md).

from nnx_lab.export import to_tensorboard
to_tensorboard(run.id, "tb_logs")      # then: tensorboard --logdir tb_logs
to_wandb(run.id, "nnx")                # an offline W&B run; then: wandb sync
"""

from ._tensorboard import to_tensorboard
from ._wandb import to_wandb

__all__ = ["to_tensorboard", "to_wandb"]
