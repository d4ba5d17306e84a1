"""ModelSummary in a real JupyterLab, driven by headless Chromium.

A notebook written here shows the ModelSummary of a small CNN with a sample batch of
digits. In the page: a subtree folds and unfolds from its toggle, the search box keeps
the layers whose name or type holds the text (and their parents), and a parameter
frozen in the kernel by the notebook's next cell shows as frozen without a refresh.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from lab_harness import KERNEL_TIMEOUT, REPO, JupyterServer
from playwright.sync_api import expect

SHOW = """
from nnx_lab import Losses, Nets, NNConvParams, NNModel, NNModelParams
from nnx_lab.example_data import digits_images
from nnx_lab.widgets import ModelSummary

conv = NNConvParams(output_dim=10, in_channels=1, image_size=8, conv_channels=(4, 8))
model = NNModel(conv, NNModelParams(net=Nets.CONV, loss=Losses.CROSS_ENTROPY))
X, y = digits_images()
summary = ModelSummary(model, X[:4])
summary
"""
FREEZE = """
model.net.features.requires_grad_(False)
print("features frozen")
"""

SELECT_SECOND_CELL = "() => { window.jupyterapp.shell.currentWidget.content.activeCellIndex = 1; }"


@pytest.fixture(scope="module")
def summary_bundle() -> None:
    if not (REPO / "nnx_lab" / "static" / "model_summary.js").exists():
        pytest.fail("nnx_lab/static/model_summary.js is missing: run `npm run build`")


@pytest.fixture(scope="module")
def summary_notebook(lab_root: Path) -> str:
    name = "model_summary_cnn.ipynb"
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    (lab_root / name).write_text(
        json.dumps(
            {
                "cells": [{**cell, "source": SHOW}, {**cell, "source": FREEZE}],
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )
    return name


def rows(widget):
    return widget.locator("tbody tr")


def row(widget, path: str):
    return widget.locator(f'tbody tr[data-path="{path}"]')


def test_fold_search_and_a_freeze_in_the_kernel_show_live(
    new_lab, jupyter_server: JupyterServer, summary_notebook: str, summary_bundle: None
):
    lab = new_lab()
    try:
        lab.open_notebook(summary_notebook)
        # Only the first cell: the summary shows the CNN before anything is frozen.
        lab.run_command("notebook:run-cell-and-select-next")
        widget = lab.page.locator(".nnx-msum").first
        expect(widget).to_be_visible(timeout=KERNEL_TIMEOUT)
        expect(rows(widget)).to_have_count(13)  # the root, features (+6 layers), head (+4)
        expect(row(widget, "features")).to_have_attribute("data-state", "trainable")
        expect(row(widget, "features.0").get_by_test_id("shape")).to_have_text("(4, 4, 8, 8)")
        totals = widget.get_by_test_id("totals")
        expect(totals).to_contain_text("3,098 parameters: 3,098 trainable, 0 frozen")

        # Fold the conv stack from its toggle, then unfold it.
        toggle = row(widget, "features").get_by_test_id("toggle")
        expect(toggle).to_have_attribute("aria-expanded", "true")
        toggle.click()
        expect(rows(widget)).to_have_count(7)
        expect(row(widget, "features.0")).to_have_count(0)
        expect(row(widget, "features").get_by_test_id("toggle")).to_have_attribute(
            "aria-expanded", "false"
        )
        row(widget, "features").get_by_test_id("toggle").click()
        expect(rows(widget)).to_have_count(13)

        # Search a layer: the two Linear layers and their parents stay.
        search = widget.get_by_test_id("search")
        search.fill("linear")
        matched = widget.locator('tbody tr[data-match="true"]')
        expect(matched).to_have_count(2)
        assert sorted(matched.evaluate_all("rs => rs.map(r => r.dataset.path)")) == [
            "head.1",
            "head.3",
        ]
        expect(rows(widget)).to_have_count(4)  # the root, head, head.1, head.3
        search.fill("")
        expect(rows(widget)).to_have_count(13)

        # Freeze the conv stack in the kernel (the next cell): the view follows, no refresh.
        # (The clicks above made the summary's cell the active one: select the next.)
        lab.page.evaluate(SELECT_SECOND_CELL)
        lab.run_command("notebook:run-cell")
        expect(lab.page.locator(".jp-OutputArea-output", has_text="features frozen")).to_have_count(
            1, timeout=KERNEL_TIMEOUT
        )
        expect(row(widget, "features")).to_have_attribute("data-state", "frozen", timeout=10_000)
        expect(row(widget, "features.3")).to_have_attribute("data-state", "frozen")
        expect(row(widget, "head")).to_have_attribute("data-state", "trainable")
        expect(row(widget, "")).to_have_attribute("data-state", "mixed")
        expect(totals).to_contain_text(re.compile(r"2,762 trainable, 336 frozen"))
        assert lab.tracebacks() == []
    finally:
        jupyter_server.shutdown_kernels()
