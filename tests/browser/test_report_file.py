"""The one-file HTML report opens from a file in Chromium with no server: its charts
draw, hover reads values, drag zooms, double-click resets, the log scale toggles, and
the page asks the network for nothing."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

import nnx_lab
from nnx_lab import Losses, Nets, NNModel, NNModelParams, NNOptimParams, NNParams, NNTrainParams


def _report(tmp_path):
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(128, 4, generator=g), torch.randint(0, 3, (128,), generator=g)
    loader = DataLoader(TensorDataset(X, y), batch_size=16)
    model = NNModel(
        net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=[8]),
        params=NNModelParams(net=Nets.FEED_FWD, loss=Losses.CROSS_ENTROPY),
    )
    params = NNTrainParams(
        n_epochs=3,
        seed=0,
        train_loader=loader,
        val_loader=loader,
        log_every=1,
        optim=NNOptimParams(max_lr=0.01),
        runs_root=str(tmp_path / "runs"),
    )
    run = model.train(params)
    return nnx_lab.report(run.id, tmp_path / "run.html", runs_root=tmp_path / "runs")


def _ticks(page, chart):
    return page.locator(f'[data-chart="{chart}"] text.tick').all_text_contents()


def test_the_report_works_from_a_file_with_no_network(browser, tmp_path):
    path = _report(tmp_path)
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    requests, errors = [], []
    context.on("request", lambda r: requests.append(r.url))
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(path.as_uri())
        assert page.locator(".chart-box").count() >= 4
        assert requests == [path.as_uri()]  # the file itself, nothing else
        assert errors == []
        svg = page.locator('[data-chart="step-loss"] svg')
        box = svg.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
        readout = page.locator('[data-chart="step-loss"] .readout').text_content()
        assert readout.startswith("step ")
        assert "loss " in readout
        full = _ticks(page, "step-loss")
        page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + 60)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 60, steps=4)
        page.mouse.up()
        zoomed = _ticks(page, "step-loss")
        assert zoomed != full  # the x range narrowed
        page.locator('[data-chart="step-loss"] svg').dblclick()
        assert _ticks(page, "step-loss") == full
        page.locator('[data-chart="step-loss"] input.log').check()
        assert _ticks(page, "step-loss") != full  # log-spaced labels
        assert errors == []
    finally:
        context.close()
