"""What one update costs the objective and custom-step paths, counted rather than timed
(run by hand, not a test).

Wall-clock ratios on a shared machine move by tens of percent between runs; counts do
not. For each benchmark's nnx-lab side (paradigm_steps.py, ranking_step.py,
objective_overhead.py's kinds) and for the hand-written loops, one whole ``train()``
call (or hand loop) is run twice: once under a ``TorchDispatchMode`` that counts the
aten ops dispatched, once under cProfile for the Python function calls. Both are
divided by the updates, so the per-run work (checks, identity, run directory,
checkpoints) is spread over them: compare two trees' lines, not a line with its hand
loop's.

    python benchmarks/objective_ops.py [--epochs 2]
    PYTHONPATH=/path/to/other/tree python benchmarks/objective_ops.py   # the A/B
"""

from __future__ import annotations

import cProfile
import os
import pstats
import tempfile

os.environ["NNX_TQDM_DISABLE"] = "1"

import objective_overhead as oo  # benchmarks/ is on the path
import paradigm_steps as ps
import ranking_step as rs
import torch
from _compare import bench_args
from torch.utils._python_dispatch import TorchDispatchMode

from nnx_lab import NNOptimParams, NNTrainParams, supervised_objective
from nnx_lab.paradigms import (
    cutmix_train_step_factory,
    kd_objective,
    kd_train_step_factory,
    mixup_train_step_factory,
    simclr_train_step_factory,
)
from nnx_lab.ranking import RankingTask


class _Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def _counts(run, updates: int) -> tuple[float, float]:
    counter = _Count()
    with counter:
        run(0)
    profile = cProfile.Profile()
    profile.enable()
    run(1)
    profile.disable()
    return counter.n / updates, pstats.Stats(profile).total_calls / updates


def _nnx(make, loader, epochs, **hooks):
    def run(salt: int) -> None:
        with tempfile.TemporaryDirectory() as root:
            params = NNTrainParams(
                n_epochs=epochs,
                train_loader=loader,
                optim=NNOptimParams(max_lr=1e-3, grad_clip_norm=1.0),
                runs_root=root,
                progress=False,
            )
            make().train(params, salt=str(salt), **hooks)

    return run


def main() -> None:
    args = bench_args(epochs=2)
    torch.set_num_threads(args.threads or 1)
    E = args.epochs
    X, y = ps._rows()
    rows = ps._loader(X, y)
    teacher = ps._mlp(hidden=(512, 512)).net.eval()
    g = torch.Generator().manual_seed(0)
    images = ps._loader(
        torch.rand(2000, 1, 16, 16, generator=g), torch.randint(0, 10, (2000,), generator=g)
    )
    views = ps._loader(X + 0.1, X - 0.1)
    ranking = rs.make_batches()
    cases = {
        "kd step": (_nnx(ps._mlp, rows, E, train_step_fn=kd_train_step_factory(teacher)), rows),
        "kd objective": (_nnx(ps._mlp, rows, E, objective=kd_objective(teacher)), rows),
        "mixup step": (
            _nnx(ps._mlp, rows, E, train_step_fn=mixup_train_step_factory(0.4)),
            rows,
        ),
        "cutmix step": (
            _nnx(ps._cnn, images, E, train_step_fn=cutmix_train_step_factory(1.0)),
            images,
        ),
        "simclr step": (
            _nnx(lambda: ps._mlp(out=32), views, E, train_step_fn=simclr_train_step_factory(0.5)),
            views,
        ),
        "supervised objective": (
            _nnx(ps._mlp, rows, E, objective=supervised_objective()),
            rows,
        ),
        "two-term objective": (_nnx(ps._mlp, rows, E, objective=oo.TwoTerms()), rows),
        "default step": (_nnx(ps._mlp, rows, E), rows),
        "ranking objective": (
            _nnx(rs.fresh_model, ranking, E, objective=RankingTask().objective()),
            ranking,
        ),
    }
    hand = {f"{p} hand-written": ps.PARADIGMS[p](E)[f"{p} hand-written"] for p in ps.PARADIGMS}
    print(f"per update, over a whole run of {E} epochs (threads={torch.get_num_threads()})")
    for name, (run, loader) in cases.items():
        ops, calls = _counts(run, len(loader) * E)
        print(f"{name:>22}: aten ops {ops:7.1f}, Python calls {calls:7.1f}")
    loaders = {"kd": rows, "mixup": rows, "cutmix": images, "simclr": views}
    for name, run in hand.items():
        ops, calls = _counts(run, len(loaders[name.split()[0]]) * E)
        print(f"{name:>22}: aten ops {ops:7.1f}, Python calls {calls:7.1f}")
    ops, calls = _counts(lambda r: rs.hand_written(ranking, E, r), len(ranking) * E)
    print(f"{'ranking hand-written':>22}: aten ops {ops:7.1f}, Python calls {calls:7.1f}")


if __name__ == "__main__":
    main()
