"""Fixtures for the real-browser tests: a private JupyterLab server and headless Chromium.

Chromium is the system one (``/usr/bin/chromium``, or ``$NNX_CHROMIUM``) launched through
Playwright's ``executable_path``: Playwright's own browser download is not needed. When
no browser (or no built widget bundle) is found the tests fail with the command that
installs it: they are never skipped.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lab_harness import (
    CHROMIUM_ARGS,
    NOTEBOOKS,
    REPO,
    JupyterServer,
    ServerError,
    close_lab,
    find_chromium,
    open_lab,
)


def _require(condition: bool, reason: str) -> None:
    """Fail with the fix when a prerequisite is missing (``bash scripts/test`` installs all)."""
    if not condition:
        pytest.fail(f"{reason}; `bash scripts/test` installs every prerequisite", pytrace=False)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = find_chromium()
    _require(path is not None, "no Chromium found (apt-get install -y chromium)")
    return path


@pytest.fixture(scope="session")
def monitor_bundle() -> Path:
    """The built widget bundle, without which the monitor cannot render."""
    bundle = REPO / "nnx_lab" / "static" / "monitor.js"
    _require(bundle.exists(), "nnx_lab/static/monitor.js is missing: run `npm run build`")
    return bundle


@pytest.fixture(scope="session")
def lab_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temporary copy of notebooks/: the server's root directory."""
    root = tmp_path_factory.mktemp("lab") / "notebooks"
    shutil.copytree(NOTEBOOKS, root, ignore=shutil.ignore_patterns("runs", ".ipynb_checkpoints"))
    return root


@pytest.fixture(scope="session")
def jupyter_server(lab_root: Path, chromium_path: str):
    try:
        server = JupyterServer.start(lab_root, lab_root.parent / "jupyter")
    except ServerError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def browser(chromium_path: str):
    from playwright import sync_api

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def new_lab(browser, jupyter_server: JupyterServer, request):
    """Factory: ``new_lab()`` opens a fresh browser context and returns its ``Lab``."""
    labs = []

    def make():
        labs.append(open_lab(browser, jupyter_server))
        return labs[-1]

    yield make
    rep = getattr(request.node, "rep_call", None)
    for i, lab in enumerate(labs):
        close_lab(lab, f"{request.node.name}-{i}", failed=rep is not None and rep.failed)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)
