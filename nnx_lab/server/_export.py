"""The runs panel's "Export bundle": a run's bundle (zip), built in a subprocess and sent
as a download (``POST nnx-lab/api/runs/<folder>/<id>/bundle``).

The server is torch-free by contract, and an export is not (it loads the checkpoint
through the engine: its checksums, its recipe against ``run.yaml``). So the handler
checks what it can with the runs floor's strict readers first (the run id, the folder
confined to its runs folder, ``run.yaml``, the checkpoint's sidecar and its tensors
file): a bad request is a 4xx before anything is spawned or written. Then it runs
``sys.executable -m nnx_lab.bundles export`` (no shell, a timeout: ``NNxLab.
export_timeout_s``) into a private temporary folder outside the runs root, checks the
manifest of what it wrote, streams the zip back with the run's name as the file name,
and removes the temporary folder afterwards, also on a refusal, a timeout or a client
that went away (the subprocess is killed then). Nothing is written in the runs root.
One export runs per run at a time (another: 409), at most ``NNxLab.max_exports`` in
all (another: 429).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.iostream import StreamClosedError

from ..runs import (
    CheckpointFileError,
    RunRecordError,
    SidecarFile,
    problem,
    read_json_file,
    read_manifest,
)
from ._files import FileRefused, read_yaml_record
from ._handlers import _ID, _KEY, API, _RunsHandler
from ._writes import ApiError

__all__ = ["BundleExports", "RunBundleHandler", "setup_export"]

_CHUNK = 1 << 20
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])  # where this nnx_lab lives


@dataclass
class ExportJob:
    """One export: the command, its private folder, and the slot it holds."""

    run_id: str
    argv: list[str]
    tmp: Path
    target: Path
    filename: str
    timeout_s: float
    release: Any
    proc: Any = None
    gone: bool = False  # the client went away: the export is abandoned
    _closed: bool = field(default=False, repr=False)

    async def run(self) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                p for p in (_PACKAGE_PARENT, os.environ.get("PYTHONPATH")) if p
            ),
        }
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=self.tmp,
            start_new_session=True,  # its own group: a kill ends what it started
        )
        try:
            _, err = await asyncio.wait_for(self.proc.communicate(), self.timeout_s)
        except TimeoutError:
            self.kill()
            await self.proc.wait()  # reaped: no zombie is left behind
            raise ApiError(
                504,
                f"run {self.run_id}: the export took longer than NNxLab.export_timeout_s="
                f"{self.timeout_s:g} s and was stopped; raise that setting, or export in a "
                f"kernel with nnx_lab.bundles.export_bundle({self.run_id!r}, ...)",
            ) from None
        if self.gone:
            return
        reason = _last_line(err)
        if self.proc.returncode == 2:
            raise ApiError(409, f"run {self.run_id}: {reason}; no bundle")
        if self.proc.returncode != 0:
            reason = reason or f"exit status {self.proc.returncode}"
            raise ApiError(500, f"run {self.run_id}: the export failed ({reason})")
        try:
            doc = read_manifest(self.target)  # the runs floor's strict manifest reader
        except Exception as exc:
            raise ApiError(
                500, f"run {self.run_id}: the bundle written is not whole ({problem(exc)})"
            ) from None
        if doc.run_id != self.run_id:
            raise ApiError(500, f"run {self.run_id}: the bundle written is of run {doc.run_id}")

    def kill(self) -> None:
        proc = self.proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)

    def close(self) -> None:
        """Kill what still runs, remove the private folder, free the slot (once)."""
        if self._closed:
            return
        self._closed = True
        self.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.release()


def _last_line(err: bytes | None) -> str:
    lines = [x for x in (err or b"").decode("utf-8", "replace").splitlines() if x.strip()]
    return lines[-1][:1000] if lines else ""


def _file_name(name: Any, run_id: str) -> tuple[str, str]:
    """``(ascii name, utf-8 name)`` of the download: the run's name, or the id."""
    if isinstance(name, str) and name.strip():
        full = f"{name.strip()[:80]}-{run_id[:8]}.zip"
        ascii_ = re.sub(r"[^A-Za-z0-9._-]+", "_", full).strip("._") or f"bundle_{run_id}.zip"
        return ascii_, full
    plain = f"bundle_{run_id}.zip"
    return plain, plain


