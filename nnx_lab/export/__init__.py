"""Converting a finished run's log for other tools (docs/logging.md).

from nnx_lab.export import to_tensorboard
to_tensorboard(run.id, "tb_logs")      # then: tensorboard --logdir tb_logs
"""

from ._tensorboard import to_tensorboard

__all__ = ["to_tensorboard"]
