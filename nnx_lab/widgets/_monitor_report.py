"""The TrainingMonitor's "Report" button: the run's one-file HTML report, from the kernel.

The view asks (``{"kind": "report", "view"}``); the kernel writes the page
``nnx_lab.report`` writes, at ``report_path`` when one is set on the monitor, else as
``report_<run id>.html`` in the kernel's working folder (beside the notebook, where
Jupyter starts a notebook's kernel), and answers the view that asked
(``{"kind": "report_done", "to", "path"}``, or ``"error"``). A refusal is that answer,
never an exception under the widget: the button's note says why.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError, FileError
from ..reports import report

__all__ = ["REPORT", "REPORT_DONE", "MonitorReport"]

REPORT = "report"  # view -> kernel: write the run's report
REPORT_DONE = "report_done"  # kernel -> the view that asked: where it is, or why not


class MonitorReport:
    """Mixed into ``TrainingMonitor`` (which declares ``run_id`` and ``runs_root``)."""

    run_id: str
    runs_root: str
    _report_path: Path | None = None

    @property
    def report_path(self) -> Path | None:
        """Where "Report" writes (None: ``report_<run id>.html`` in the working folder)."""
        return self._report_path

    @report_path.setter
    def report_path(self, value: str | os.PathLike[str] | None) -> None:
        if value is not None and not isinstance(value, str | os.PathLike):
            raise ConfigError("report_path", value, "pass the .html file to write, or None")
        if value is not None and (str(value) == "" or Path(value).is_dir()):
            raise ConfigError("report_path", str(value), "name the .html file, not a folder")
        self._report_path = None if value is None else Path(value)

    def write_report(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the shown run's report (what the Report button does); returns where.

        ``path`` or ``report_path``, else ``report_<run id>.html`` in the working folder.
        Refused with a ``ConfigError`` (nothing written) while no single run is shown."""
        if not self.run_id or not self.runs_root:
            raise ConfigError(
                "run_id",
                self.run_id,
                "the monitor shows no single run yet (nothing trained, or a race of "
                "several): write a run's report with nnx_lab.report(run_id, path)",
            )
        target = Path(path) if path is not None else self._report_path
        if target is None:
            target = Path(f"report_{self.run_id}.html")
        return report(self.run_id, target.absolute(), runs_root=self.runs_root)

    def _on_report(self, content: dict[str, Any], buffers: list[Any]) -> None:
        view = content.get("view")
        if not isinstance(view, str) or not view:
            raise ValueError(f"a report request names its view: {content!r}; reload the page")
        reply: dict[str, Any] = {"kind": REPORT_DONE, "to": view}
        try:
            reply["path"] = str(self.write_report())
        except (ConfigError, FileError, OSError) as exc:  # said beside the button
            reply["error"] = str(exc)
        self.send(reply, [])  # type: ignore[attr-defined]
