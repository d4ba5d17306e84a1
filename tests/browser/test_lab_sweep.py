"""The Sweep widget in a real JupyterLab (issue 28): a 4-trial grid over the wine plan
runs in the background; the parallel-coordinates chart gains one line per finished
trial as trials end; a page reload while trials still run brings the lines back and
they go on growing to 4; a brush dragged along an axis greys the lines outside it, the
kernel keeps it (it is there again after a reload), and a double-click clears it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lab_harness import JupyterServer, Lab, write_notebook
from playwright.sync_api import expect

pytestmark = pytest.mark.usefixtures("monitor_bundle")

RUN_TIMEOUT = 120_000  # ms
N_TRIALS = 4
METRIC_AXIS = "val.loss"

SWEEP = """
from nnx_lab import ExperimentPlan
from nnx_lab.example_data import WINE_DIMS, wine_train_loader, wine_val_loader
from nnx_lab.widgets import Sweep

plan = (
    ExperimentPlan()
    .with_net(hidden_dims=[8], **WINE_DIMS)
    .with_data(wine_train_loader, val=wine_val_loader, identity="wine")
    .with_lr(3e-3)
    .with_epochs(30)  # seconds a trial: a reload lands while trials run
    .with_seed(3)
)
space = {"train.optim.max_lr": [1e-3, 1e-2], "net.hidden_dims": [[8], [16, 8]]}
sweep = Sweep(plan, space)  # a grid: trials 0, 1 at lr 1e-3, trials 2, 3 at lr 1e-2
sweep
"""

_VIEW_HEIGHT = 260  # the chart's viewBox height (js/sweep/view.js SIZE)

# how many trial lines the chart draws, and which of them are greyed by a brush
_LINES = ".nnx-sweep-chart polyline.nnx-sweep-line"


def _line_count(lab: Lab) -> int:
    return lab.page.locator(_LINES).count()


def _wait_lines_above(lab: Lab, n: int) -> int:
    lab.page.wait_for_function(
        "([sel, n]) => document.querySelectorAll(sel).length > n",
        arg=[_LINES, n],
        timeout=RUN_TIMEOUT,
    )
    return _line_count(lab)


def _greyed(lab: Lab) -> list[int]:
    out = lab.page.locator(f"{_LINES}.nnx-sweep-out")
    return sorted(int(x) for x in out.evaluate_all("ls => ls.map(l => l.dataset.trial)"))


def _finished_rows(lab: Lab) -> int:
    return lab.page.locator('.nnx-sweep-table tr[data-status="finished"]').count()


def _drag(lab: Lab, sweep, axis: str, top: float, bottom: float) -> tuple[float, float]:
    """Drag down along ``axis`` from ``top`` to ``bottom`` (fractions of its height);
    the dragged range in the chart's SVG units (the viewBox's y)."""
    hit = sweep.locator(f'g[data-axis="{axis}"] rect.nnx-sweep-hit')
    box = hit.bounding_box()
    svg = sweep.get_by_test_id("chart").locator("svg").bounding_box()
    x = box["x"] + box["width"] / 2
    y0, y1 = (box["y"] + f * box["height"] for f in (top, bottom))
    lab.page.mouse.move(x, y0)
    lab.page.mouse.down()
    lab.page.mouse.move(x, y1, steps=5)
    lab.page.mouse.up()
    to_svg = lambda y: (y - svg["y"]) / svg["height"] * _VIEW_HEIGHT  # noqa: E731
    return to_svg(y0), to_svg(y1)


def _axis_ys(sweep, axis_index: int) -> dict[int, float]:
    """Each trial line's y (SVG units) where it crosses the ``axis_index``-th axis."""
    pts = sweep.locator(_LINES.split(" ", 1)[1]).evaluate_all(
        "ls => ls.map(l => [Number(l.dataset.trial), l.getAttribute('points')])"
    )
    return {i: float(p.split(" ")[axis_index].split(",")[1]) for i, p in pts}