class BundleExports:
    """The checks before an export, and the slots of the exports that run."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self._lock = threading.Lock()
        self._active: set[tuple[str, str]] = set()

    def prepare(self, key: str, run_id: str, checkpoint: str) -> ExportJob:
        """Everything checked, a slot taken and the private folder made: the job to run."""
        config = self.service.config
        folder, path = self.service.run_path(key, run_id)
        if checkpoint not in ("last", "best"):
            raise ApiError(400, f'checkpoint={checkpoint!r:.40}: pass "last" or "best"')
        if not (path / "run.yaml").is_file():
            raise ApiError(409, f"run {run_id} has no run.yaml: there is nothing to export")
        ckpts = path / "checkpoints"
        if ckpts.is_symlink():
            raise ApiError(403, f"run {run_id}: its checkpoints folder is a link; not exported")
        sidecar = ckpts / f"{checkpoint}.json"
        if not os.path.lexists(sidecar):
            raise ApiError(
                409,
                f"run {run_id} has no {checkpoint.upper()} checkpoint to export (no "
                f"checkpoints/{checkpoint}.json); train it, or export the other checkpoint",
            )
        try:  # the strict shape of a sidecar (the engine checks its checksums later)
            doc = read_json_file(sidecar, SidecarFile, CheckpointFileError)
        except CheckpointFileError as exc:
            raise ApiError(409, f"run {run_id}: {problem(exc)}; not exported") from None
        if doc.run_id != run_id or doc.type != checkpoint:
            raise ApiError(
                409,
                f"run {run_id}: checkpoints/{checkpoint}.json is a {doc.type} checkpoint of "
                f"run {doc.run_id} (copied in?); not exported",
            )
        tensors = ckpts / doc.tensors_file
        if tensors.is_symlink() or not tensors.is_file():
            raise ApiError(
                409, f"run {run_id}: its checkpoint's tensors file {doc.tensors_file} is missing"
            )
        try:
            name = read_yaml_record(path / "metadata.yaml", config.max_record_bytes).get("name")
        except (FileNotFoundError, FileRefused, RunRecordError, OSError):
            name = None
        slot = (folder.key, run_id)
        with self._lock:
            if slot in self._active:
                raise ApiError(409, f"run {run_id} is being exported already; wait for it")
            if len(self._active) >= config.max_exports:
                raise ApiError(
                    429,
                    f"{len(self._active)} bundle exports are running (NNxLab.max_exports="
                    f"{config.max_exports}); try again when one has ended",
                )
            self._active.add(slot)

        def release() -> None:
            with self._lock:
                self._active.discard(slot)

        try:
            tmp = Path(tempfile.mkdtemp(prefix="nnx-lab-export-")).resolve()
        except OSError as exc:
            release()
            raise ApiError(500, f"no temporary folder for the export ({exc.strerror})") from None
        if tmp.is_relative_to(Path(folder.path).resolve()):
            shutil.rmtree(tmp, ignore_errors=True)
            release()
            raise ApiError(
                500,
                f"the temporary folder {tmp} is inside the runs folder {folder.label}; "
                "point TMPDIR elsewhere (an export writes nothing in a runs root)",
            )
        ascii_name, full_name = _file_name(name, run_id)
        target = tmp / "bundle.zip"
        argv = [
            sys.executable, "-m", "nnx_lab.bundles", "export", run_id, str(target),
            "--runs-root", str(folder.path), "--checkpoint", checkpoint, "--archive",
            "--no-record",
        ]  # fmt: skip
        return ExportJob(
            run_id, argv, tmp, target, f"{ascii_name}\0{full_name}",
            config.export_timeout_s, release,
        )  # fmt: skip


class RunBundleHandler(_RunsHandler):
    """``POST .../bundle`` ({"checkpoint": "last" | "best"}, optional): the zip."""

    _job: ExportJob | None = None

    @web.authenticated
    @authorized
    async def post(self, key: str, run_id: str) -> None:
        checkpoint = "last"
        if self.request.body:
            try:
                body = json.loads(self.request.body)
            except ValueError:
                body = None
            if not isinstance(body, dict):
                self._refuse(ApiError(400, 'the body is not JSON: send {"checkpoint": "last"}'))
                return
            checkpoint = body.get("checkpoint", "last")
        exports: BundleExports = self.settings["nnx_lab_exports"]
        loop = asyncio.get_running_loop()
        try:
            job = await loop.run_in_executor(
                self.pool, exports.prepare, key, run_id, str(checkpoint)
            )
        except ApiError as exc:
            self._refuse(exc)
            return
        self._job = job
        try:
            await job.run()
            if job.gone:
                return
            await self._send(job)
        except ApiError as exc:
            job.close()  # before the answer: a client that has it finds nothing left
            if not job.gone and not self._finished:
                self._refuse(exc)
        finally:
            job.close()

    async def _send(self, job: ExportJob) -> None:
        ascii_name, full_name = job.filename.split("\0")
        size = job.target.stat().st_size
        self.set_header("Content-Type", "application/zip")
        self.set_header("Cache-Control", "no-store")
        self.set_header("Content-Length", str(size))
        self.set_header(
            "Content-Disposition",
            f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(full_name)}",
        )
        loop = asyncio.get_running_loop()
        with open(job.target, "rb") as fh:
            chunk = await loop.run_in_executor(self.pool, fh.read, _CHUNK)
            while chunk and not job.gone:
                ahead = await loop.run_in_executor(self.pool, fh.read, _CHUNK)
                if not ahead:
                    # every byte is read: the folder goes before the last ones are sent,
                    # so a client holding the whole body finds nothing left behind
                    job.close()
                self.write(chunk)
                try:
                    await self.flush()
                except StreamClosedError:
                    job.gone = True
                    return
                chunk = ahead
        job.close()
        self.finish()

    def on_connection_close(self) -> None:
        job = self._job
        if job is not None:
            job.gone = True
            job.kill()  # its folder is removed where post() ends
        super().on_connection_close()


def setup_export(web_app: Any, service: Any) -> None:
    """The export's route, beside the others of ``setup_handlers``."""
    web_app.settings["nnx_lab_exports"] = BundleExports(service)
    base = web_app.settings.get("base_url", "/")
    route = url_path_join(base, API, f"runs/{_KEY}/{_ID}/bundle")
    web_app.add_handlers(".*$", [(route, RunBundleHandler)])
