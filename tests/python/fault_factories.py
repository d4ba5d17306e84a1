"""The run the kill tests train, in this process and in forked children alike.

``build`` is the training; ``kill_each`` runs in a "zygote" child, which imports torch
once and forks one child per kill point (one interpreter start instead of one per
point); ``killed_runs`` starts that zygote from a test and reads back each child's fate;
``trained_whole`` is the same training, never interrupted, for the comparisons.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import nnx_lab
from nnx_lab import (
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNSchedulerParams,
    NNTrainParams,
)

HERE = Path(__file__).resolve().parent


def build(root, n_epochs, **kw):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(8, 3, generator=g)
    X = torch.randn(64, 8, generator=g)
    y = (X @ w).argmax(1)
    train = DataLoader(TensorDataset(X, y), batch_size=16, shuffle=True)
    model = NNModel(
        net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=[16], dropout_prob=0.2),
        params=NNModelParams(),
    )
    kw.setdefault("checkpoint_every_s", 0)
    params = NNTrainParams(
        n_epochs=n_epochs,
        seed=5,
        train_loader=train,
        val_loader=DataLoader(TensorDataset(X, y), batch_size=32),
        runs_root=str(root),
        optim=NNOptimParams(max_lr=1e-2),
        scheduler=NNSchedulerParams(factor=0.5, patience=0),
        **kw,
    )
    return model, params


def kill_each(roots_json: str, epochs: int, arm: Callable[[str], None]) -> None:
    """In the zygote: for each ``point -> root``, fork a child that arms ``point`` and
    trains under ``root``; print each child's signal (or minus its exit code) as JSON."""
    # Warm the imports every child would repeat (an optimizer's first construction pulls
    # in torch._dynamo); no tensor math runs before the forks.
    torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))])
    results = {}
    for point, root in json.loads(roots_json).items():
        pid = os.fork()
        if pid == 0:
            try:
                torch.set_num_threads(1)
                arm(point)
                model, params = build(root, epochs)
                model.train(params)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(3)  # reached only when the kill point never came
        _, status = os.waitpid(pid, 0)
        results[point] = os.WTERMSIG(status) if os.WIFSIGNALED(status) else -os.WEXITSTATUS(status)
    print(json.dumps(results))


def zygote(body: str, epochs: int) -> str:
    """The zygote's source: ``body`` defines ``arm(point)``; then every point is killed."""
    head = f"import sys\nsys.path.insert(0, {str(HERE)!r})\nfrom fault_factories import kill_each\n"
    return head + body + f"\nkill_each(sys.argv[1], {epochs}, arm)\n"


def child_env() -> dict[str, str]:
    """A child's environment: this checkout's nnx_lab first, one thread, no progress bars."""
    env = dict(os.environ, NNX_TQDM_DISABLE="1", OMP_NUM_THREADS="1")
    package_root = str(Path(nnx_lab.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return env


def killed_runs(source: str, roots: dict[str, str]) -> dict[str, tuple[Path, int, str]]:
    """Run the zygote ``source`` over ``roots``: point -> (root, the child's fate, run id)."""
    done = subprocess.run(
        [sys.executable, "-c", source, json.dumps(roots)],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    statuses = json.loads(done.stdout.strip().splitlines()[-1])
    out = {}
    for point, root in roots.items():
        (run_dir,) = [p for p in Path(root).iterdir() if p.is_dir()]
        out[point] = (Path(root), statuses[point], run_dir.name)
    return out


def trained_whole(root: Path, epochs: int):
    """The same training, uninterrupted, on one intra-op thread: (model, run)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("NNX_TQDM_DISABLE", "1")
            model, params = build(root, epochs)
            run = model.train(params)
    finally:
        torch.set_num_threads(before)
    return model, run
