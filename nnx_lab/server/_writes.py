"""What the runs panel may write into a run: a stop request, and the run's name.

Nothing else in a run folder is ever written by the server. Both writes go through the
runs floor: ``request_stop`` (``stop_request.json``, read by the run's writer) and
``rename_run`` (``metadata.yaml`` rewritten with the new name under the lock the writer
takes for its own rewrites, so a heartbeat and a rename never lose each other's change).
Every refusal is an ``ApiError``: the HTTP status and a message that says what to do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import ConfigError, NNxError
from ..runs import RunRecordError, effective_status, problem, rename_run, request_stop
from ._files import FileRefused, TooLarge, read_yaml_record

__all__ = ["ApiError", "RunWrites", "error_text"]


class ApiError(NNxError):
    """A refused request: the HTTP status and a message that says what to do."""

    def __init__(self, status: int, message: str) -> None:
        self.status, self.message = status, message
        super().__init__(message)


def error_text(exc: BaseException) -> str:
    """The reason, in one line: the file, the field and the value of a schema error."""
    if isinstance(exc, FileRefused):
        return exc.reason
    if isinstance(exc, TooLarge):
        return f"too large to show ({exc})"
    return problem(exc)[:500]


class RunWrites:
    """``stop`` and ``rename`` of ``RunsService`` (its ``run_path``, ``config`` and
    ``clock``)."""

    config: Any
    clock: Any

    def run_path(self, key: str, run_id: str) -> tuple[Any, Path]:
        raise NotImplementedError

    def stop(self, key: str, run_id: str, *, reason: str, by: str) -> dict[str, Any]:
        """Write the stop request into a running run's folder."""
        folder, path = self.run_path(key, run_id)
        try:
            meta = read_yaml_record(path / "metadata.yaml", self.config.max_record_bytes)
        except FileNotFoundError:
            raise ApiError(409, f"run {run_id} has no metadata.yaml: nothing to stop") from None
        except (FileRefused, RunRecordError) as exc:
            raise ApiError(409, f"run {run_id}: {error_text(exc)}; not stopped") from None
        status = effective_status(meta)
        if status != "running":
            raise ApiError(409, f"run {run_id} is {status}, not running: there is nothing to stop")
        text = reason.strip() if isinstance(reason, str) else ""
        try:
            request_stop(
                run_id,
                folder.path,
                reason=(text or "stopped from the JupyterLab runs panel")[:200],
                by=by[:200],
            )
        except ValueError as exc:
            raise ApiError(409, str(exc)) from None
        except OSError as exc:  # the run's folder is not writable by the server
            raise ApiError(
                500, f"run {run_id}: the stop request could not be written ({exc.strerror})"
            ) from None
        return {
            "run_id": run_id,
            "folder": folder.key,
            "requested": True,
            "server_time": self.clock(),
        }

    def rename(self, key: str, run_id: str, name: Any) -> dict[str, Any]:
        """Give a run a new name (an empty one removes it), in any status: only the
        ``name`` of its ``metadata.yaml`` changes."""
        folder, path = self.run_path(key, run_id)
        try:
            record = rename_run(path, name, max_bytes=self.config.max_record_bytes)
        except ConfigError as exc:
            raise ApiError(400, str(exc)) from None
        except FileNotFoundError:
            raise ApiError(409, f"run {run_id} has no metadata.yaml to hold a name") from None
        except RunRecordError as exc:  # a link, a damaged record: refused, nothing written
            raise ApiError(409, f"run {run_id}: {error_text(exc)}; not renamed") from None
        except OSError as exc:  # the run's folder is not writable by the server
            raise ApiError(
                500, f"run {run_id}: the name could not be written ({exc.strerror})"
            ) from None
        return {
            "run_id": run_id,
            "folder": folder.key,
            "name": record.get("name"),
            "server_time": self.clock(),
        }
