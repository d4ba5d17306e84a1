"""Reading a run's ``metrics.jsonl`` while another process may still be writing it."""

from __future__ import annotations

import json
import logging
import os
import pathlib
from typing import Any

__all__ = ["JsonlTail"]

log = logging.getLogger("nnx_lab.widgets")


class JsonlTail:
    """Returns the complete JSON lines added to a file since the last read.

    A line is taken only once its newline has been written, so a line the writer is
    still in the middle of is kept back until the next read. A missing file reads
    as empty (the writer may not have created it yet). A file that shrank was
    rewritten: reading starts again from its beginning and ``restarted`` is set.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = pathlib.Path(path)
        self._offset = 0
        self._partial = b""
        self.restarted = False
        self.bad_lines = 0

    def read(self) -> list[dict[str, Any]]:
        self.restarted = False
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self._offset:
            log.warning("%s shrank; reading it again from the start", self.path)
            self._offset, self._partial, self.restarted = 0, b"", True
        if size == self._offset:
            return []
        with self.path.open("rb") as fh:
            fh.seek(self._offset)
            chunk = fh.read(size - self._offset)
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # b"" when the chunk ended with a newline
        out: list[dict[str, Any]] = []
        for raw in lines:
            line = raw.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                self.bad_lines += 1
                log.warning("%s: skipping a line that is not JSON: %.80r", self.path, line)
                continue
            if isinstance(obj, dict):
                out.append(obj)
        return out
