"""Interpretation in a real JupyterLab, driven by headless Chromium.

A notebook written here interprets an untrained digits CNN on 60 images. In the page: the
confusion matrix holds 10 x 10 cells summing to 60, the row-% toggle changes them, a
click on a cell lists its digits as canvases, the top losses page without a message to
the kernel, and a page reload draws the same widget again (its state is the kernel's).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lab_harness import KERNEL_TIMEOUT, REPO, JupyterServer
from playwright.sync_api import expect

SHOW = """
import torch
from nnx_lab import Interpretation, Losses, Nets, NNConvParams, NNModel, NNModelParams
from nnx_lab.example_data import digits_images

torch.manual_seed(0)
conv = NNConvParams(output_dim=10, image_size=8, conv_channels=(4,), hidden_dims=(16,))
model = NNModel(conv, NNModelParams(net=Nets.CONV, loss=Losses.CROSS_ENTROPY))
X, y = digits_images()
view = Interpretation(model, (X[:60], y[:60]), top_k=12, page_size=5)
view
"""


@pytest.fixture(scope="module")
def interpretation_notebook(lab_root: Path) -> str:
    if not (REPO / "nnx_lab" / "static" / "interpretation.js").exists():
        pytest.fail("nnx_lab/static/interpretation.js is missing: run `npm run build`")
    name = "interpretation_cnn.ipynb"
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    (lab_root / name).write_text(
        json.dumps(
            {
                "cells": [{**cell, "source": SHOW}],
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )
    return name


def counts(widget) -> list[int]:
    texts = widget.locator("[data-testid=confusion] [data-cell]").all_inner_texts()
    return [int(t.replace(",", "")) for t in texts]


def test_the_matrix_a_cell_click_paging_and_a_reload(
    new_lab, jupyter_server: JupyterServer, interpretation_notebook: str
):
    lab = new_lab()
    try:
        lab.open_notebook(interpretation_notebook)
        lab.run_all()
        widget = lab.page.locator(".nnx-int").first
        expect(widget).to_be_visible(timeout=KERNEL_TIMEOUT)
        expect(widget.locator("[data-testid=confusion] [data-cell]")).to_have_count(100)
        assert sum(counts(widget)) == 60

        # a filled cell lists its digits as canvases
        filled = next(i for i, c in enumerate(counts(widget)) if c > 0)
        t, p = divmod(filled, 10)
        widget.locator(f'[data-cell="{t},{p}"]').click()
        expect(widget.get_by_test_id("cell-title")).to_contain_text(f"true {t}, predicted {p}")
        expect(widget.get_by_test_id("cell-samples").locator("canvas").first).to_be_visible()

        # row shares, then the top losses' second page
        widget.get_by_test_id("normalize").click()
        expect(widget.locator(f'[data-cell="{t},{p}"]')).to_contain_text("%")
        first = (
            widget.get_by_test_id("top-table").locator("tbody tr").first.get_attribute("data-id")
        )
        widget.get_by_test_id("top-next").click()
        expect(widget.get_by_test_id("top-page")).to_have_text("page 2 of 3")
        assert (
            widget.get_by_test_id("top-table").locator("tbody tr").first.get_attribute("data-id")
            != first
        )

        # a reload draws it again from the kernel's state, the toggle kept
        lab.save()  # the widget's output (its model id) must be in the file to come back
        lab.reload()
        widget = lab.page.locator(".nnx-int").first
        expect(widget).to_be_visible(timeout=KERNEL_TIMEOUT)
        expect(widget.locator(f'[data-cell="{t},{p}"]')).to_contain_text("%")
        assert lab.tracebacks() == []
    finally:
        jupyter_server.shutdown_kernels()
