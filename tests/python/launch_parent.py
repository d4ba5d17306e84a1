"""A kernel stand-in for the orphan test: launches a long plan, prints the launch folder,
then waits to be killed."""

from __future__ import annotations

import sys
import time

import launch_factories as lf

from nnx_lab import ExperimentPlan, NNParams, NNTrainParams, launch
from nnx_lab.plans import set_config_report

set_config_report(False)
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
time.sleep(600)
