"""The kernel side and the real view-side JavaScript agree.

A monitor is fed a run long enough to be decimated; the messages it sends are
replayed by Node through ``js/shared/transport.js`` (tests/js/replay.mjs), and what
the JavaScript view then holds must equal what the kernel holds, value for value.
"""

from __future__ import annotations

import base64
import json
import math
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

from nnx_lab.widgets import TrainingMonitor
from nnx_lab.widgets._testing import FakeFrontend, scripted_run

REPO = pathlib.Path(__file__).resolve().parents[3]
REPLAY = REPO / "tests" / "js" / "replay.mjs"


def replay(messages, view, tmp_path, accept: str | None = None, series=("steps", "epochs")) -> dict:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (Node >= 20; `bash scripts/test` installs it)")
    payload = {
        "view": view,
        "series": list(series),
        "accept": accept,
        "messages": [
            {"content": c, "buffers": [base64.b64encode(b).decode() for b in buffers]}
            for c, buffers in messages
        ],
    }
    path = tmp_path / "messages.json"
    path.write_text(json.dumps(payload))
    out = subprocess.run(
        [node, str(REPLAY), str(path)], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(out.stdout)


def as_list(values) -> list:
    return [v if isinstance(v, str) else float(v) for v in values]


def kernel_columns(series) -> dict[str, list]:
    return {
        name: ["NaN" if isinstance(v, float) and math.isnan(v) else float(v) for v in col.tolist()]
        for name, col in ((f, series.column(f)) for f in series.fields)
    }


@pytest.fixture
def monitor():
    m = TrainingMonitor(max_points=1_000, max_epochs=100)
    yield m
    m.close()


def test_a_view_that_joins_mid_run_ends_with_exactly_what_the_kernel_holds(monitor, tmp_path):
    fe = FakeFrontend(monitor)
    monitor._transport.timer_factory = None
    now = [0.0]
    monitor._clock = lambda: now[0]  # 20 ms a step: an update every 5 steps
    events = scripted_run(n_epochs=300, steps_per_epoch=25, log_every=7, nonfinite_from=6_001)
    half = len(events) // 2

    def play(part):
        for event in part:
            now[0] += 0.02
            getattr(monitor, event.hook, lambda e: None)(event)

    play(events[:half])
    fe.clear()
    fe.hello()  # a page reload mid-run
    play(events[half:])
    assert sum(c["kind"] == "update" for c in fe.custom) > 500
    steps, epochs = monitor._steps, monitor._epochs
    assert steps.width > 1  # the run was long enough to be decimated...
    assert epochs.width > 1
    assert steps.compactions > 1  # ...again after the view joined

    held = replay(fe.custom_with_buffers(), fe.view, tmp_path)
    assert held["synced"] is True
    assert held["hellos"] == 1
    for name, series in (("steps", steps), ("epochs", epochs)):
        js = held["series"][name]
        assert (js["length"], js["width"], js["total"]) == (len(series), series.width, series.total)
        expected = kernel_columns(series)
        assert set(js["columns"]) == set(expected), name
        for field, values in expected.items():
            assert as_list(js["columns"][field]) == values, (name, field)
    # the non-finite tail arrived as gaps
    loss = np.asarray(
        [np.nan if v == "NaN" else v for v in held["series"]["steps"]["columns"]["loss"]]
    )
    assert np.isnan(loss[-1])
    assert np.isfinite(loss[0])


def test_a_view_that_misses_an_update_asks_again(monitor, tmp_path):
    fe = FakeFrontend(monitor)
    monitor._transport.timer_factory = None
    now = [0.0]
    monitor._clock = lambda: now[0]
    fe.hello()
    for event in scripted_run(n_epochs=2, steps_per_epoch=50, log_every=5):
        now[0] += 0.05
        getattr(monitor, event.hook, lambda e: None)(event)
    messages = fe.custom_with_buffers()
    updates = [i for i, (c, _) in enumerate(messages) if c["kind"] == "update"]
    assert len(updates) >= 3
    del messages[updates[1]]  # lost on the way
    held = replay(messages, fe.view, tmp_path)
    assert held["synced"] is False
    assert held["hellos"] == 2  # it said hello again instead of drawing a wrong picture
