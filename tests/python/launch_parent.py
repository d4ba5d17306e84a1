"""A kernel stand-in for the orphan tests: launches a long plan, prints the launch
folder, then waits to be killed. ``launch_parent.py ROOT [train|start|stop]``: "stop"
first waits for the run to train, asks it to stop (without waiting) and prints
"stopping"."""

from __future__ import annotations

import sys
import time

import launch_factories as lf

from nnx_lab import ExperimentPlan, NNParams, NNTrainParams, launch
from nnx_lab.plans import set_config_report

set_config_report(False)
mode = sys.argv[2] if len(sys.argv) > 2 else "train"
plan = (
    ExperimentPlan()
    .with_net(NNParams(input_dim=8, output_dim=3, hidden_dims=[16]))
    .with_train(NNTrainParams(n_epochs=200))
    .with_data(lf.make_long_train_loader, identity="long")
    .with_seed(3)
    .with_runs_root(sys.argv[1])
)
handle = launch(plan, 2, monitor=False)
print(handle.folder, flush=True)
if mode == "stop":
    lf.wait_for(lambda: (handle.run_dir / "metrics.jsonl").is_file(), what="the run to train")
    handle.stop("stopped by the parent", wait=False)
    print("stopping", flush=True)
time.sleep(600)
