"""What the runs panel's server side may read, and how much per request (traitlets
config: ``c.NNxLab.<name>`` in ``jupyter_server_config.py`` or ``--NNxLab.<name>=``).

``runs_roots`` on the command line: ``jupyter lab`` does not know the extension's
settings when it reads its arguments, so ``--NNxLab.runs_roots='["/x", "/y"]'`` reaches
the setting as one text. An entry that starts with ``[`` is read as that list (JSON, or
a Python list of strings); one that cannot be read is refused with the fix, never taken
as a folder named ``["/x"``.
"""

from __future__ import annotations

import ast
import json

from traitlets import Float, Int, List, TraitError, Unicode, validate
from traitlets.config import Configurable

__all__ = ["NNxLab"]

_ROOTS_FIX = (
    'write it as a list of paths, --NNxLab.runs_roots=\'["/data/runs", "~/exp"]\', '
    "or repeat --NNxLab.runs_roots=/data/runs once per folder (a folder whose name starts "
    "with '[' is given as ./[name])"
)


def _listed(entry: str) -> list[str]:
    """The paths one ``runs_roots`` entry stands for (see the module docstring)."""
    text = entry.strip()
    if not text:
        raise TraitError(f"NNxLab.runs_roots holds an empty entry {entry!r}: {_ROOTS_FIX}")
    if not text.startswith("["):
        return [entry]
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value):
            return value
        break
    raise TraitError(
        f"NNxLab.runs_roots={entry[:80]!r} looks like a list but is not a list of paths: "
        f"{_ROOTS_FIX}"
    )


class NNxLab(Configurable):
    """Settings of nnx-lab's Jupyter server extension (the JupyterLab runs panel)."""

    runs_roots = List(
        Unicode(),
        default_value=[],
        help="Folders the runs panel searches for runs: each one, and the 'runs' folders "
        "below it (down to max_depth levels), are listed. Relative paths are taken from the "
        "server's root directory. Empty: the server's root directory. $NNX_RUNS_ROOT, when "
        "set, is always added (the folder this server's kernels train into).",
    ).tag(config=True)
    max_depth = Int(
        4, help="How many folder levels below a root the search for 'runs' folders goes."
    ).tag(config=True)
    max_dirs = Int(
        5000, help="At most this many folders are visited by one search for runs folders."
    ).tag(config=True)
    max_runs = Int(
        500,
        help="At most this many runs are listed (the most recently changed); the listing "
        "says when some were left out.",
    ).tag(config=True)
    page_bytes = Int(
        1 << 20, help="At most this many bytes of a run's log are read per request."
    ).tag(config=True)
    max_record_bytes = Int(
        256 << 10,
        help="A run.yaml, metadata.yaml or plan.json larger than this is shown as damaged "
        "and not read.",
    ).tag(config=True)
    listing_budget_bytes = Int(
        32 << 20,
        help="At most this many bytes of records are read for one listing; runs past it "
        "are listed without their details.",
    ).tag(config=True)
    report_log_bytes = Int(
        256 << 20,
        help="A run whose metrics.jsonl is larger than this gets no report from the panel "
        "(the report reads the whole log); write it with nnx_lab.report in a kernel.",
    ).tag(config=True)
    export_timeout_s = Float(
        300.0,
        help="Seconds the runs panel's Export bundle may take (the export runs in a "
        "subprocess with torch); past it the export is stopped and refused.",
    ).tag(config=True)
    max_exports = Int(
        2,
        help="At most this many bundle exports run at once (one per run); another is "
        "refused with 429 until one ends.",
    ).tag(config=True)
    rescan_s = Float(
        10.0,
        help="Seconds a search for runs folders is reused before the folders are searched again.",
    ).tag(config=True)

    @validate("runs_roots")
    def _roots(self, proposal):
        return [path for entry in proposal["value"] for path in _listed(entry)]

    @validate(
        "max_depth",
        "max_dirs",
        "max_runs",
        "page_bytes",
        "max_record_bytes",
        "listing_budget_bytes",
        "report_log_bytes",
        "max_exports",
    )
    def _positive(self, proposal):
        value = proposal["value"]
        least = 0 if proposal["trait"].name == "max_depth" else 1
        if value < least:
            raise TraitError(
                f"NNxLab.{proposal['trait'].name}={value!r} is out of range: pass an integer "
                f">= {least}"
            )
        return value

    @validate("rescan_s")
    def _non_negative(self, proposal):
        value = proposal["value"]
        if not value >= 0:
            raise TraitError(f"NNxLab.rescan_s={value!r}: pass seconds >= 0")
        return value

    @validate("export_timeout_s")
    def _timeout(self, proposal):
        value = proposal["value"]
        if not value > 0:
            raise TraitError(f"NNxLab.export_timeout_s={value!r}: pass seconds > 0")
        return value
