"""Two multi-optimizer Trainer runs raced live in one TrainingMonitor, in a real JupyterLab.

* Run the one-cell notebook: two GANs (their own G and D optimizers, four rates, no two
  alike, so no line hides another) race as
  ``TrainJob(trainer, NNTrainerParams(...), trainer_step_fn=...)``.
* When both finished, the lr chart draws one line per run and optimizer, named
  "<run> · <optimizer>" in a legend under it, in the run's colour: both colours are on
  its canvas. The loss chart has one curve per run.
* After a page reload the race, its lr lines and their legend come back.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lab_harness import JupyterServer, pixels, write_notebook
from playwright.sync_api import expect

pytestmark = pytest.mark.usefixtures("monitor_bundle")

RUN_TIMEOUT = 180_000  # ms: two short runs on a loaded 2-core machine
# js/monitor/race.js RACE_COLORS: the first two runs
COLORS = ["#1f77b4", "#ff7f0e"]
LINES = ["slow D · G", "slow D · D", "fast D · G", "fast D · D"]

RACE = """
import functools
import torch
import torch.nn.functional as F
from torch import nn
from nnx_lab import EDP, Losses, NNModel, NNModelParams, NNOptimParams, NNParamGroupSpec
from nnx_lab import NNTrainerParams, Trainer, TrainingMonitor, TrainJob


class GAN(nn.Module):
    def __init__(self):
        super().__init__()
        self.G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
        self.D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, x):
        return self.D(x)


def gan_step(ctx):
    real, _ = ctx.batch
    n = len(real)
    z = torch.randn(n, 2)
    fake = ctx.model.G(z)
    ones, zeros = torch.ones(n, 1), torch.zeros(n, 1)
    d_loss = F.binary_cross_entropy_with_logits(ctx.model.D(real), ones)
    d_loss = d_loss + F.binary_cross_entropy_with_logits(ctx.model.D(fake.detach()), zeros)
    ctx.update("D", d_loss)
    g_loss = F.binary_cross_entropy_with_logits(ctx.model.D(ctx.model.G(z)), ones)
    ctx.update("G", g_loss)
    return EDP(loss=float(d_loss.detach() + g_loss.detach()), samples=n)


g = torch.Generator().manual_seed(0)
X = torch.randn(96, 2, generator=g) + 2.0
batches = [(X[i : i + 16], torch.zeros(16, 1)) for i in range(0, 96, 16)]


def job(g_lr, d_lr):
    torch.manual_seed(0)
    model = NNModel(module=GAN(), params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR))
    optims = {
        "G": NNOptimParams(max_lr=g_lr, param_groups=[NNParamGroupSpec("G.*")]),
        "D": NNOptimParams(max_lr=d_lr, param_groups=[NNParamGroupSpec("D.*")]),
    }
    params = NNTrainerParams(
        optims=optims, n_epochs=4, train_loader=batches, log_every=1, overwrite_existing=True
    )
    return TrainJob(Trainer(model), params, trainer_step_fn=functools.partial(gan_step))


monitor = TrainingMonitor()
monitor.race({"slow D": job(5e-4, 1.5e-3), "fast D": job(1e-3, 2e-3)})
monitor
"""


def _check_race(monitor) -> None:
    expect(monitor.get_by_test_id("race-status")).to_have_text(
        "race of 2 runs: 2 finished", timeout=RUN_TIMEOUT
    )
    expect(monitor.get_by_test_id("loss-chart")).to_have_attribute("data-runs", "2")
    lr = monitor.get_by_test_id("lr-chart")
    expect(lr).to_have_attribute("data-lines", ",".join(LINES))
    expect(monitor.get_by_test_id("lr-legend").locator(".nnx-legend-item")).to_have_text(LINES)
    lr.scroll_into_view_if_needed()
    for run, color in zip(["slow D", "fast D"], COLORS, strict=True):
        drawn = pixels(lr, color)
        assert drawn > 50, (run, color, drawn)  # the run's rate lines are on the canvas


def test_two_trainer_runs_race_with_each_optimizers_rate(
    new_lab, jupyter_server: JupyterServer, lab_root: Path
):
    lab = new_lab()
    name = "race_trainer.ipynb"
    write_notebook(lab_root / name, [RACE])
    lab.open_notebook(name)
    lab.run_all()
    assert lab.tracebacks() == []
    monitor = lab.page.locator(".nnx-monitor").first
    _check_race(monitor)
    lab.save()  # the widget in the file: a reload brings the view back
    lab.reload()
    _check_race(lab.page.locator(".nnx-monitor").first)
    assert lab.tracebacks() == []
