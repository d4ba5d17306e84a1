"""A run as one self-contained HTML file (docs/report.md).

import nnx_lab
nnx_lab.report(run.id, "run.html")     # open it from the file: no server, no network
"""

from ._report import MAX_POINTS, report, report_html

__all__ = ["MAX_POINTS", "report", "report_html"]
