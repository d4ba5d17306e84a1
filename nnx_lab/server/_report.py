"""The runs panel's "Report": a run's one-file HTML report, sent as a download.

``nnx_lab.report``'s page is built by ``nnx_lab.reports.report_html``, which reads the
run through the strict readers of ``nnx_lab.runs`` and needs no torch, so the server
may build it. It is sent to the browser, which saves it: nothing is written in the runs
root (a reader of the panel gets nothing it could not already read through the log and
the record endpoints). The report reads the whole log, so a log past
``NNxLab.report_log_bytes`` is refused before it is read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ConfigError, FileError
from ..reports import report_html
from ._writes import ApiError, error_text

__all__ = ["RunReport"]


class RunReport:
    """``report`` of ``RunsService`` (its ``run_path``, ``config`` and ``clock``)."""

    config: Any
    clock: Any

    def run_path(self, key: str, run_id: str) -> tuple[Any, Path]:
        raise NotImplementedError

    def report(self, key: str, run_id: str) -> dict[str, Any]:
        """The run's report page and the file name to save it under."""
        folder, path = self.run_path(key, run_id)
        if not (path / "run.yaml").is_file():
            raise ApiError(409, f"run {run_id} has no run.yaml: there is nothing to report")
        log = path / "metrics.jsonl"
        size = log.stat().st_size if log.is_file() else 0
        limit = self.config.report_log_bytes
        if size > limit:
            raise ApiError(
                413,
                f"run {run_id}'s metrics.jsonl is {size} bytes, over NNxLab.report_log_bytes="
                f"{limit}: raise that setting, or write the report in a kernel with "
                f"nnx_lab.report({run_id!r}, 'report.html')",
            )
        try:
            page = report_html(run_id, runs_root=folder.path)
        except ConfigError as exc:
            raise ApiError(409, f"run {run_id}: {exc}") from None
        except FileError as exc:  # a damaged record or log line the report cannot read
            raise ApiError(409, f"run {run_id}: {error_text(exc)}; no report") from None
        return {
            "run_id": run_id,
            "folder": folder.key,
            "filename": f"report_{run_id}.html",
            "html": page,
            "server_time": self.clock(),
        }
