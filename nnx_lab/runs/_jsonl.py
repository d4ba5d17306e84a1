"""The one reader of ``metrics.jsonl``: whole logs and logs still being written.

The writer appends one JSON object per line and flushes after each event, so a reader
can only ever see one incomplete line: the last, while it is written, or for good when
the writer was killed mid-line (a *torn* line). That line is held back (a live log) or
ignored (a finished log). Any other damage (a line that is not a JSON object, bytes that
are not UTF-8) is an error naming the file and the line; followers that must not stop
can ask to skip such lines instead, and count them.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from ..errors import LogDamagedError

__all__ = ["JsonlReader", "LogDamagedError", "read_jsonl"]

log = logging.getLogger("nnx_lab.runs")


def _parse(raw: bytes) -> dict[str, Any]:
    text = raw.decode("utf-8")
    obj = json.loads(text)
    if not isinstance(obj, dict):
        raise ValueError(f"a JSON {type(obj).__name__}, not an object")
    return obj


class JsonlReader:
    """Returns the complete lines added to a log since the last ``read()``.

    ``strict=True`` raises :class:`LogDamagedError` on a damaged line; ``strict=False``
    skips it, counts it in ``bad_lines`` and logs a warning. A missing file reads as
    empty (the writer may not have created it yet). A file that shrank was replaced:
    reading starts again from its beginning and ``restarted`` is set for that read.
    ``max_bytes`` bounds one read, so a huge log is taken in pieces.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, strict: bool = True, max_bytes: int | None = None
    ) -> None:
        self.path = Path(path)
        self.strict = strict
        self.max_bytes = max_bytes
        self.offset = 0  # bytes consumed (up to the end of the last complete line)
        self.lines_read = 0  # complete lines consumed
        self.bad_lines = 0
        self.restarted = False
        self._partial = b""

    def read(self) -> list[dict[str, Any]]:
        return [obj for _, obj in self.read_numbered()]

    def read_numbered(self) -> list[tuple[int, dict[str, Any]]]:
        """Like ``read()``, with each object's 1-based line number."""
        self.restarted = False
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        end = self.offset + len(self._partial)
        if size < end:
            log.warning("%s shrank; reading it again from the start", self.path)
            self.offset, self.lines_read, self._partial, self.restarted = 0, 0, b"", True
            end = 0
        if size == end:
            return []
        want = size - end if self.max_bytes is None else min(size - end, self.max_bytes)
        with self.path.open("rb") as fh:
            fh.seek(end)
            chunk = fh.read(want)
        data = self._partial + chunk
        cut = data.rfind(b"\n") + 1  # 0 when no line is complete yet
        self._partial = data[cut:]
        out: list[tuple[int, dict[str, Any]]] = []
        for raw in data[:cut].split(b"\n")[:-1]:
            self.lines_read += 1
            if not raw.strip():
                continue
            try:
                out.append((self.lines_read, _parse(raw)))
            except (ValueError, UnicodeDecodeError) as exc:
                reason = f"not a JSON object ({exc})"
                if self.strict:
                    raise LogDamagedError(self.path, self.lines_read, reason) from None
                self.bad_lines += 1
                log.warning("%s, line %d: skipped, %s", self.path, self.lines_read, reason)
        self.offset += cut
        return out


def read_jsonl(path: str | os.PathLike[str]) -> list[tuple[int, dict[str, Any]]]:
    """Every complete line of a log, numbered; a torn last line is ignored."""
    return JsonlReader(path).read_numbered()
