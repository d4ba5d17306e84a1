"""nnx-lab's Jupyter server extension: the REST side of the JupyterLab runs panel.

Installed with the package (``etc/jupyter/jupyter_server_config.d/nnx_lab.json`` enables
it) next to the prebuilt labextension. It reads the runs under the server's roots
through ``nnx_lab.runs`` and writes nothing but a stop request and a run's name (a run's
report, from ``nnx_lab.reports``, is sent to the browser, not written; a run's bundle is
built by a subprocess outside the runs root and sent, see ``_export``); it never imports
torch.
Settings: ``NNxLab`` (``c.NNxLab.runs_roots = [...]`` and the bounds in ``_config``).
See docs/lab_extension.md.
"""

from __future__ import annotations

from typing import Any

from traitlets import TraitError

from ._config import NNxLab
from ._export import setup_export
from ._handlers import AUTH_RESOURCE, setup_handlers
from ._service import ApiError, RunsService

__all__ = ["AUTH_RESOURCE", "ApiError", "NNxLab", "RunsService"]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "nnx_lab.server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    try:
        config = NNxLab(parent=serverapp)
    except TraitError as exc:  # a setting that cannot be read: say which and how to fix it
        serverapp.log.error("nnx-lab runs panel not started: %s", exc)
        raise
    service = RunsService(config, serverapp.root_dir)
    setup_handlers(serverapp.web_app, service)
    setup_export(serverapp.web_app, service)  # "Export bundle": a subprocess with torch
    serverapp.log.info(
        "nnx-lab runs panel: REST API at %snnx-lab/api, runs roots %s",
        serverapp.base_url,
        ", ".join(str(p) for p in service.roots()),
    )
