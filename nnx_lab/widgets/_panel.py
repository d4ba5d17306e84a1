"""``open_in_panel``: from a notebook to a run's panel in JupyterLab's runs panel."""

from __future__ import annotations

import html
import os
import secrets
from typing import Any

from ..runs import find_run_id, resolve_runs_root, run_dir

__all__ = ["OPEN_MIME", "open_in_panel", "panel_bundle"]

# Rendered by the labextension (js/lab/open_run.js): it opens the run's panel once.
OPEN_MIME = "application/vnd.nnx-lab.open-run+json"


def panel_bundle(run_id: object, runs_root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The output that opens a run's panel: the run's full id and the real path of its
    runs folder (the panel finds the folder by it), checked before anything is shown."""
    root = resolve_runs_root(runs_root)
    full = find_run_id(root, run_id)
    folder = run_dir(root, full)  # confined to the root: no '..', no link out
    real_root = str(folder.resolve().parent)
    payload = {"run_id": full, "runs_root": real_root, "nonce": secrets.token_hex(8)}
    text = (
        f"nnx-lab run {full} in {real_root}: open it in JupyterLab's 'nnx-lab runs' panel "
        "(left bar), or run this in JupyterLab to open it there"
    )
    return {
        OPEN_MIME: payload,
        "text/plain": text,
        "text/html": (
            f"<p>nnx-lab run <code>{html.escape(full)}</code>: open it in JupyterLab's "
            "<b>nnx-lab runs</b> panel (left bar).</p>"
        ),
    }


def open_in_panel(run_id: str, runs_root: str | os.PathLike[str] | None = None) -> None:
    """Open a run in a panel of its own in JupyterLab (the nnx-lab runs panel's run view).

    ``run_id`` is the run's id or an unambiguous prefix of it; ``runs_root=None`` means
    ``$NNX_RUNS_ROOT``, else ``./runs``, as for training. The panel reads the run's files
    through the Jupyter server and follows a running run live, with no kernel; it opens
    once when this output first shows (a reopened notebook keeps a link instead).
    Outside JupyterLab the output says where the run is. Raises ``ValueError`` or
    ``FileNotFoundError`` (naming the runs there) for an id that names no run.
    """
    bundle = panel_bundle(run_id, runs_root)
    from IPython.display import display

    display(bundle, raw=True)
