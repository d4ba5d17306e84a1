"""The widgets' built front end: one bundle per widget within its size budget, the
protocol written the same on both sides, the traits the views read, import hygiene."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from nnx_lab.widgets import BundleMissingError, TrainingMonitor, _bundle, _monitor_report, _protocol

REPO = pathlib.Path(__file__).resolve().parents[3]
JS = REPO / "js"
JS_PROTOCOL = JS / "shared" / "protocol.js"
BUDGETS = json.loads((JS / "budgets.json").read_text())
ENTRIES = sorted(p.parent.name for p in JS.glob("*/index.js") if p.parent.name != "shared")


def test_every_widget_has_an_entry_and_a_budget():
    assert ENTRIES == [
        "abstention",
        "calibration",
        "dataset_summary",
        "drift",
        "interpretation",
        "lr_finder",
        "model_summary",
        "monitor",
        "plan_builder",
        "playground",
        "sweep",
    ]
    assert set(ENTRIES) == set(BUDGETS) - {"_comment"}


@pytest.mark.parametrize("entry", ENTRIES)
def test_each_bundle_is_built_within_its_budget(entry):
    js = _bundle.STATIC_DIR / f"{entry}.js"
    css = _bundle.STATIC_DIR / f"{entry}.css"
    assert js.is_file(), "run `npm run build` (or `pip install -e .`)"
    text = js.read_bytes()
    budget = BUDGETS[entry]
    assert len(text) <= budget["js"], f"{entry}.js is {len(text)} bytes, budget {budget['js']}"
    gz = len(gzip.compress(text, 9))
    assert gz <= budget["js_gzip"], f"{entry}.js gzipped is {gz} bytes, budget {budget['js_gzip']}"
    assert css.stat().st_size <= budget["css"]
    # Plotly (3.5 MB) is the Python API's figure library; it never enters a widget's _esm
    assert b"plotly" not in text.lower()


def test_the_monitor_bundle_carries_uplot_and_its_css():
    js = (_bundle.STATIC_DIR / "monitor.js").read_text()
    css = (_bundle.STATIC_DIR / "monitor.css").read_text()
    assert "uplot" in js  # the chart container class uPlot creates
    assert ".uplot" in css  # uPlot's stylesheet is bundled
    assert ".u-over" in css
    assert "--jp-" in css
    m = TrainingMonitor()
    try:
        assert m._esm == js
        assert m._css == css
    finally:
        m.close()


def test_a_missing_bundle_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setattr(_bundle, "STATIC_DIR", tmp_path)
    with pytest.raises(BundleMissingError, match=r"npm run build.*pip install -e \.") as info:
        TrainingMonitor()
    assert isinstance(info.value, FileNotFoundError)


def test_the_bundle_is_reread_when_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setattr(_bundle, "STATIC_DIR", tmp_path)
    f = tmp_path / "x.js"
    f.write_text("one")
    assert _bundle.read_asset("x.js") == "one"
    f.write_text("two!")
    os.utime(f, (f.stat().st_atime, f.stat().st_mtime + 5))
    assert _bundle.read_asset("x.js") == "two!"


def _js_const(name: str) -> str:
    text = JS_PROTOCOL.read_text()
    match = re.search(rf"export const {name} = (.+?);\n", text, re.S)
    assert match, f"{name} not found in js/shared/protocol.js"
    return match.group(1)


def test_js_and_python_protocols_agree():
    assert int(_js_const("PROTOCOL_VERSION")) == _protocol.PROTOCOL_VERSION
    for name in ("HELLO", "STOP", "SNAPSHOT_PNG", "UPDATE", "SNAPSHOT"):
        assert _js_const(name).strip('"') == getattr(_protocol, name), name
    for name in ("REPORT", "REPORT_DONE"):  # the monitor's Report button
        assert _js_const(name).strip('"') == getattr(_monitor_report, name), name
    assert int(_js_const("MAX_MESSAGE_BYTES")) == _protocol.MAX_MESSAGE_BYTES
    statuses = re.findall(r'"(\w+)"', _js_const("STATUSES"))
    assert tuple(statuses) == _protocol.STATUSES


def test_the_widget_syncs_every_trait_the_view_reads():
    read = set()
    for path in (JS / "monitor").glob("*.js"):
        read |= set(re.findall(r'\b(?:m|model)\.get\("(\w+)"\)', path.read_text()))
        read |= set(re.findall(r'"change:(\w+)"', path.read_text()))
    view = (JS / "monitor" / "view.js").read_text()
    header = re.search(r"HEADER_TRAITS = \[(.*?)\];", view, re.S)
    read |= set(re.findall(r'"(\w+)"', header.group(1)))
    assert {"status", "loss_nonfinite_since", "from_log", "snapshot_of", "smoothing"} <= read
    m = TrainingMonitor()
    synced = set(m.keys)
    m.close()
    assert read <= synced, f"the view reads traits the kernel does not sync: {read - synced}"


@pytest.mark.parametrize(
    ("entry", "make"),
    [
        ("plan_builder", lambda: _widgets().PlanBuilder()),
        ("drift", lambda: _widgets().DriftReport(_plans().ExperimentPlan())),
        ("lr_finder", lambda: _lr_widget()),
    ],
)
def test_each_widget_syncs_every_trait_its_view_reads(entry, make):
    read = set()
    for path in (JS / entry).glob("*.js"):
        text = path.read_text()
        read |= set(re.findall(r'\b(?:m|model)\.get\("(\w+)"\)', text))
        read |= set(re.findall(r'"change:(\w+)"', text))
        traits = re.search(r"TRAITS = \[(.*?)\];", text, re.S)
        if traits:
            read |= set(re.findall(r'"(\w+)"', traits.group(1)))
        listed = re.search(r"for \(const name of \[(.*?)\]\)", text, re.S)
        if listed:
            read |= set(re.findall(r'"(\w+)"', listed.group(1)))
    widget = make()
    synced = set(widget.keys)
    widget.close()
    assert len(read) > 5
    missing = read - synced
    assert not missing, f"the {entry} view reads traits the kernel does not sync: {missing}"


def _widgets():
    import nnx_lab.widgets

    return nnx_lab.widgets


def _lr_widget():
    import engine_factories as f

    loader, _ = f.loaders()
    return _widgets().LRFinderWidget(f.model(), loader, autostart=False)


def _plans():
    import nnx_lab.plans

    return nnx_lab.plans


def test_importing_the_widgets_loads_no_torch():
    code = (
        "import sys\n"
        "import nnx_lab.widgets\n"
        "from nnx_lab.widgets import DriftReport, LRFinderWidget, PlanBuilder, TrainingMonitor\n"
        "loaded = sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
