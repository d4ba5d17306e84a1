"""The same 12-trial sweep two ways (docs/sweeps.md, "Optuna"): a seeded random search,
and Optuna's TPE sampler with a MedianPruner. Run by hand, not a test:

    python benchmarks/sweep_search.py

The wine plan of notebooks/inside_a_run.ipynb (8 epochs), into a fresh runs root.
Prints per search: the best val loss and its trial, the median final val loss of the
trials that ran to the end, how many were pruned, and the epochs trained in all.
"""

from __future__ import annotations

import os
import statistics
import tempfile

os.environ["NNX_TQDM_DISABLE"] = "1"

import optuna

from nnx_lab import ExperimentPlan, NNRun
from nnx_lab.example_data import WINE_DIMS, wine_train_loader, wine_val_loader
from nnx_lab.plans import loguniform
from nnx_lab.runs import set_config_report

SPACE = {
    "train.optim.max_lr": loguniform(1e-3, 1e-1),
    "net.hidden_dims": [[16], [32, 16]],
    "net.dropout_prob": [0.0, 0.2],
}


def main() -> None:
    set_config_report(False)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    searches = {
        'search="random", seed=0': {"search": "random", "seed": 0},
        "TPESampler(seed=0) + MedianPruner()": {
            "sampler": optuna.samplers.TPESampler(seed=0, n_startup_trials=4),
            "pruner": optuna.pruners.MedianPruner(n_startup_trials=4, n_warmup_steps=2),
        },
    }
    for label, kw in searches.items():
        with tempfile.TemporaryDirectory() as root:
            base = (
                ExperimentPlan()
                .with_net(hidden_dims=[16], **WINE_DIMS)
                .with_data(wine_train_loader, val=wine_val_loader, identity="wine")
                .with_epochs(8)
                .with_seed(7)
                .with_runs_root(root)
            )
            res = base.sweep(SPACE, n_trials=12, **kw)
            best = res.best()
            full = [t.metric("val.loss") for t in res.done()]
            epochs = sum(len(NNRun.load(t.run_id, root).epochs) for t in res.trials)
            pruned = sum(t.status == "pruned" for t in res.trials)
            print(
                f"{label:38s} best val loss {best.metric('val.loss'):.3f} (trial {best.index}: "
                f"lr {best.values['train.optim.max_lr']:.4f}, "
                f"dims {best.values['net.hidden_dims']}, "
                f"dropout {best.values['net.dropout_prob']}); median of the {len(full)} "
                f"finished {statistics.median(full):.3f}; pruned {pruned}; "
                f"epochs trained {epochs}"
            )


if __name__ == "__main__":
    main()
