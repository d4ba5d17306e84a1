"""``python -m nnx_lab.bundles export``: the command line the runs panel's Export bundle
runs in a subprocess (issue 27). Written: exit status 0 and a bundle that validates;
refused: exit status 2, the one-line reason on stderr, and nothing at the target."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import engine_factories as f

import nnx_lab
from nnx_lab.bundles import inspect_bundle, validate_bundle

ROOT = Path(nnx_lab.__file__).resolve().parents[1]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nnx_lab.bundles", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        check=False,
    )


def test_the_command_line_writes_a_bundle_and_says_why_it_refuses(runs_root, tmp_path):
    run = f.model().train(f.train_params(runs_root, n_epochs=2))
    target = tmp_path / "b.zip"
    done = _cli("export", run.id, str(target), "--runs-root", str(runs_root), "--archive")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(target)
    validate_bundle(target)
    assert (inspect_bundle(target).run_id, inspect_bundle(target).checkpoint) == (run.id, "last")
    best = tmp_path / "best"
    args = ("export", run.id, str(best), "--runs-root", str(runs_root), "--checkpoint", "best")
    assert _cli(*args).returncode == 0
    assert inspect_bundle(best).checkpoint == "best"
    # refusals: one line on stderr, exit status 2, nothing written
    again = _cli("export", run.id, str(target), "--runs-root", str(runs_root), "--archive")
    assert again.returncode == 2
    assert "exists already" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    missing = tmp_path / "none.zip"
    gone = _cli("export", "0" * 32, str(missing), "--runs-root", str(runs_root), "--archive")
    assert gone.returncode == 2
    assert "no such run" in gone.stderr
    assert not missing.exists()
