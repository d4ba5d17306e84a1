"""Builders for the runs panel's server tests (torch-free): requests to a running
Jupyter server, run folders written by hand, as a colleague's shared folder holds them,
and real runs trained for a test (the engine imported only then)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest
import yaml
from jupyter_server.auth import Authorizer
from jupyter_server.utils import url_path_join
from tornado.httpclient import HTTPClientError
from traitlets.config import Config


class Api:
    """Requests to the running server, answered as (status, JSON). ``path`` goes on the
    wire as written (so '..' and '%2e' reach the server as a client could send them);
    ``params`` is a dict or a list of pairs (a repeated parameter)."""

    def __init__(self, client, base_url, auth, loop):
        self._client, self._base, self._auth, self._loop = client, base_url, auth, loop

    def __call__(self, path, *, method="GET", body=None, headers=None, params=None):
        # "/api/status": a path of the server's own; else one of nnx-lab's API
        url = url_path_join(self._base, path[1:] if path.startswith("/") else f"nnx-lab/api/{path}")
        if params:
            url += "?" + urlencode(params)
        kwargs = {"method": method, "headers": {**self._auth, **(headers or {})}}
        if method in ("POST", "PUT"):
            kwargs["body"] = body if body is not None else ""
        try:
            response = self._loop.run_until_complete(self._client.fetch(url, **kwargs))
        except HTTPClientError as exc:
            response = exc.response
            if response is None:
                raise
        text = response.body.decode() if response.body else ""
        try:
            data = json.loads(text) if text else None
        except ValueError:
            data = text
        return response.code, data


def fake_run(root: Path, run_id: str, meta=None, log_lines=(), raw_log: bytes | None = None):
    path = root / run_id
    path.mkdir(parents=True)
    if meta is not None:
        (path / "metadata.yaml").write_text(meta if isinstance(meta, str) else yaml.safe_dump(meta))
    if raw_log is not None:
        (path / "metrics.jsonl").write_bytes(raw_log)
    elif log_lines:
        (path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in log_lines))
    return path


REPO = Path(__file__).resolve().parents[2]


def trained_run(root: Path, **kw):
    """A finished run of ``engine_factories``' model under ``root``; ``kw`` are more
    ``train_params`` fields. The engine (torch) is imported here, when a test trains."""
    import engine_factories as f

    return f.model().train(f.train_params(str(root), **kw))


def runs_key(api) -> str:
    """The key the server gives the runs folder ``<root>/runs``."""
    return next(f["key"] for f in api("runs")[1]["folders"] if f["label"] == "runs")


def file_sizes(root: Path) -> list[tuple[str, int]]:
    """Every path under ``root`` with its size: what a read-only request leaves alone."""
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*"))


def torch_after(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter on this checkout, which then prints the torch
    modules it imported (``[]``: none) on stdout."""
    tail = '\nprint(sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))\n'
    return subprocess.run(
        [sys.executable, "-c", f"import sys\n{code}{tail}"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def step_line(i, loss=1.0):
    return {
        "event": "step",
        "step": i,
        "epoch": 1,
        "batch": i - 1,
        "lr": 0.01,
        "samples": 32,
        "loss": loss,
    }


# -- the fixtures of a server test module ------------------------------------------------
# A module imports these beside pytest_jupyter's fixtures (``from lab_factories import
# api, jp_server_config, no_env_root``): a server with the extension, listing its root.


@pytest.fixture
def jp_server_config():
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"nnx_lab.server": True}},
            "NNxLab": {"rescan_s": 0.0, "max_depth": 2},
        }
    )


@pytest.fixture(autouse=True)
def no_env_root(monkeypatch):
    # the runs the server lists are the ones under its root directory only
    monkeypatch.delenv("NNX_RUNS_ROOT", raising=False)


@pytest.fixture
def api(jp_serverapp, http_server_client, jp_base_url, jp_auth_header, jp_asyncio_loop):
    return Api(http_server_client, jp_base_url, jp_auth_header, jp_asyncio_loop)


class NoRunsRight(Authorizer):
    """Everything but nnx-lab's runs."""

    def is_authorized(self, handler, user, action, resource):
        from nnx_lab.server import AUTH_RESOURCE

        return resource != AUTH_RESOURCE


# a server whose user lacks the runs right (decorate a test that takes ``api``)
without_the_runs_right = pytest.mark.parametrize(
    "jp_server_config",
    [
        Config(
            {
                "ServerApp": {
                    "jpserver_extensions": {"nnx_lab.server": True},
                    "authorizer_class": NoRunsRight,
                },
                "NNxLab": {"rescan_s": 0.0},
            }
        )
    ],
)
