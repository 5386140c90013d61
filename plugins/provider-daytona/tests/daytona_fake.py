"""A local stand-in for the Daytona API and toolbox, on 127.0.0.1, for the SDK to talk to.

Every reply is built with the SDK's own response models (``daytona_api_client.models``,
``daytona_toolbox_api_client.models``) and serialised with their ``to_dict()``, so the real SDK
parses what it would parse from Daytona. A "sandbox" is a record plus, once the provider runs its
server command through the toolbox, a real child process group on this machine; the signed
preview URL of a port is ``http://127.0.0.1:<port>`` (the test makes the server bind there).

Faults on demand: a wrong API key is answered 401; ``rate_limit_creates`` first creates are
answered 429.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import uuid
from typing import Any

from daytona_api_client.models import ListSandboxesResponse, Sandbox, SandboxListItem, SignedPortPreviewUrl
from daytona_toolbox_api_client.models import Command, SessionCommandLogsResponse, SessionExecuteResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openenv.testing import StandIn

__all__ = ["FakeDaytona"]


class FakeDaytona:
    """The fake API: ``with FakeDaytona(api_key) as fake:`` then point ``DAYTONA_API_URL`` at ``fake.url``."""

    def __init__(self, api_key: str, *, extra_env: dict[str, str] | None = None) -> None:
        self.api_key = api_key
        self.extra_env = extra_env or {}
        self.rate_limit_creates = 0
        self.create_attempts = 0
        #: The state a sandbox moves to from ``starting`` (on its second poll): ``"starting"`` keeps it
        #: there for ever, ``"error"`` makes its start fail.
        self.start_state = "started"
        self.sandboxes: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        self._lock = threading.Lock()
        self.url = ""
        self.app = Starlette(routes=[
            Route("/sandbox", self.create, methods=["POST"]),
            Route("/sandbox", self.list, methods=["GET"]),
            Route("/sandbox/{sid}", self.get, methods=["GET"]),
            Route("/sandbox/{sid}", self.delete, methods=["DELETE"]),
            Route("/sandbox/{sid}/ports/{port:int}/signed-preview-url", self.signed_url, methods=["GET"]),
            Route("/toolbox/{sid}/process/session", self.create_session, methods=["POST"]),
            Route("/toolbox/{sid}/process/session/{session}/exec", self.execute, methods=["POST"]),
            Route("/toolbox/{sid}/process/session/{session}/command/{cmd}", self.command, methods=["GET"]),
            Route("/toolbox/{sid}/process/session/{session}/command/{cmd}/logs", self.logs,
                  methods=["GET"]),
        ])

    # -- lifecycle --------------------------------------------------------------------------------

    def __enter__(self) -> FakeDaytona:
        self._logs = tempfile.mkdtemp(prefix="fake-daytona-")  # the commands' logs, removed on exit
        self._stand_in = StandIn(self.app, "fake daytona")
        self.url = self._stand_in.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for record in list(self.sandboxes.values()):
            self._kill(record)
        self._stand_in.stop()
        shutil.rmtree(self._logs, ignore_errors=True)

    # -- helpers ----------------------------------------------------------------------------------

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {self.api_key}"

    def _fields(self, record: dict[str, Any]) -> dict[str, Any]:
        return dict(id=record["id"], organization_id="org-test", name=record["id"], user="daytona",
                    env=record["env"], labels=record["labels"], public=False, network_block_all=False,
                    kvm=False, target="local", cpu=1, gpu=0, memory=1, disk=3, state=record["state"],
                    toolbox_proxy_url=f"{self.url}/toolbox")

    def _dto(self, record: dict[str, Any]) -> dict[str, Any]:
        return Sandbox(**self._fields(record)).to_dict()

    @staticmethod
    def _error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"statusCode": status, "message": message, "error": message}, status_code=status)

    def _kill(self, record: dict[str, Any]) -> None:
        for proc in record["procs"].values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(10)

    def kill_server(self, sandbox_id: str) -> None:
        """Kill the server process of a sandbox behind the provider's back."""
        self._kill(self.sandboxes[sandbox_id])

    # -- API --------------------------------------------------------------------------------------

    async def create(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(401, "Invalid API key")
        self.create_attempts += 1
        if self.create_attempts <= self.rate_limit_creates:
            return self._error(429, "Too many requests: sandbox quota reached")
        body = await request.json()
        sid = uuid.uuid4().hex[:16]
        record = {"id": sid, "env": body.get("env") or {}, "labels": body.get("labels") or {},
                  "state": "starting", "polls": 0, "procs": {}, "logs": {}, "body": body,
                  "commands": []}
        with self._lock:
            self.sandboxes[sid] = record
        return JSONResponse(self._dto(record))

    async def get(self, request: Request) -> Response:
        record = self.sandboxes.get(request.path_params["sid"])
        if not self._authorized(request):
            return self._error(401, "Invalid API key")
        if record is None:
            return self._error(404, "Sandbox not found")
        record["polls"] += 1
        if record["state"] == "starting" and record["polls"] >= 2:
            record["state"] = self.start_state
        return JSONResponse(self._dto(record))

    async def list(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(401, "Invalid API key")
        import json

        wanted = json.loads(request.query_params.get("labels") or "{}")
        items = [SandboxListItem(**self._fields(r)) for r in self.sandboxes.values()
                 if all(r["labels"].get(k) == v for k, v in wanted.items())]
        return JSONResponse(ListSandboxesResponse(items=items, next_cursor=None).to_dict())

    async def delete(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(401, "Invalid API key")
        with self._lock:
            record = self.sandboxes.pop(request.path_params["sid"], None)
        if record is None:
            return self._error(404, "Sandbox not found")
        self._kill(record)
        self.deleted.append(record["id"])
        record["state"] = "destroyed"
        return JSONResponse(self._dto(record))

    async def signed_url(self, request: Request) -> Response:
        sid, port = request.path_params["sid"], request.path_params["port"]
        if sid not in self.sandboxes:
            return self._error(404, "Sandbox not found")
        return JSONResponse(SignedPortPreviewUrl(sandbox_id=sid, port=port, token="signed-" + sid,
                                                 url=f"http://127.0.0.1:{port}").to_dict())

    # -- toolbox ----------------------------------------------------------------------------------

    async def create_session(self, request: Request) -> Response:
        if request.path_params["sid"] not in self.sandboxes:
            return self._error(404, "Sandbox not found")
        return Response(status_code=201)

    async def execute(self, request: Request) -> Response:
        record = self.sandboxes.get(request.path_params["sid"])
        if record is None:
            return self._error(404, "Sandbox not found")
        body = await request.json()
        cmd_id = uuid.uuid4().hex[:12]
        record["commands"].append(body["command"])
        log_path = os.path.join(self._logs, f"{record['id']}-{cmd_id}.log")
        env = {**os.environ, **self.extra_env, **record["env"]}
        record["procs"][cmd_id] = await asyncio.to_thread(self._spawn, body["command"], env, log_path)
        record["logs"][cmd_id] = log_path
        return JSONResponse(SessionExecuteResponse(cmd_id=cmd_id).to_dict())

    @staticmethod
    def _spawn(command: str, env: dict[str, str], log_path: str) -> subprocess.Popen[bytes]:
        with open(log_path, "wb") as log:
            return subprocess.Popen(["/bin/sh", "-c", command], env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    async def command(self, request: Request) -> Response:
        record = self.sandboxes.get(request.path_params["sid"])
        if record is None or request.path_params["cmd"] not in record["procs"]:
            return self._error(404, "Command not found")
        proc = record["procs"][request.path_params["cmd"]]
        return JSONResponse(Command(id=request.path_params["cmd"], command="openenv serve",
                                    exit_code=proc.poll()).to_dict())

    async def logs(self, request: Request) -> Response:
        record = self.sandboxes.get(request.path_params["sid"])
        if record is None or request.path_params["cmd"] not in record["logs"]:
            return self._error(404, "Command not found")
        with open(record["logs"][request.path_params["cmd"]], encoding="utf-8", errors="replace") as f:
            text = f.read()
        return JSONResponse(SessionCommandLogsResponse(output=text, stdout=text, stderr="").to_dict())
