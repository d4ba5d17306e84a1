"""The one reader of ``metrics.jsonl``: whole logs and logs still being written.

The writer appends one JSON object per line and flushes after each event, so a reader
can only ever see one incomplete line: the last, while it is written, or for good when
the writer was killed mid-line (a *torn* line). That line is held back (a live log) or
ignored (a finished log). Any other damage (a line that is not a JSON object, bytes that
are not UTF-8, a line longer than ``LIMITS.record_bytes``, nesting deeper than
``LIMITS.nesting``) is a ``LogLineError`` naming the file and the line; followers that
must not stop can ask to skip such lines instead, and count them.

A log is read as a stream, ``CHUNK_BYTES`` at a time: a reader holds one chunk and the
objects parsed from it, never the whole file (``iter_numbered``, ``iter_jsonl``), and a
line over the cap is skipped without being held.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..errors import LogDamagedError
from ._records import plain_reason
from ._schema import (
    LIMITS,
    READ_FLAGS,
    SchemaError,
    _check_nesting,
    _constant,
    parse_json,
)

__all__ = [
    "CHUNK_BYTES",
    "JsonlReader",
    "LogDamagedError",
    "LogLineError",
    "iter_jsonl",
    "parse_line",
    "read_jsonl",
]

log = logging.getLogger("nnx_lab.runs")

CHUNK_BYTES = 256 << 10  # what one read of a log takes at most (and its objects: ~2 MB)
_LOG_FIX = "the log is damaged. Restore the file, or delete the run and train it again"


class LogLineError(SchemaError, LogDamagedError):
    """A line of a run's log that is not one nnx_lab writes: ``path``, ``line``,
    ``field`` (``""`` for the whole line), ``value``, ``reason``, ``fix``. Caught as a
    ``SchemaError`` or as a ``LogDamagedError`` alike."""

    default_fix = _LOG_FIX

    @classmethod
    def of(cls, exc: SchemaError, line: int | None = None) -> LogLineError:
        if isinstance(exc, cls) and line is None:
            return exc
        fix = exc.fix if "NNX_MAX" in exc.fix else _LOG_FIX
        at = exc.line if line is None else line
        reason = plain_reason(exc.reason)
        return cls(exc.path, exc.field, reason, value=exc.value, fix=fix, line=at)


def parse_line(
    raw: bytes, path: str | os.PathLike[str] = "metrics.jsonl", line: int | None = None
) -> dict[str, Any]:
    """One log line as a JSON object, within the limits, or a ``LogLineError``."""
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        try:
            parse_json(raw, path, line=line)  # says why
        except SchemaError as exc:
            raise LogLineError.of(exc) from None
        raise LogLineError(path, "", "not valid JSON", line=line) from None
    # Deeper than the cap needs more brackets than the cap: most lines skip the walk.
    if raw.count(b"[") + raw.count(b"{") > LIMITS.nesting:
        try:
            _check_nesting(value, path, line)
        except SchemaError as exc:
            raise LogLineError.of(exc) from None
    if not isinstance(value, dict):
        raise LogLineError(path, "", f"a JSON {type(value).__name__}, not an object", line=line)
    return value


class JsonlReader:
    """Returns the complete lines added to a log since the last read.

    ``strict=True`` raises :class:`LogLineError` (a ``LogDamagedError``) on a damaged
    line; ``strict=False`` skips it, counts it in ``bad_lines`` and logs a warning. A
    missing file reads as empty (the writer may not have created it yet); a log that is
    a link is refused (``LogLineError``: run files are read only from the run's own
    folder). A file that shrank was replaced: reading starts again from its beginning
    and ``restarted`` is set for that read. ``max_bytes`` bounds one ``read()``, so a
    huge log is taken in pieces; ``iter_numbered()`` streams whatever was added, a
    chunk at a time. A line longer than ``max_line_bytes`` (default
    ``LIMITS.record_bytes``) is damaged: it is skipped without being held in memory.

    ``decode(raw, path, line)`` turns a line's bytes into what the reader gives
    (default ``parse_line``: the JSON object; ``event_from_line``: the event); a
    ``LogLineError`` from it is a damaged line, ``None`` drops the line (the decoder
    counted it).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        strict: bool = True,
        max_bytes: int | None = None,
        max_line_bytes: int | None = None,
        decode: Callable[[bytes, Path, int], Any] = parse_line,
    ) -> None:
        self.path = Path(path)
        self.decode = decode
        self.strict = strict
        self.max_bytes = max_bytes
        self.max_line_bytes = LIMITS.record_bytes if max_line_bytes is None else max_line_bytes
        self.offset = 0  # bytes consumed (up to the end of the last complete line)
        self.lines_read = 0  # complete lines consumed
        self.bad_lines = 0
        self.restarted = False
        self._partial = b""
        self._skipped = 0  # bytes of an overlong line dropped so far (past offset)

    def read(self) -> list[dict[str, Any]]:
        return [obj for _, obj in self.read_numbered()]

    def read_numbered(self) -> list[tuple[int, dict[str, Any]]]:
        """Like ``read()``, with each object's 1-based line number."""
        return list(self.iter_numbered(self.max_bytes))

    def iter_numbered(self, max_bytes: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """The (line number, object) pairs added since the last read, streamed a chunk
        at a time, from at most ``max_bytes`` more bytes of the file (None: up to its
        end now). Consume it whole: each chunk is taken as read once it is given."""
        return itertools.chain.from_iterable(self.iter_chunks(max_bytes))

    def iter_chunks(
        self, max_bytes: int | None = None
    ) -> Iterator[list[tuple[int, dict[str, Any]]]]:
        """The pairs of ``iter_numbered``, one list per chunk read. ``restarted`` is
        set at once (before the first chunk), so a follower can say so first."""
        self.restarted = False
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return iter(())
        end = self.offset + len(self._partial) + self._skipped
        if size < end:
            log.warning("%s shrank; reading it again from the start", self.path)
            self.offset, self.lines_read, self.restarted = 0, 0, True
            self._partial, self._skipped, end = b"", 0, 0
        stop = size if max_bytes is None else min(size, end + max_bytes)
        if stop <= end:
            return iter(())
        return self._chunks(end, stop)

    def _chunks(self, end: int, stop: int) -> Iterator[list[tuple[int, dict[str, Any]]]]:
        try:
            fd = os.open(self.path, READ_FLAGS)
        except FileNotFoundError:
            return
        except OSError:
            if not os.path.islink(self.path):
                raise
            raise LogLineError(
                self.path,
                "",
                "a link; run files are read only from the run's own folder",
                fix="replace the link with the log itself",
            ) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise LogLineError(self.path, "", "not a plain file", fix="remove it")
            while end < stop:
                chunk = os.pread(fd, min(CHUNK_BYTES, stop - end), end)
                if not chunk:
                    break
                end += len(chunk)
                yield self._take(chunk)
        finally:
            os.close(fd)

    def _take(self, chunk: bytes) -> list[tuple[int, dict[str, Any]]]:
        """The objects of the lines ``chunk`` completes; the reader's state moves on."""
        out: list[tuple[int, dict[str, Any]]] = []
        if self._skipped:  # inside an overlong line: drop it up to its end
            cut = chunk.find(b"\n")
            if cut < 0:
                self._skipped += len(chunk)
                return out
            self.offset += self._skipped + cut + 1
            self._skipped = 0
            self.lines_read += 1
            self._damaged(self._overlong())
            chunk = chunk[cut + 1 :]
        data = self._partial + chunk if self._partial else chunk
        cut = data.rfind(b"\n") + 1  # 0 when no line is complete yet
        self._partial = data[cut:]
        if len(self._partial) > self.max_line_bytes:
            self._skipped, self._partial = len(self._partial), b""
        start = 0
        while start < cut:
            nl = data.index(b"\n", start)
            raw = data[start:nl]
            start = nl + 1
            self.lines_read += 1
            if len(raw) > self.max_line_bytes:
                self._damaged(self._overlong())
                continue
            if not raw.strip():
                continue
            try:
                value = self.decode(raw, self.path, self.lines_read)
            except LogLineError as exc:
                self._damaged(exc.reason, exc)
                continue
            if value is not None:
                out.append((self.lines_read, value))
        self.offset += cut
        return out

    def _overlong(self) -> str:
        return f"a line longer than {self.max_line_bytes:,} bytes (NNX_MAX_RECORD_BYTES)"

    def _damaged(self, reason: str, exc: LogLineError | None = None) -> None:
        if self.strict:
            raise exc or LogLineError(self.path, "", reason, line=self.lines_read)
        self.bad_lines += 1
        log.warning("%s, line %d: skipped, %s", self.path, self.lines_read, reason)


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every complete line of a log, numbered, read as a stream (one chunk held at a
    time); a torn last line is ignored, any other damage is a ``LogLineError``."""
    return JsonlReader(path).iter_numbered()


def read_jsonl(path: str | os.PathLike[str]) -> list[tuple[int, dict[str, Any]]]:
    """Every complete line of a log, numbered; a torn last line is ignored."""
    return list(iter_jsonl(path))
