"""Shared fixtures: no test writes into the repository or draws a progress bar."""

from __future__ import annotations

import pytest


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
