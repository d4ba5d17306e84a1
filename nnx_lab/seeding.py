"""``nnx_lab.seeding``: NNx's seeding helpers (``set_seed``, a DataLoader worker's seed,
and a snapshot of the environment a result depends on).

``train()`` seeds itself from ``NNTrainParams.seed``; these are for the code around it
(data a script draws, a loader's workers), written as NNx spells them.
"""

from __future__ import annotations

import os
import random
from typing import Any

__all__ = ["dataloader_worker_init_fn", "env_snapshot", "set_seed"]

_SEED_MAX = 2**32 - 1  # NumPy's legacy seed range, which NNx keeps for every generator
_snapshot: dict[str, Any] | None = None


def set_seed(seed: int, strict: bool = False) -> None:
    """Seed Python, NumPy and torch (CPU and every CUDA device), make cuDNN
    deterministic with benchmarking off, and set ``PYTHONHASHSEED`` for child processes.
    ``strict=True`` also makes torch refuse nondeterministic algorithms (and sets
    ``CUBLAS_WORKSPACE_CONFIG``, which deterministic cuBLAS needs)."""
    import numpy as np
    import torch

    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= _SEED_MAX:
        raise ValueError(f"Seed must be between 0 and 2**32 - 1, got {seed!r}")
    if not isinstance(strict, bool):
        raise TypeError(f"set_seed(strict={strict!r}): pass True or False")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # every CUDA device too
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    os.environ["PYTHONHASHSEED"] = str(seed)
    if strict:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)


def dataloader_worker_init_fn(worker_id: int) -> None:
    """``DataLoader(worker_init_fn=...)``: seed a worker's Python and NumPy from the seed
    torch gave that worker, so augmentations differ per worker and repeat per run."""
    import numpy as np
    import torch

    seed = torch.initial_seed() % (_SEED_MAX + 1)
    random.seed(seed)
    np.random.seed(seed)


def env_snapshot(force_refresh: bool = False) -> dict[str, Any]:
    """The versions and switches a result depends on (Python, platform, torch, NumPy,
    CUDA, cuDNN and its flags), read once per process unless ``force_refresh``."""
    global _snapshot
    if _snapshot is None or force_refresh:
        import platform

        import numpy as np
        import torch

        from ._version import __version__

        cudnn = torch.backends.cudnn
        _snapshot = {
            "nnx_lab": __version__,
            "python": platform.python_version(),
            "platform": platform.platform(),
            "torch": str(torch.__version__),
            "numpy": str(np.__version__),
            "cuda": torch.version.cuda,
            "cuda_available": torch.cuda.is_available(),
            "cudnn": cudnn.version() if cudnn.is_available() else None,
            "cudnn_deterministic": cudnn.deterministic,
            "cudnn_benchmark": cudnn.benchmark,
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        }
    return dict(_snapshot)
