"""What attaches to the training loop's event stream.

``NNModel.train`` attaches, in this order: the run's history (``NNRun``), the run
directory's records, the JSONL log, the figures' writer, the progress bar, the user's
callbacks, and last the checkpoints (so every callback, EarlyStopping included, has
seen an epoch before its state is saved). Each handler is a plain sink and can be used,
or left out, alone.
"""

from .checkpoints import CheckpointPolicy
from .early_stopping import EarlyStopping
from .figures import FigureWriter
from .gradient_health import HealthProbe
from .jsonl_log import JsonlLogger
from .nnx_callbacks import adapt_callbacks
from .progress import ProgressBar, tqdm_disabled
from .run_directory import RunRecorder

__all__ = [
    "CheckpointPolicy",
    "EarlyStopping",
    "FigureWriter",
    "HealthProbe",
    "JsonlLogger",
    "ProgressBar",
    "RunRecorder",
    "adapt_callbacks",
    "tqdm_disabled",
]
