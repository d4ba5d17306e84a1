"""The widget pipeline: the built bundle, the protocol on both sides, import hygiene."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from nnx_lab.widgets import BundleMissingError, TrainingMonitor, _bundle, _protocol

REPO = pathlib.Path(__file__).resolve().parents[2]
JS_PROTOCOL = REPO / "js" / "protocol.js"


def test_the_bundle_is_built_small_and_exports_render():
    js = _bundle.STATIC_DIR / "monitor.js"
    css = _bundle.STATIC_DIR / "monitor.css"
    assert js.is_file(), "run `npm run build` (or `pip install -e .`)"
    assert css.is_file()
    text = js.read_text()
    assert "render" in text
    assert re.search(r"export\s*\{", text), "the bundle must be an ES module"
    assert js.stat().st_size < 100_000, "keep the monitor bundle small (no chart library)"
    m = TrainingMonitor()
    assert m._esm == text
    assert "--jp-" in m._css
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
    import os

    os.utime(f, (f.stat().st_atime, f.stat().st_mtime + 5))
    assert _bundle.read_asset("x.js") == "two!"


def _js_const(name: str) -> str:
    text = JS_PROTOCOL.read_text()
    match = re.search(rf"export const {name} = (.+?);\n", text, re.S)
    assert match, f"{name} not found in js/protocol.js"
    return match.group(1)


def test_js_and_python_protocols_agree():
    assert int(_js_const("PROTOCOL_VERSION")) == _protocol.PROTOCOL_VERSION
    for name in ("HELLO", "STOP", "RESET", "APPEND"):
        assert _js_const(name).strip('"') == getattr(_protocol, name), name
    fields = re.findall(r'\["(\w+)", "(\w+)"\]', _js_const("STEP_FIELDS"))
    assert tuple(fields) == _protocol.STEP_FIELDS
    statuses = re.findall(r'"(\w+)"', _js_const("STATUSES"))
    assert tuple(statuses) == _protocol.STATUSES


def test_the_widget_syncs_the_traits_the_view_reads():
    view = (REPO / "js" / "monitor.js").read_text()
    read = set(re.findall(r'model\.get\("(\w+)"\)', view))
    m = TrainingMonitor()
    synced = set(m.keys)
    m.close()
    assert read <= synced, f"the view reads traits the kernel does not sync: {read - synced}"


def test_widgets_do_not_import_torch_and_the_engine_does_not_import_widgets():
    code = (
        "import sys\n"
        "import nnx_lab.widgets\n"
        "assert 'torch' not in sys.modules, 'nnx_lab.widgets imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
    engine_modules = sorted(p.stem for p in (REPO / "nnx_lab" / "engine").glob("*.py"))
    for path in (REPO / "nnx_lab" / "engine").glob("*.py"):
        source = path.read_text()
        assert "nnx_lab.widgets" not in source, path
        assert "from ..widgets" not in source, path
    assert "events" in engine_modules
