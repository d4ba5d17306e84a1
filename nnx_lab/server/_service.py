"""What the runs panel asks the server, as plain functions of the run files.

``RunsService`` answers the REST handlers (``_handlers``): the runs listing, one run's
summary, a page of a run's log from a byte offset, the stop request and the comparison
of two or more runs' configurations. Every answer is JSON a browser parses (no NaN),
bounded in the work it costs, and says what it refused. What it writes into a run (the
stop request and the run's name) is in ``_writes``.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..runs import (
    STOP_REQUEST,
    RunRecordError,
    compare_many,
    damaged_row,
    event_from_json,
    is_run_id,
    metadata_row,
    parse_line,
    problem,
    run_dir,
    run_record,
    validate_run_id,
)
from ._config import NNxLab
from ._discovery import Discovery, RunsFolder, discover
from ._files import (
    FileRefused,
    TooLarge,
    file_size,
    json_safe,
    read_range,
    read_small,
    read_yaml_record,
    shown_size,
)
from ._report import RunReport
from ._writes import ApiError, RunWrites, error_text

__all__ = ["ApiError", "RunsService"]

LOG = "metrics.jsonl"
MAX_COMPARED = 8
_MAX_DAMAGE_NOTES = 20  # damaged lines described per log page
_MIN_PAGE = 4096


@dataclass
class _Cached:
    signature: tuple[int, int, int]  # inode, mtime_ns, size of metadata.yaml
    meta: dict[str, Any] | None
    error: str | None


class RunsService(RunWrites, RunReport):
    """The server's view of the runs under its roots (see the module docstring)."""

    def __init__(
        self, config: NNxLab, server_root: str | os.PathLike[str] | None = None, *, clock=time.time
    ) -> None:
        self.config = config
        self.server_root = Path(server_root).resolve() if server_root is not None else None
        self.clock = clock
        self._lock = threading.Lock()
        self._discovery: Discovery | None = None
        self._discovered_at = -1.0
        self._meta_cache: dict[Path, _Cached] = {}

    # ------------------------------------------------------------------ folders

    def roots(self) -> list[Path]:
        base = self.server_root or Path.cwd()
        configured = [Path(p).expanduser() for p in self.config.runs_roots] or [base]
        roots = [p if p.is_absolute() else base / p for p in configured]
        env = os.environ.get("NNX_RUNS_ROOT")
        if env:
            roots.append(Path(env).expanduser() if Path(env).is_absolute() else base / env)
        return roots

    def discovery(self, *, refresh: bool = False) -> Discovery:
        with self._lock:
            now = time.monotonic()
            if (
                refresh
                or self._discovery is None
                or now - self._discovered_at > self.config.rescan_s
            ):
                self._discovery = discover(
                    self.roots(),
                    max_depth=self.config.max_depth,
                    max_dirs=self.config.max_dirs,
                    server_root=self.server_root,
                )
                self._discovered_at = now
            return self._discovery

    def folder(self, key: str) -> RunsFolder:
        """The runs folder with this key; a folder found since the last search counts."""
        found = self.discovery().by_key().get(key)
        if found is None:
            found = self.discovery(refresh=True).by_key().get(key)
        if found is None:
            raise ApiError(
                404,
                f"no runs folder {key[:40]!r} among those the server found; refresh the runs "
                "panel (a folder outside the server's roots is added with NNxLab.runs_roots)",
            )
        if os.path.realpath(found.path) != str(found.path):
            raise ApiError(
                404, f"the runs folder {found.label} moved or became a link; refresh the panel"
            )
        return found

    def run_path(self, key: str, run_id: str) -> tuple[RunsFolder, Path]:
        """The folder of a run, confined to its runs folder (no '..', no link out)."""
        try:
            validate_run_id(run_id)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        folder = self.folder(key)
        try:
            path = run_dir(folder.path, run_id)
        except ValueError as exc:
            raise ApiError(403, str(exc)) from None
        if not path.is_dir():
            raise ApiError(404, f"no run {run_id} in {folder.label}; it may have been deleted")
        return folder, path

    # ------------------------------------------------------------------ listing

    def _metadata(self, path: Path, budget: list[int]) -> tuple[dict[str, Any] | None, str | None]:
        """metadata.yaml of a run folder (cached while it does not change)."""
        target = path / "metadata.yaml"
        try:
            info = os.stat(target, follow_symlinks=False)
        except FileNotFoundError:
            return None, "no metadata.yaml"
        except OSError as exc:
            return None, f"metadata.yaml: {exc.strerror}"
        signature = (info.st_ino, info.st_mtime_ns, info.st_size)
        cached = self._meta_cache.get(path)
        if cached is not None and cached.signature == signature:
            return cached.meta, cached.error
        if budget[0] <= 0:
            return (
                None,
                "not read: this listing spent its reading budget (NNxLab.listing_budget_bytes)",
            )
        budget[0] -= info.st_size
        try:
            meta, error = read_yaml_record(target, self.config.max_record_bytes), None
        except (FileRefused, RunRecordError, OSError) as exc:
            meta, error = None, error_text(exc)
        self._meta_cache[path] = _Cached(signature, meta, error)
        return meta, error

    def _row(self, folder: RunsFolder, path: Path, budget: list[int]) -> dict[str, Any]:
        try:
            run_dir(folder.path, path.name)
        except ValueError:
            row = damaged_row(path, "a link that leads out of its runs folder; not read")
            row["refused"] = True
        else:
            meta, error = self._metadata(path, budget)  # checked: its schema holds
            if meta is None:
                row = damaged_row(path, error or "unreadable")
            else:
                try:
                    row = metadata_row(path, meta)
                except Exception as exc:  # a record with values of odd types
                    row = damaged_row(path, f"metadata.yaml: {error_text(exc)}")
        row.pop("path", None)
        row["folder"] = folder.key
        if row.get("status") is not None:
            row["status"] = str(row["status"])[:40]
        if isinstance(row.get("error"), str):
            row["error"] = row["error"][:500]
        try:
            return json_safe(row, budget=500, depth=4)
        except TooLarge:
            return {
                **damaged_row(path, "metadata.yaml holds values too large to show"),
                "folder": folder.key,
            }

    def list_runs(self, *, refresh: bool = False) -> dict[str, Any]:
        """Every run under the discovered folders (the newest ``max_runs``), with status;
        ``refresh`` searches the roots again first."""
        disc = self.discovery(refresh=refresh)
        entries: list[tuple[int, RunsFolder, Path]] = []
        folders = []
        scan_cap = self.config.max_runs * 20
        scanned_total = 0
        for folder in disc.folders:
            count = 0
            capped = False
            try:
                with os.scandir(folder.path) as it:
                    for entry in it:
                        scanned_total += 1
                        if scanned_total > scan_cap:
                            capped = True
                            break
                        if not is_run_id(entry.name):
                            continue
                        try:
                            info = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        entries.append((info.st_mtime_ns, folder, Path(entry.path)))
                        count += 1
            except OSError as exc:
                folders.append(
                    {
                        "key": folder.key,
                        "label": folder.label,
                        "path": str(folder.path),
                        "runs": 0,
                        "error": exc.strerror,
                    }
                )
                continue
            folders.append(
                {
                    "key": folder.key,
                    "label": folder.label,
                    "path": str(folder.path),
                    "runs": count,
                    "capped": capped,
                }
            )
        entries.sort(key=lambda e: e[0], reverse=True)
        left_out = max(0, len(entries) - self.config.max_runs)
        entries = entries[: self.config.max_runs]
        budget = [self.config.listing_budget_bytes]
        rows = [self._row(folder, path, budget) for _, folder, path in entries]
        live = {path for _, _, path in entries}
        # list() copies the keys at once: another request's thread may add to the cache
        for stale in [p for p in list(self._meta_cache) if p not in live]:
            self._meta_cache.pop(stale, None)
        rows.sort(
            key=lambda r: (
                r.get("started_at") if isinstance(r.get("started_at"), int | float) else 0.0
            ),
            reverse=True,
        )
        notes = list(disc.notes)
        if left_out:
            notes.append(
                f"{left_out} older runs are not listed (NNxLab.max_runs = {self.config.max_runs})"
            )
        if scanned_total > scan_cap:
            notes.append("a runs folder holds too many entries to list them all")
        return {
            "server_time": self.clock(),
            "folders": json_safe(folders, budget=100_000),
            "runs": rows,
            "truncated": bool(left_out or disc.truncated or scanned_total > scan_cap),
            "notes": notes,
            "visited": disc.visited,
        }

    # ------------------------------------------------------------------ one run

    def summary(self, key: str, run_id: str) -> dict[str, Any]:
        """One run: its row, its configuration (run.yaml), its metadata, the log's size."""
        folder, path = self.run_path(key, run_id)
        budget = [self.config.max_record_bytes * 4]
        row = self._row(folder, path, budget)
        out: dict[str, Any] = {
            "server_time": self.clock(),
            "run": row,
            "folder": {"key": folder.key, "label": folder.label, "path": str(folder.path)},
            "problems": [],
        }
        for name, field in (("run.yaml", "config"), ("metadata.yaml", "metadata")):
            try:
                value = read_yaml_record(path / name, self.config.max_record_bytes)
                out[field] = json_safe(value)
            except FileNotFoundError:
                out[field] = None
                out["problems"].append(f"no {name}")
            except RunRecordError as exc:  # its text names the file
                out[field] = None
                out["problems"].append(error_text(exc))
            except (FileRefused, TooLarge, OSError) as exc:
                out[field] = None
                out["problems"].append(f"{name}: {error_text(exc)}")
        try:
            out["log_bytes"] = file_size(path / LOG)
        except FileNotFoundError:
            out["log_bytes"] = 0
        except (FileRefused, OSError) as exc:
            out["log_bytes"] = None
            out["problems"].append(f"{LOG}: {error_text(exc)}")
        out["stop_requested"] = os.path.lexists(path / STOP_REQUEST)
        return out

    def log_page(
        self,
        key: str,
        run_id: str,
        offset: int,
        max_bytes: int | None = None,
        *,
        in_line: bool = False,
    ) -> dict[str, Any]:
        """The complete lines of a run's log from byte ``offset``, at most a page of them.

        ``next_offset`` is where the next request starts; an incomplete last line (being
        written, or torn by a killed writer) is held back. A line longer than a page is
        skipped in pieces: the reply says ``in_line`` and the next request passes it back,
        so the rest of that line is skipped too. A log that shrank was replaced: the reply
        says ``reset`` and the panel starts again from 0.
        """
        if offset < 0:
            raise ApiError(400, f"offset={offset}: pass a byte offset >= 0")
        page = self.config.page_bytes
        if max_bytes is not None:
            page = max(_MIN_PAGE, min(page, max_bytes))
        _, path = self.run_path(key, run_id)
        target = path / LOG
        try:
            chunk, size = read_range(target, offset, page)
        except FileNotFoundError:
            chunk, size = b"", 0
        except FileRefused as exc:
            raise ApiError(403, f"{run_id}/{LOG}: {exc.reason}") from None
        reply: dict[str, Any] = {
            "server_time": self.clock(),
            "offset": offset,
            "size": size,
            "next_offset": offset,
            "events": [],
            "bad_lines": 0,
            "damage": [],
            "reset": False,
            "in_line": False,
            "more": False,  # complete lines wait past next_offset: ask again at once
            "pending_bytes": 0,  # an incomplete last line (being written, or torn)
        }
        if offset > size:
            reply.update(reset=True, next_offset=0, more=size > 0)
            return reply
        read_to = offset + len(chunk)
        more = read_to < size
        start = 0
        if in_line:  # the rest of an overlong line: skip to its end
            cut = chunk.find(b"\n")
            if cut < 0:
                reply.update(next_offset=read_to, in_line=True, more=more)
                return reply
            start = cut + 1
        end = chunk.rfind(b"\n") + 1
        if end <= start:
            if start == 0 and len(chunk) >= page:
                # one line longer than a page: skipped in pieces, never held in memory
                reply["bad_lines"] = 1
                reply["damage"].append(
                    {"offset": offset, "reason": f"a line longer than {shown_size(page)}: skipped"}
                )
                reply.update(next_offset=read_to, in_line=True, more=more)
            else:  # the start of a line the next read takes whole, or an incomplete last line
                reply.update(
                    next_offset=offset + start,
                    more=more and start > 0,
                    pending_bytes=0 if more else len(chunk) - start,
                )
            return reply
        pos = offset + start
        events = reply["events"]
        for raw in chunk[start:end].split(b"\n")[:-1]:
            line_at = pos
            pos += len(raw) + 1
            if not raw.strip():
                continue
            try:
                # the runs floor's checks: JSON within the limits, then the line's shape
                obj = parse_line(raw, target, None)
                event_from_json(obj, target)
                # a line without NaN or Infinity parses to JSON a browser reads as is
                safe = b"NaN" not in raw and b"Infinity" not in raw
                events.append(obj if safe else json_safe(obj, budget=10_000, depth=8))
            except Exception as exc:  # a damaged line is counted, never fatal
                reply["bad_lines"] += 1
                if len(reply["damage"]) < _MAX_DAMAGE_NOTES:
                    reason = _line_problem(exc)
                    reply["damage"].append({"offset": line_at, "reason": reason[:200]})
        reply["next_offset"] = offset + end
        reply["more"] = more
        if not more:
            reply["pending_bytes"] = len(chunk) - end
        return reply

    # ------------------------------------------------------------------ compare

    def compare(self, refs: list[tuple[str, str]]) -> dict[str, Any]:
        """The configurations of two or more runs side by side: every value that differs
        between the first run and another, and whether it changes the run id."""
        if not 2 <= len(refs) <= MAX_COMPARED:
            raise ApiError(400, f"compare takes 2 to {MAX_COMPARED} runs, got {len(refs)}")
        records = []
        runs = []
        for key, run_id in refs:
            folder, path = self.run_path(key, run_id)
            for name in ("run.yaml", "metadata.yaml", "plan.json"):
                try:
                    read_small(path / name, self.config.max_record_bytes)
                except FileNotFoundError:
                    if name == "run.yaml":
                        raise ApiError(409, f"run {run_id} has no run.yaml to compare") from None
                except (FileRefused, OSError) as exc:
                    raise ApiError(409, f"run {run_id}: {error_text(exc)}") from None
            try:
                records.append(run_record(run_id, runs_root=folder.path))
            except Exception as exc:  # a damaged record is named, not fatal
                raise ApiError(409, f"run {run_id}: {error_text(exc)}") from None
            runs.append({"folder": folder.key, "run_id": run_id, "label": folder.label})
        try:
            table, limits = compare_many(records)
        except Exception as exc:  # a record of odd shape (a code record without a role)
            raise ApiError(409, _uncomparable(records, runs, exc)) from None
        changed = [row for row in table if row["changed"]]
        try:
            body = json_safe(changed, budget=200_000, depth=16)
        except TooLarge as exc:
            raise ApiError(
                409, f"the runs' configurations are too large to compare here ({exc})"
            ) from None
        return {
            "server_time": self.clock(),
            "runs": runs,
            "rows": body,
            "unchanged": len(table) - len(changed),
            "limits": limits,
        }


def _uncomparable(records: list[Any], runs: list[dict[str, Any]], exc: Exception) -> str:
    """Which run's record cannot be compared (each is compared with itself), and why."""
    for record, run in zip(records, runs, strict=True):
        try:
            compare_many([record, record])
        except Exception as own:
            return (
                f"run {run['run_id']}: its record cannot be compared, a value or a code "
                f"record (plan.json) is damaged ({error_text(own)})"
            )
    ids = ", ".join(r["run_id"] for r in runs)
    return f"runs {ids} cannot be compared: a record is damaged ({error_text(exc)})"


def _line_problem(exc: BaseException) -> str:
    """A damaged log line's reason, without the file's name (the page names the run)."""
    text = problem(exc)
    return text.split(": ", 1)[1] if text.startswith(LOG + ": ") else text
