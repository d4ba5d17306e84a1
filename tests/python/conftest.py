"""Shared fixtures: no test writes into the repository or draws a progress bar.

The tests mirror the package (engine/, runs/, data/, plans/, tools/, widgets/, server/,
distributed/); the helper modules beside this file (engine_factories, plan_factories,
...) are importable from every folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent  # tests/python: the helper modules
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))


@pytest.fixture(autouse=True)
def _isolated_runs(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NNX_TQDM_DISABLE", "1")
    monkeypatch.setenv("NNX_RUNS_ROOT", str(tmp_path_factory.mktemp("runs-default")))


@pytest.fixture
def runs_root(tmp_path):
    return tmp_path / "runs"


@pytest.fixture
def one_torch_thread():
    """torch on one intra-op thread for the test, restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def outside(tmp_path):
    """A folder beside the runs root, holding a victim file and a copy of a real run."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "victim.txt").write_text("do not delete me\n")
    return d


@pytest.fixture
def trained(tmp_path):
    """A finished 2-epoch run under ``tmp_path/runs``: (root, model, run)."""
    import engine_factories as f

    root = tmp_path / "runs"
    model = f.model()
    run = model.train(f.train_params(root, n_epochs=2, checkpoint_every_s=0))
    return root, model, run
