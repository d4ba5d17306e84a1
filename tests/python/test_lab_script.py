"""The main job's command (scripts/lab): a second start skips the install when the
environment already holds this checkout's build, and reinstalls when what the build
reads has changed. Run against a clone of the checkout with a stand-in interpreter that
records what it is asked, so no real install or JupyterLab is started."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/../calls.log"
"""


@pytest.fixture
def checkout(tmp_path):
    if shutil.which("git") is None:
        pytest.fail("git is needed to clone the checkout (apt-get install git)")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--local", str(REPO), str(clone)], check=True)
    shutil.copy(REPO / "scripts/lab", clone / "scripts/lab")  # the script as it is now
    # what scripts/lab expects of a built checkout and an installed environment
    (clone / "nnx_lab/static").mkdir(parents=True)
    (clone / "nnx_lab/static/monitor.js").write_text("// built\n")
    venv = clone / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/python").write_text(FAKE_PYTHON)
    (venv / "bin/python").chmod(0o755)
    ext = venv / "share/jupyter/labextensions/nnx-lab"
    ext.mkdir(parents=True)
    (ext / "package.json").write_text("{}\n")
    return clone


def _start(clone: Path, **env: str) -> tuple[str, list[str]]:
    log = clone / ".venv/calls.log"
    log.unlink(missing_ok=True)
    out = subprocess.run(
        ["bash", "scripts/lab", "--version"],
        cwd=clone,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    )
    calls = log.read_text().splitlines() if log.exists() else []
    return out.stdout, calls


def _installs(calls: list[str]) -> list[str]:
    return [c for c in calls if c.startswith("-m pip install")]


def test_a_second_start_skips_the_install(checkout):
    _, first = _start(checkout)
    assert _installs(first) == [
        "-m pip install -q torch==2.13.0",
        "-m pip install -q -e .[examples]",
    ]
    assert first[-1].startswith("-m jupyter lab notebooks/quickstart.ipynb")
    out, second = _start(checkout)
    assert _installs(second) == []
    assert "already holds this checkout's build" in out
    assert second == [first[-1]]  # straight to JupyterLab


def test_a_change_to_what_the_build_reads_reinstalls(checkout):
    _start(checkout)
    source = checkout / "js/shared/format.js"
    source.write_text(source.read_text() + "\n// edited\n")
    _, calls = _start(checkout)
    assert len(_installs(calls)) == 2
    _, again = _start(checkout)  # the new build is stamped in turn
    assert _installs(again) == []


def test_a_notebook_edit_does_not_reinstall_but_nnx_reinstall_does(checkout):
    _start(checkout)
    (checkout / "notebooks/scratch.ipynb").write_text("{}\n")
    _, calls = _start(checkout)
    assert _installs(calls) == []
    _, forced = _start(checkout, NNX_REINSTALL="1")
    assert len(_installs(forced)) == 2
