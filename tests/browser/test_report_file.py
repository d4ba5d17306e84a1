"""The one-file HTML report opens from a file in Chromium with no server: its charts
draw, hover reads values, drag zooms, double-click resets, the log scale toggles, and
the page asks the network for nothing."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

import nnx_lab
from nnx_lab import Losses, Nets, NNModel, NNModelParams, NNOptimParams, NNParams, NNTrainParams


def _report(tmp_path, documents=False):
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
    extra = {}
    if documents:  # a calibration report (reliability bins) and a selection (its curve)
        from nnx_lab import ProbabilitySpec
        from nnx_lab.abstention import select_threshold
        from nnx_lab.calibration import fit_temperature, model_fingerprint

        spec, mid = ProbabilitySpec("categorical"), model_fingerprint(model)
        cal = fit_temperature(
            model.predict_proba(X, spec), y, model_id=mid, split_id="calibration"
        ).require()
        Xt = torch.randn(256, 4, generator=g)
        yt = torch.randint(0, 3, (256,), generator=g)
        rep = cal.report(model.predict_proba(Xt, spec), yt, model_id=mid, split_id="test")
        sel = select_threshold(
            model.predict_proba(Xt, spec).probabilities, yt, risk_ceiling=1.0, split_id="t2"
        )
        extra = {"calibrators": [cal, rep], "policies": [sel]}
    return nnx_lab.report(run.id, tmp_path / "run.html", runs_root=tmp_path / "runs", **extra)


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


def test_the_reliability_diagram_and_risk_coverage_curve_hover_from_a_file(browser, tmp_path):
    path = _report(tmp_path, documents=True)
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    requests, errors = [], []
    context.on("request", lambda r: requests.append(r.url))
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(path.as_uri())
        rel = page.locator('[data-chart="reliability-0"]')
        assert rel.locator("rect.bin").count() > 0  # bars drawn, beside its table
        assert page.locator('[data-slot="reliability-0"] [data-chart="reliability-0"]').count()
        rel.locator("svg").scroll_into_view_if_needed()
        box = rel.locator("svg").bounding_box()
        bar = rel.locator("rect.bin").first  # a "before" bar: that bin is not empty
        b = bar.bounding_box()
        page.mouse.move(b["x"] + b["width"] / 2, box["y"] + box["height"] / 2)
        text = rel.locator(".readout").text_content()
        assert text.startswith("confidence ")
        assert "before accuracy " in text
        assert "after (T = " in text
        assert " rows)" in text
        curve = page.locator('[data-chart="risk-coverage-0"]')
        curve.locator("svg").scroll_into_view_if_needed()
        cb = curve.locator("svg").bounding_box()
        page.mouse.move(cb["x"] + cb["width"] * 0.6, cb["y"] + cb["height"] * 0.5)
        text = curve.locator(".readout").text_content()
        assert text.startswith("coverage 0.")  # not rounded to an integer step
        assert "risk " in text
        assert "threshold " in text
        assert requests == [path.as_uri()]
        assert errors == []
    finally:
        context.close()
