"""The JupyterLab extension in a real JupyterLab: the "nnx-lab runs" side panel lists
runs made by the test, a click opens a run's panel with its charts drawn, a running
run's panel follows it live and its Stop button stops it, compare overlays two runs in
two colours with the values that differ, Report downloads a run's HTML report, Export
bundle downloads its bundle (a zip whose manifest validates), and a
notebook opens a run's panel (``nnx_lab.open_in_panel`` and the monitor's header link).
First of all: the labextension JupyterLab loads is the one built from js/lab and
installed with the package, and the panel is there with no notebook open."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest
import yaml
from lab_harness import REPO, SCREENSHOTS, JupyterServer, close_lab, open_lab, pixels
from playwright.sync_api import expect

TESTS = REPO / "tests" / "python"
BUILT = REPO / "nnx_lab" / "labextension"
DOCS_IMG = REPO / "docs" / "img" / "lab_runs.png"
RUN_COLORS = ["#1f77b4", "#d62728"]  # js/lab/compare_view.js: the first two runs
LIVE_TIMEOUT = 90_000  # ms

TRAIN = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    import engine_factories as f
    from nnx_lab import NNOptimParams, Optims

    class Slow:
        def on_step_ended(self, event):
            time.sleep({sleep})

    optim = NNOptimParams(name=Optims.ADAM, max_lr={lr}, grad_clip_norm=1.0)
    params = f.train_params({root!r}, n_epochs={epochs}, seed={seed}, optim=optim,
                            checkpoint_every_s=0, name={name!r})
    run = f.model().train(params, callbacks=[Slow()])
    print("done", run.id, run.status.value, flush=True)
    """
)


def train(root: Path, *, lr: float, seed: int, epochs: int, sleep: float = 0.0, name=None):
    code = TRAIN.format(
        tests=str(TESTS), root=str(root), lr=lr, seed=seed, epochs=epochs, sleep=sleep, name=name
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "NNX_TQDM_DISABLE": "1"},
    )


def finished_run(root: Path, **kw) -> str:
    proc = train(root, **kw)
    out, err = proc.communicate(timeout=180)
    match = re.search(r"done (\w{32}) finished", out)
    assert match, err
    return match.group(1)


def steps_logged(run_dir: Path) -> int:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return sum(1 for x in lines if x.strip() and json.loads(x).get("event") == "step")


# -- a server of our own, with two finished runs in its runs/ -------------------------------


@pytest.fixture(scope="module")
def lab_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("labext") / "lab"
    (root / "runs").mkdir(parents=True)
    return root


@pytest.fixture(scope="module")
def two_runs(lab_dir):
    """Two finished runs that differ in their learning rate (and so in their id)."""
    return (
        finished_run(lab_dir / "runs", lr=1e-2, seed=42, epochs=3),
        finished_run(lab_dir / "runs", lr=1e-3, seed=42, epochs=3),
    )


@pytest.fixture(scope="module")
def server(lab_dir, two_runs, chromium_path):
    srv = JupyterServer.start(lab_dir, lab_dir.parent / "jupyter")
    try:
        yield srv
    finally:
        srv.stop()


# JupyterLab's restored promise sets a flag the test polls for. Awaiting the promise
# through ``evaluate`` failed twice ("Resulting promise was garbage collected", once in
# CI and once with it held on ``window``): Playwright tracks an awaited evaluation's
# promise weakly. ``evaluate`` now returns at once and ``wait_for_function`` polls.
RESTORED = "() => { window.jupyterapp.restored.then(() => { window.__nnxRestored = true; }); }"


def wait_restored(page) -> None:
    """Wait until JupyterLab has restored its layout (the page's current document)."""
    page.evaluate(RESTORED)
    page.wait_for_function("() => window.__nnxRestored === true")