def test_the_sweep_chart_fills_comes_back_after_a_reload_and_brushes(
    new_lab, jupyter_server: JupyterServer, lab_root: Path
):
    lab = new_lab()
    try:
        write_notebook(lab_root / "sweep_reload.ipynb", [SWEEP])
        lab.open_notebook("sweep_reload.ipynb")
        lab.run_all()  # Sweep() returns at once: the trials go on in a thread
        assert lab.tracebacks() == []
        lab.save()  # the widget's output must be in the file to come back after a reload
        sweep = lab.page.locator(".nnx-sweep").first
        header = sweep.get_by_test_id("header")
        # the first trial ends: one line, and its row in the table says finished
        seen = _wait_lines_above(lab, 0)
        assert seen == _finished_rows(lab)
        # premise of the reload check: trials are still running when the page reloads
        assert seen < N_TRIALS, "the sweep ended before the reload: lengthen the trials"
        expect(header).to_have_text(re.compile(r"\(running\)"))
        lab.reload()
        sweep = lab.page.locator(".nnx-sweep").first
        header = sweep.get_by_test_id("header")
        # the lines come back from the kernel (at least as many as before) ...
        expect(sweep.get_by_test_id("chart").locator("polyline")).not_to_have_count(0)
        back = _line_count(lab)
        assert back >= seen
        assert back < N_TRIALS, "the sweep ended during the reload: lengthen the trials"
        # ... and keep growing, one per finished trial, to all of them
        while seen < N_TRIALS:
            seen = _wait_lines_above(lab, seen)
            assert seen <= _finished_rows(lab)
        expect(header).to_have_text(
            re.compile(rf"^{N_TRIALS} of {N_TRIALS} trials done \(finished\); {N_TRIALS} shown"),
            timeout=RUN_TIMEOUT,
        )
        assert _finished_rows(lab) == N_TRIALS
        assert _greyed(lab) == []
        # the best trial's line is marked
        expect(lab.page.locator(f"{_LINES}.nnx-sweep-best")).to_have_count(1)

        # brush the val.loss axis from 5% to 50% of its height (dragged down)
        brushed = _drag(lab, sweep, METRIC_AXIS, 0.05, 0.5)
        expect(sweep.get_by_test_id(f"brush-{METRIC_AXIS}")).to_be_visible()
        # the lines whose point on that axis lies outside the dragged range are greyed
        ys = _axis_ys(sweep, 2)  # axes: max_lr, hidden_dims, val.loss, ...
        outside = sorted(i for i, y in ys.items() if not brushed[0] <= y <= brushed[1])
        assert 0 < len(outside) < N_TRIALS, (ys, brushed)  # not all, not none
        assert _greyed(lab) == outside
        kept = N_TRIALS - len(outside)
        expect(header).to_have_text(re.compile(rf"; {kept} shown"))
        expect(sweep.locator("tbody tr.nnx-sweep-out")).to_have_count(len(outside))
        # the brush is the kernel's trait: after a reload the page draws it again
        lab.reload()
        sweep = lab.page.locator(".nnx-sweep").first
        expect(sweep.get_by_test_id(f"brush-{METRIC_AXIS}")).to_be_visible()
        expect(lab.page.locator(_LINES)).to_have_count(N_TRIALS)
        assert _greyed(lab) == outside
        # a double-click on the axis clears it
        sweep.locator(f'g[data-axis="{METRIC_AXIS}"] rect.nnx-sweep-hit').dblclick()
        expect(sweep.get_by_test_id(f"brush-{METRIC_AXIS}")).to_have_count(0)
        expect(sweep.get_by_test_id("header")).to_have_text(re.compile(rf"; {N_TRIALS} shown"))
        assert _greyed(lab) == []
        assert lab.tracebacks() == []
    finally:
        jupyter_server.shutdown_kernels()
