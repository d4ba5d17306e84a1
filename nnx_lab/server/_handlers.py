"""The REST handlers of the runs panel, on Jupyter's ``APIHandler``.

Every handler requires Jupyter's authentication (``@web.authenticated``: 403 without a
token or a login) and authorization (``@authorized`` on the resource ``nnx_lab_runs``:
"read" for GET, the report included, which writes nothing; "write" for the stop request
and the rename). The file work runs in a
small thread pool, so a slow disk never holds up the server's event loop. A bad run file is answered
with a 4xx and its reason, never a 500: the service says what it refused
(``ApiError``), and a damaged file it did not expect (a ``FileError``) is a 409.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from ..errors import FileError
from ..runs import problem
from ._files import json_safe
from ._service import ApiError, RunsService

__all__ = ["AUTH_RESOURCE", "setup_handlers"]

AUTH_RESOURCE = "nnx_lab_runs"
API = "nnx-lab/api"
_KEY = r"(?P<key>[^/]+)"
_ID = r"(?P<run_id>[^/]+)"


class _RunsHandler(APIHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def service(self) -> RunsService:
        return self.settings["nnx_lab_runs"]

    @property
    def pool(self) -> ThreadPoolExecutor:
        return self.settings["nnx_lab_pool"]

    async def _answer(self, fn, *args: Any, **kwargs: Any) -> None:
        loop = asyncio.get_running_loop()
        try:
            data = await loop.run_in_executor(self.pool, lambda: fn(*args, **kwargs))
        except ApiError as exc:
            self._refuse(exc)
            return
        except FileError as exc:  # a run file the service did not expect to be bad: 4xx
            self.log.warning("nnx-lab runs panel: %s", exc)
            self._refuse(ApiError(409, problem(exc)))
            return
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        try:
            body = json.dumps(data, allow_nan=False)
        except ValueError:  # a number JSON cannot carry (a log's 1e400): as text
            body = json.dumps(json_safe(data, budget=10_000_000), allow_nan=False)
        self.finish(body)

    def _int_arg(self, name: str, default: int | None) -> int | None:
        text = self.get_query_argument(name, None)
        if text is None or text == "":
            return default
        try:
            return int(text)
        except ValueError:
            raise ApiError(400, f"{name}={text[:40]!r}: pass a whole number") from None

    def _refuse(self, exc: ApiError) -> None:
        self.set_status(exc.status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": exc.message}))


class RunsListHandler(_RunsHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        refresh = self.get_query_argument("refresh", "0") in ("1", "true")
        await self._answer(self.service.list_runs, refresh=refresh)


class RunHandler(_RunsHandler):
    @web.authenticated
    @authorized
    async def get(self, key: str, run_id: str) -> None:
        await self._answer(self.service.summary, key, run_id)


class RunLogHandler(_RunsHandler):
    @web.authenticated
    @authorized
    async def get(self, key: str, run_id: str) -> None:
        try:
            offset = self._int_arg("offset", 0)
            max_bytes = self._int_arg("max_bytes", None)
        except ApiError as exc:
            self._refuse(exc)
            return
        in_line = self.get_query_argument("in_line", "0") in ("1", "true")
        await self._answer(self.service.log_page, key, run_id, offset, max_bytes, in_line=in_line)


class RunStopHandler(_RunsHandler):
    @web.authenticated
    @authorized
    async def post(self, key: str, run_id: str) -> None:
        reason = ""
        if self.request.body:
            try:
                body = json.loads(self.request.body)
                reason = body.get("reason", "") if isinstance(body, dict) else ""
            except ValueError:
                self._refuse(ApiError(400, 'the body is not JSON: send {"reason": "..."}'))
                return
        if not isinstance(reason, str):
            self._refuse(ApiError(400, f"reason={reason!r}: pass a text"))
            return
        # The writer records "<reason> by <who>"; the default reason names the panel
        # already, so "by" is the person alone (it once read "... from the JupyterLab
        # runs panel by JupyterLab runs panel (name)").
        await self._answer(self.service.stop, key, run_id, reason=reason, by=self._who())

    def _who(self) -> str:
        user = self.current_user
        name = getattr(user, "display_name", None) or getattr(user, "username", None)
        return str(name) if name else "a JupyterLab user"


class RunNameHandler(_RunsHandler):
    @web.authenticated
    @authorized
    async def put(self, key: str, run_id: str) -> None:
        try:
            body = json.loads(self.request.body or b"null")
        except ValueError:
            body = None
        if not isinstance(body, dict) or "name" not in body:
            self._refuse(ApiError(400, 'send {"name": "..."} (an empty name removes it)'))
            return
        await self._answer(self.service.rename, key, run_id, body["name"])


class RunReportHandler(_RunsHandler):
    # a GET with the "read" right: the page is sent, nothing is written on the server
    @web.authenticated
    @authorized
    async def get(self, key: str, run_id: str) -> None:
        await self._answer(self.service.report, key, run_id)


class CompareHandler(_RunsHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        refs = []
        for item in self.get_query_arguments("run"):
            key, sep, run_id = item.partition("/")
            if not sep:
                self._refuse(ApiError(400, f"run={item[:60]!r}: pass <folder key>/<run id>"))
                return
            refs.append((key, run_id))
        await self._answer(self.service.compare, refs)


def setup_handlers(web_app: Any, service: RunsService) -> None:
    base = web_app.settings.get("base_url", "/")
    web_app.settings["nnx_lab_runs"] = service
    web_app.settings["nnx_lab_pool"] = ThreadPoolExecutor(4, thread_name_prefix="nnx-lab-runs")
    route = lambda tail: url_path_join(base, API, tail)  # noqa: E731
    web_app.add_handlers(
        ".*$",
        [
            (route("runs"), RunsListHandler),
            (route(f"runs/{_KEY}/{_ID}"), RunHandler),
            (route(f"runs/{_KEY}/{_ID}/log"), RunLogHandler),
            (route(f"runs/{_KEY}/{_ID}/stop"), RunStopHandler),
            (route(f"runs/{_KEY}/{_ID}/name"), RunNameHandler),
            (route(f"runs/{_KEY}/{_ID}/report"), RunReportHandler),
            (route("compare"), CompareHandler),
        ],
    )