@pytest.fixture
def page(browser, server, request):
    labs = []

    def make():
        lab = open_lab(browser, server)
        lab.page.set_viewport_size({"width": 1400, "height": 900})
        lab.workspace = f"r{secrets.token_hex(4)}"
        lab.page.goto(server.url(f"/lab/workspaces/{lab.workspace}"), wait_until="domcontentloaded")
        lab.page.wait_for_function(
            "() => !!window.jupyterapp && document.body.dataset.nnxLabRuns === 'ready'"
        )
        wait_restored(lab.page)
        labs.append(lab)
        return lab

    yield make
    rep = getattr(request.node, "rep_call", None)
    for i, lab in enumerate(labs):
        close_lab(lab, f"{request.node.name}-{i}", failed=rep is not None and rep.failed)


def open_side_panel(lab):
    tab = lab.page.locator('.jp-SideBar [data-id="nnx-lab-runs"]')
    expect(tab).to_be_visible()
    if lab.page.get_by_test_id("runs-panel").is_hidden():
        tab.click()
    panel = lab.page.get_by_test_id("runs-panel")
    expect(panel).to_be_visible()
    return panel


def row(lab, run_id):
    return lab.page.locator(f'[data-testid="run-row"][data-run-id="{run_id}"]')


def run_panel(lab, run_id):
    return lab.page.locator(f'[data-testid="run-panel"][data-run-id="{run_id}"]')


