"""A private JupyterLab server and a page driver for the real-browser tests.

The server runs on 127.0.0.1 with a random token, on a free port, with its root in a
temporary copy of ``notebooks/`` (so ``runs/`` directories land there) and every Jupyter
config/data/runtime directory pointed into the same temporary tree, so the tests neither
read nor write the user's settings. Everything that would reach the network (news feed,
update check, the PyPI extension manager) is turned off.

The page driver (``Lab``) works in JupyterLab (``/lab/tree/<nb>``) and in Notebook 7
(``/notebooks/<nb>``): both share the notebook DOM and, with ``expose_app_in_browser``,
expose the application as ``window.jupyterapp``. Actions go through the UI (the Run
menu); the app object is only read to know when the kernel is ready and idle.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]

SERVER_START_TIMEOUT = 90.0  # s
KERNEL_TIMEOUT = 120_000  # ms: a kernel to start, a run-all to finish
UI_TIMEOUT = 60_000  # ms: the page to load, a notebook to open

_PROMPTS = "[...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputArea-prompt')]"
_KERNEL = """(() => {
    const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const ctx = w && w.sessionContext;
    return ctx && ctx.session ? ctx.session.kernel : null;
})()"""


def find_chromium() -> str | None:
    """``$NNX_CHROMIUM``, else the first system Chromium/Chrome on PATH."""
    env = os.environ.get("NNX_CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))


class ServerError(RuntimeError):
    pass


@dataclass
class JupyterServer:
    """A ``jupyter lab`` process started (and stopped) by the tests."""

    proc: subprocess.Popen
    port: int
    token: str
    root: Path
    log: Path
    base: str = field(init=False)

    def __post_init__(self) -> None:
        self.base = f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(cls, root: Path, home: Path) -> JupyterServer:
        """Start ``jupyter lab`` serving ``root``; its Jupyter dirs live under ``home``."""
        for sub in ("config", "data", "runtime", "ipython"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        # No news / update-check toast in the page (it would also try the network).
        _write_json(
            home
            / "config/lab/user-settings/@jupyterlab/apputils-extension"
            / "notification.jupyterlab-settings",
            {"fetchNews": "false", "checkForUpdates": False},
        )
        env = dict(os.environ)
        env.update(
            JUPYTER_CONFIG_DIR=str(home / "config"),
            JUPYTER_DATA_DIR=str(home / "data"),
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
            IPYTHONDIR=str(home / "ipython"),
            JUPYTER_PLATFORM_DIRS="1",
            NNX_TQDM_DISABLE="1",
            NNX_RUNS_ROOT=str(root / "runs"),  # = ./runs of the notebooks, whatever the caller set
            # The kernel imports nnx_lab from this checkout even when not installed.
            PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p),
            PYTHONUNBUFFERED="1",
        )
        port = free_port()
        token = secrets.token_hex(16)
        log = home / "server.log"
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.token={token}",
            f"--ServerApp.root_dir={root}",
            "--ServerApp.terminals_enabled=False",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
            "--LabApp.expose_app_in_browser=True",
            "--JupyterNotebookApp.expose_app_in_browser=True",
        ]
        with log.open("wb") as out:
            proc = subprocess.Popen(
                cmd,
                cwd=root,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: server + its kernels
            )
        server = cls(proc=proc, port=port, token=token, root=root, log=log)
        try:
            server._wait_ready()
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise ServerError(
                    f"jupyter lab exited early ({self.proc.returncode}):\n{self.log_tail()}"
                )
            try:
                self.api("/api/status")
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise ServerError(
                    f"jupyter lab not ready after {SERVER_START_TIMEOUT}s:\n{self.log_tail()}"
                )
            time.sleep(0.3)

    def stop(self) -> None:
        """SIGTERM (the server shuts its kernels down), then SIGKILL what is left."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # stray kernels of this server

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"

    def api(self, path: str, method: str = "GET") -> object:
        req = urllib.request.Request(
            f"{self.base}{path}",
            data=b"" if method == "POST" else None,
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Delete every session and kernel, so the next notebook starts afresh."""
        for session in self.api("/api/sessions"):
            with contextlib.suppress(urllib.error.HTTPError):
                self.api(f"/api/sessions/{session['id']}", method="DELETE")
        for kernel in self.api("/api/kernels"):
            with contextlib.suppress(urllib.error.HTTPError):
                self.api(f"/api/kernels/{kernel['id']}", method="DELETE")

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "<no server log>"


class Lab:
    """Drives one JupyterLab or Notebook 7 page: open, run all, wait, query."""

    def __init__(self, page, server: JupyterServer) -> None:
        self.page = page
        self.server = server

    def open_notebook(self, name: str, *, ui: str = "lab") -> None:
        # A workspace of its own: JupyterLab keeps workspaces on the server, and the
        # default one would reopen (and start kernels for) earlier tests' notebooks.
        workspace = f"t{secrets.token_hex(4)}"
        path = {
            "lab": f"/lab/workspaces/{workspace}/tree/{name}",
            "notebook": f"/notebooks/{name}",
        }[ui]
        self.page.goto(self.server.url(path), wait_until="domcontentloaded")
        self.wait_notebook_ready()

    def reload(self) -> None:
        self.page.reload(wait_until="domcontentloaded")
        self.wait_notebook_ready()

    def wait_notebook_ready(self) -> None:
        """Wait until a notebook is shown and its kernel is connected and idle."""
        self.page.wait_for_function("() => !!window.jupyterapp", timeout=UI_TIMEOUT)
        self.page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=UI_TIMEOUT)
        self.page.wait_for_function(
            f"""() => {{
                const k = {_KERNEL};
                return !!k && k.connectionStatus === 'connected' && k.status === 'idle';
            }}""",
            timeout=KERNEL_TIMEOUT,
        )

    def run_command(self, command: str) -> None:
        self.page.evaluate("(c) => window.jupyterapp.commands.execute(c)", command)

    def run_all(self, timeout: float = KERNEL_TIMEOUT) -> None:
        """Clear the outputs, then Run > Run All Cells, and wait for the kernel
        (``timeout`` ms for the whole notebook)."""
        from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

        page = self.page
        # Cleared outputs reset the prompts to "[ ]", so a notebook saved with outputs
        # cannot look finished before this run has even started.
        self.run_command("notebook:clear-all-cell-outputs")
        page.wait_for_function(f"() => {_PROMPTS}.every(p => !/\\[\\d+\\]/.test(p.textContent))")
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        # The run has started once any prompt shows "[*]" or a number: the front end
        # marks queued cells at once, whatever the kernel is doing.
        started = f"() => {_PROMPTS}.some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))"
        try:
            page.wait_for_function(started, timeout=10_000)
        except PlaywrightTimeoutError:
            # The menu did not reach the notebook (focus elsewhere): run the command.
            warnings.warn(
                "Run All Cells from the menu did nothing; running the command", stacklevel=2
            )
            self.run_command("notebook:run-all-cells")
            page.wait_for_function(started, timeout=UI_TIMEOUT)
        self.wait_idle(timeout)

    def wait_idle(self, timeout: float = KERNEL_TIMEOUT) -> None:
        """Wait until every code cell shows an execution count and the kernel is idle."""
        self.page.wait_for_function(
            f"""() => {{
                const prompts = {_PROMPTS};
                const k = {_KERNEL};
                return prompts.length > 0
                    && prompts.every(p => /\\[\\d+\\]/.test(p.textContent))
                    && !!k && k.status === 'idle';
            }}""",
            timeout=timeout,
        )

    def save(self) -> None:
        self.run_command("docmanager:save")
        self.page.wait_for_function(
            """() => {
                const w = window.jupyterapp.shell.currentWidget;
                return !!w && !!w.context && !w.context.model.dirty;
            }""",
            timeout=UI_TIMEOUT,
        )

    def output_text(self) -> str:
        return "\n".join(self.page.locator(".jp-OutputArea-output").all_text_contents())

    def tracebacks(self) -> list[str]:
        """Texts of the error outputs (tracebacks) shown in the notebook."""
        return [
            t
            for t in self.page.locator(
                '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
            ).all_text_contents()
            if "Traceback" in t or "Error" in t
        ]


def open_lab(browser, server: JupyterServer) -> Lab:
    """A fresh browser context (own cookies, own page) driving ``server``."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(UI_TIMEOUT)
    return Lab(context.new_page(), server)


def close_lab(lab: Lab, name: str, *, failed: bool) -> None:
    """Close the lab's context; on failure keep a screenshot of the page first."""
    if failed:
        with contextlib.suppress(Exception):
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            lab.page.screenshot(path=SCREENSHOTS / f"FAILED-{name}.png", full_page=True)
    with contextlib.suppress(Exception):
        lab.page.context.close()


def write_notebook(path: Path, cells: list[str]) -> None:
    """A notebook of code cells (not yet run) for a test to open."""
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": []}
    kernel = {"display_name": "Python 3", "language": "python", "name": "python3"}
    doc = {
        "cells": [{**cell, "source": source} for source in cells],
        "metadata": {"kernelspec": kernel},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(doc))


# the canvas pixels of a figure close to a CSS colour (resolved in the page)
_PIXELS = """(fig, color) => {
    const probe = document.createElement('span');
    probe.style.color = color;
    fig.append(probe);
    const rgb = getComputedStyle(probe).color.match(/\\d+/g).map(Number);
    probe.remove();
    const canvas = fig.querySelector('canvas');
    const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) {
        if (d[i + 3] > 200 && Math.abs(d[i] - rgb[0]) + Math.abs(d[i + 1] - rgb[1])
            + Math.abs(d[i + 2] - rgb[2]) < 60) n++;
    }
    return n;
}"""


def pixels(locator, color: str) -> int:
    """How many pixels of ``locator``'s canvas are drawn in ``color`` (a CSS colour)."""
    return locator.evaluate(_PIXELS, color)