def wait_saved(server, lab, holds, timeout=30.0):
    """Until the page's workspace, kept by the server, ``holds(its keys)`` (a reload
    restores what it holds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        saved = set(server.api(f"/lab/api/workspaces/{lab.workspace}")["data"])
        if holds(saved):
            return
        time.sleep(0.3)
    raise AssertionError(f"the workspace never held what was asked; it holds {sorted(saved)}")


# -- the tests -------------------------------------------------------------------------------


def test_the_labextension_is_the_built_one_and_the_panel_needs_no_notebook(server, page, two_runs):
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(server.root.parent / "jupyter" / "config"),
        "JUPYTER_DATA_DIR": str(server.root.parent / "jupyter" / "data"),
    }
    out = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=server.root,
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    installed = Path(sys.prefix) / "share" / "jupyter" / "labextensions"
    section = text.split(str(installed), 1)[1]
    assert re.search(r"nnx-lab v[\d.]+ enabled\s+OK", section), text
    # what JupyterLab loads is the build of js/lab, not something else of that name
    built = json.loads((BUILT / "package.json").read_text())["jupyterlab"]["_build"]
    there = json.loads((installed / "nnx-lab" / "package.json").read_text())["jupyterlab"]["_build"]
    assert there == built, "reinstall (pip install -e .) after `npm run build`"
    assert (installed / "nnx-lab" / built["load"]).read_bytes() == (
        BUILT / built["load"]
    ).read_bytes()
    lab = page()
    entry = lab.page.evaluate(
        "() => JSON.parse(document.getElementById('jupyter-config-data').textContent)"
        ".federated_extensions.find(e => e.name === 'nnx-lab')"
    )
    assert entry["load"] == built["load"]
    expect(lab.page.locator(".jp-NotebookPanel")).to_have_count(0)
    open_side_panel(lab)
    for run_id in two_runs:
        expect(row(lab, run_id)).to_have_attribute("data-status", "finished")
    # and by the command palette's command
    lab.page.locator('.jp-SideBar [data-id="filebrowser"]').click()
    expect(lab.page.get_by_test_id("runs-panel")).to_be_hidden()
    lab.run_command("nnx-lab:show-runs")
    expect(lab.page.get_by_test_id("runs-panel")).to_be_visible()


def test_the_panel_lists_the_runs_and_a_click_opens_a_run_drawn(server, page, two_runs, lab_dir):
    a, b = two_runs
    lab = page()
    panel = open_side_panel(lab)
    expect(panel.get_by_test_id("run-row")).to_have_count(2)
    expect(row(lab, a)).to_contain_text("3 / 3")
    row(lab, a).click()
    view = run_panel(lab, a)
    expect(view).to_be_visible()
    chart = view.get_by_test_id("loss-chart")
    steps = steps_logged(lab_dir / "runs" / a)
    expect(chart).to_have_attribute("data-points", str(steps))
    expect(view.get_by_test_id("status")).to_have_text("finished")
    expect(view.get_by_test_id("epochs-table").locator("tbody tr")).to_have_count(3)
    assert pixels(chart, "var(--nnx-accent)") > 300  # the smoothed line is drawn
    assert pixels(view.get_by_test_id("lr-chart"), "var(--nnx-second)") > 100
    expect(lab.page.locator(".lm-TabBar-tabLabel", has_text=f"run {a[:8]}")).to_have_count(1)
    # a second run's panel docks beside the first
    row(lab, b).click()
    expect(run_panel(lab, b).get_by_test_id("status")).to_have_text("finished")
    boxes = [run_panel(lab, x).bounding_box() for x in (a, b)]
    assert boxes[0]["x"] + boxes[0]["width"] <= boxes[1]["x"] + 2  # side by side
    # a reload brings the run panels back, drawn from the server again (once the
    # workspace, kept by the server, holds them)
    keys = {f"nnx-lab-run:{row(lab, x).get_attribute('data-folder')}/{x}" for x in (a, b)}
    wait_saved(server, lab, lambda saved: keys <= saved)
    lab.page.reload(wait_until="domcontentloaded")
    expect(run_panel(lab, a).get_by_test_id("loss-chart")).to_have_attribute(
        "data-points", str(steps)
    )
    expect(run_panel(lab, b)).to_have_count(1)


def test_a_running_run_is_followed_live_and_its_stop_button_stops_it(
    server, page, lab_dir, two_runs
):
    proc = train(lab_dir / "runs", lr=1e-2, seed=7, epochs=400, sleep=0.02)
    try:
        lab = page()
        panel = open_side_panel(lab)
        running = panel.locator('[data-testid="run-row"][data-status="running"]')
        expect(running).to_have_count(1, timeout=LIVE_TIMEOUT)
        run_id = running.get_attribute("data-run-id")
        row(lab, two_runs[0]).click()  # a finished run, for the picture beside the live one
        expect(run_panel(lab, two_runs[0]).get_by_test_id("status")).to_have_text("finished")
        running.click()
        view = run_panel(lab, run_id)
        expect(view.get_by_test_id("status")).to_have_text("running")
        chart = view.get_by_test_id("loss-chart")
        lab.page.wait_for_function(
            "(el) => Number(el.dataset.points) > 0",
            arg=chart.element_handle(),
            timeout=LIVE_TIMEOUT,
        )
        first = int(chart.get_attribute("data-points"))
        lab.page.wait_for_function(
            "([el, n]) => Number(el.dataset.points) > n + 20",
            arg=[chart.element_handle(), first],
            timeout=LIVE_TIMEOUT,
        )
        assert view.get_attribute("data-following") == "live"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shot = SCREENSHOTS / "lab_runs.png"
        lab.page.screenshot(path=shot, animations="disabled")
        # the README's picture is refreshed on request: NNX_UPDATE_DOCS_IMG=1
        if os.environ.get("NNX_UPDATE_DOCS_IMG") == "1" or not DOCS_IMG.exists():
            shutil.copyfile(shot, DOCS_IMG)
        stop = view.get_by_test_id("stop")
        expect(stop).to_be_enabled()
        stop.click()
        expect(view.get_by_test_id("status")).to_have_text("stopped", timeout=LIVE_TIMEOUT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert f"done {run_id} stopped" in out, err
    run_dir = lab_dir / "runs" / run_id
    meta = yaml.safe_load((run_dir / "metadata.yaml").read_text())
    assert meta["status"] == "stopped"
    assert meta["epochs_completed"] < 400
    assert (run_dir / "checkpoints" / "last.json").is_file()
    # every step logged is drawn, and the list says so too
    expect(view.get_by_test_id("loss-chart")).to_have_attribute(
        "data-steps", str(steps_logged(run_dir))
    )
    expect(view.get_by_test_id("reason")).to_contain_text("JupyterLab runs panel")
    expect(view.get_by_test_id("reason")).not_to_contain_text("by JupyterLab runs panel")
    expect(row(lab, run_id)).to_have_attribute("data-status", "stopped", timeout=LIVE_TIMEOUT)


def test_compare_overlays_two_runs_in_two_colours_with_the_values_that_differ(
    server, page, two_runs
):
    a, b = two_runs
    lab = page()
    open_side_panel(lab)
    for run_id in (a, b):
        row(lab, run_id).get_by_test_id("run-pick").check()
    lab.page.get_by_test_id("runs-compare").click()
    view = lab.page.get_by_test_id("compare-panel")
    expect(view).to_be_visible()
    diff = view.locator('[data-testid="diff-row"][data-what="train.optim.max_lr"]')
    expect(diff).to_have_attribute("data-changes-id", "yes")
    expect(diff).to_contain_text("0.01")
    expect(diff).to_contain_text("0.001")
    chart = view.get_by_test_id("compare-loss-chart")
    lab.page.wait_for_function("(el) => Number(el.dataset.points) > 0", arg=chart.element_handle())
    lab.page.wait_for_timeout(300)  # the frame after the data
    for color in RUN_COLORS:
        assert pixels(chart, color) > 150, color
    assert pixels(view.get_by_test_id("compare-epoch-chart"), RUN_COLORS[1]) > 50
    view.screenshot(path=SCREENSHOTS / "lab_compare.png")
    # a reload brings the comparison back
    wait_saved(
        server,
        lab,
        lambda saved: any(k.startswith("nnx-lab-compare:") and a in k and b in k for k in saved),
    )
    lab.page.reload(wait_until="domcontentloaded")
    expect(
        lab.page.locator('[data-testid="diff-row"][data-what="train.optim.max_lr"]')
    ).to_have_attribute("data-changes-id", "yes")


def test_a_notebook_opens_a_runs_panel(server, page, two_runs, lab_dir):
    a, b = two_runs
    nb = nbformat.v4.new_notebook(
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        }
    )
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import nnx_lab\n"
            "from nnx_lab.widgets import TrainingMonitor\n"
            f'monitor = TrainingMonitor.from_run("{a}")\n'
            "monitor"
        ),
        nbformat.v4.new_code_cell(f'nnx_lab.open_in_panel("{b[:10]}")'),
    ]
    nbformat.write(nb, lab_dir / "open_runs.ipynb")
    lab = page()
    try:
        lab.page.goto(server.url(f"/lab/workspaces/n{secrets.token_hex(4)}/tree/open_runs.ipynb"))
        lab.wait_notebook_ready()
        lab.run_all()
        assert lab.tracebacks() == []
        # open_in_panel's output opened b's panel, beside the notebook
        expect(run_panel(lab, b).get_by_test_id("status")).to_have_text("finished")
        notebook = lab.page.locator(".jp-NotebookPanel").bounding_box()
        assert notebook["x"] + notebook["width"] <= run_panel(lab, b).bounding_box()["x"] + 2
        expect(lab.page.get_by_test_id("open-run-link")).to_have_text(
            f"Open run {b[:8]} in a panel"
        )
        # the monitor's header link opens a's
        expect(run_panel(lab, a)).to_have_count(0)
        link = lab.page.locator(".jp-OutputArea .nnx-monitor").get_by_test_id("open-in-panel")
        expect(link).to_be_visible()
        link.click()
        expect(run_panel(lab, a).get_by_test_id("status")).to_have_text("finished")
        # the output opens its panel once: the notebook saved and reloaded shows the
        # output again (same output, same nonce) and opens no panel for it
        lab.page.locator(".lm-TabBar-tab", has_text=f"run {b[:8]}").locator(
            ".lm-TabBar-tabCloseIcon"
        ).click()
        expect(run_panel(lab, b)).to_have_count(0)
        lab.page.locator(".lm-TabBar-tab", has_text="open_runs.ipynb").click()
        lab.save()
        lab.reload()
        expect(lab.page.get_by_test_id("open-run-link")).to_be_visible()
        time.sleep(2)
        expect(run_panel(lab, b)).to_have_count(0)
    finally:
        server.shutdown_kernels()


# -- names and compare's x axis (issue 21 §5, §6) ------------------------------------------


def test_a_runs_name_comes_first_and_is_renamed_in_its_panel(server, page, lab_dir):
    named = finished_run(lab_dir / "runs", lr=3e-3, seed=5, epochs=2, name="high lr")
    lab = page()
    open_side_panel(lab)
    line = row(lab, named)
    expect(line.get_by_test_id("run-name")).to_have_text("high lr")
    # the name before the id, and the best says which metric and which way
    order = line.evaluate(
        "(el) => [...el.querySelectorAll('[data-testid=run-name], [data-testid=run-id]')]"
        ".map((x) => x.dataset.testid)"
    )
    assert order == ["run-name", "run-id"]
    expect(line.get_by_test_id("run-best")).to_contain_text("best val error ↓ ")
    line.click()
    view = run_panel(lab, named)
    expect(view.get_by_test_id("run-name")).to_have_text("high lr")
    expect(lab.page.locator(".lm-TabBar-tabLabel", has_text="high lr")).to_have_count(1)
    # a name the server refuses: said under the title, nothing written
    meta_path = lab_dir / "runs" / named / "metadata.yaml"
    view.get_by_test_id("run-rename").click()
    box = view.get_by_test_id("run-name-input")
    box.fill("x" * 101)  # the server's cap, said in words (the box itself takes it)
    box.press("Enter")
    expect(view.get_by_test_id("run-rename-error")).to_contain_text("at most 100 characters")
    assert yaml.safe_load(meta_path.read_text())["name"] == "high lr"
    # a good one: the panel, its tab, the record and the list all say it
    box.fill("lower lr, seed 5")
    box.press("Enter")
    expect(view.get_by_test_id("run-name")).to_have_text("lower lr, seed 5")
    expect(view.get_by_test_id("run-rename-error")).to_be_hidden()
    expect(lab.page.locator(".lm-TabBar-tabLabel", has_text="lower lr, seed 5")).to_have_count(1)
    meta = yaml.safe_load(meta_path.read_text())
    assert (meta["name"], meta["status"]) == ("lower lr, seed 5", "finished")
    expect(line.get_by_test_id("run-name")).to_have_text("lower lr, seed 5", timeout=10_000)
    lab.page.reload(wait_until="domcontentloaded")
    lab.page.wait_for_function(
        "() => !!window.jupyterapp && document.body.dataset.nnxLabRuns === 'ready'"
    )
    wait_restored(lab.page)
    open_side_panel(lab)
    expect(row(lab, named).get_by_test_id("run-name")).to_have_text("lower lr, seed 5")


def test_report_downloads_the_runs_html_and_writes_nothing_in_the_runs_root(
    server, page, two_runs, lab_dir, tmp_path
):
    a, _ = two_runs
    before = sorted(p.name for p in (lab_dir / "runs" / a).rglob("*"))
    lab = page()
    open_side_panel(lab)
    row(lab, a).click()
    view = run_panel(lab, a)
    expect(view.get_by_test_id("status")).to_have_text("finished")
    with lab.page.expect_download() as info:
        view.get_by_test_id("report").click()
    download = info.value
    assert download.suggested_filename == f"report_{a}.html"
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    text = saved.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>")
    assert f"nnx-lab run {a}" in text
    expect(view.get_by_test_id("report-note")).to_have_text(f"Report downloaded as report_{a}.html")
    assert sorted(p.name for p in (lab_dir / "runs" / a).rglob("*")) == before


def test_export_bundle_downloads_a_zip_whose_manifest_validates(
    server, page, two_runs, lab_dir, tmp_path
):
    from nnx_lab.bundles import inspect_bundle, validate_bundle

    a, _ = two_runs
    before = sorted(p.name for p in (lab_dir / "runs").rglob("*"))
    lab = page()
    open_side_panel(lab)
    row(lab, a).click()
    view = run_panel(lab, a)
    expect(view.get_by_test_id("status")).to_have_text("finished")
    with lab.page.expect_download(timeout=120_000) as info:
        view.get_by_test_id("run-export").click()
    download = info.value
    assert download.suggested_filename == f"bundle_{a}.zip"
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    validate_bundle(saved)  # every payload's SHA-256
    bundle = inspect_bundle(saved)
    assert (bundle.run_id, bundle.capability, bundle.epoch) == (a, "resumable", 3)
    expect(view.get_by_test_id("run-export-status")).to_have_text(f"Saved bundle_{a}.zip")
    expect(view.get_by_test_id("run-export")).to_be_enabled()
    assert sorted(p.name for p in (lab_dir / "runs").rglob("*")) == before


def test_compare_draws_on_the_x_axis_chosen_and_its_table_scrolls(server, page, two_runs, lab_dir):
    a, b = two_runs
    third = finished_run(lab_dir / "runs", lr=5e-2, seed=9, epochs=1, name="third")
    lab = page()
    lab.page.set_viewport_size({"width": 700, "height": 900})
    open_side_panel(lab)
    for run_id in (a, b, third):
        row(lab, run_id).get_by_test_id("run-pick").check()
    lab.page.get_by_test_id("runs-compare").click()
    view = lab.page.get_by_test_id("compare-panel")
    chart = view.get_by_test_id("compare-loss-chart")
    lab.page.wait_for_function("(el) => Number(el.dataset.points) > 0", arg=chart.element_handle())
    steps = max(steps_logged(lab_dir / "runs" / x) for x in (a, b, third))
    expect(chart).to_have_attribute("data-x-max", str(steps))  # by step: the longest run's
    axis = view.get_by_test_id("compare-x")
    expect(axis.locator("option")).to_have_text(
        ["step", "relative time", "wall time", "epoch", "fraction of the run"]
    )
    axis.select_option("fraction")
    expect(chart).to_have_attribute("data-axis", "fraction")
    expect(chart).to_have_attribute("data-x-max", "1")  # every run spans the whole width
    lab.page.wait_for_timeout(300)  # the frame after the data
    for color in RUN_COLORS:
        assert pixels(chart, color) > 150, color  # both runs drawn across the new axis
    axis.select_option("relative")
    expect(chart).to_have_attribute("data-axis", "relative")
    seconds = float(chart.get_attribute("data-x-max"))
    assert 0 < seconds < 600  # seconds since each run started, from the logs' own clock
    axis.select_option("epoch")
    expect(chart).to_have_attribute("data-x-max", "3")
    # at 700 px the third run's column is reached by scrolling the table, not cut off
    scroll = view.get_by_test_id("compare-diff-scroll")
    expect(view.get_by_test_id("compare-diff").locator("thead")).to_contain_text("third")
    head = view.get_by_test_id("compare-diff").locator("thead th").nth(3)  # the last run's
    scroll.evaluate("(el) => { el.scrollLeft = el.scrollWidth; }")
    box, frame = head.bounding_box(), scroll.bounding_box()
    assert frame["x"] - 1 <= box["x"]
    assert box["x"] + box["width"] <= frame["x"] + frame["width"] + 1
    first = view.get_by_test_id("compare-diff").locator("tbody tr td").first
    assert first.bounding_box()["x"] >= frame["x"] - 1  # the value names stay in view
    view.screenshot(path=SCREENSHOTS / "lab_compare_axes.png")
