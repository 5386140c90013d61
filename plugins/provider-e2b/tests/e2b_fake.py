"""A local stand-in for the E2B API and a sandbox's envd, on 127.0.0.1, for the real SDK to talk to.

The API replies are built with the SDK's own models (``e2b.api.client.models``) and serialised with
their ``to_dict()``; envd's process service is the SDK's own generated Connect server
(``ProcessASGIApplication``) with this module's implementation behind it, so the real SDK parses
what it would parse from E2B. The SDK is pointed here with ``E2B_API_URL`` and ``E2B_SANDBOX_URL``
(one envd for every sandbox: the SDK names the sandbox in its ``E2b-Sandbox-Id`` header).

A "sandbox" is a record plus, once a command is started through envd, a real child process group
on this machine. Its ``/tmp`` is a private directory: ``/tmp/`` paths in a command and in file
reads are mapped there. Commands run as ``bash -c`` rather than envd's ``bash -l -c``, because this
host's login profile would reset ``PATH`` (a real template's profile is the template's business).

Faults on demand: a wrong API key is answered 401; the first ``rate_limit_creates`` creates 429;
``refuse_creates`` answers every create 400 with a message (a template E2B cannot start).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from e2b.api.client.models import ListedSandbox, Sandbox, SandboxDetail, SandboxState
from e2b.envd.process import process_pb
from e2b.envd.process.process_connect import Process, ProcessASGIApplication
from protobuf import Oneof
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openenv.testing import StandIn

__all__ = ["FakeE2B"]

ENVD_VERSION = "0.5.7"


class _Process(Process):
    """envd's process service for the fake's sandboxes: Start and List (the provider's calls); the
    generated base answers the rest ``UNIMPLEMENTED``."""

    def __init__(self, fake: FakeE2B) -> None:
        self.fake = fake

    def _record(self, ctx: Any) -> dict[str, Any]:
        from connectrpc.code import Code
        from connectrpc.errors import ConnectError

        sid = ctx.request_headers.get("e2b-sandbox-id", "")
        record = self.fake.sandboxes.get(sid)
        if record is None:
            raise ConnectError(Code.NOT_FOUND, f"sandbox {sid!r} not found")
        return record

    async def start(self, request: Any, ctx: Any) -> AsyncIterator[Any]:
        record = self._record(ctx)
        config = request.process
        args = [a for a in config.args if a != "-l"]
        args = [a.replace("/tmp/", f"{record['root']}/tmp/") for a in args]
        env = {**os.environ, **self.fake.extra_env, **record["env"], **dict(config.envs)}
        proc = await asyncio.to_thread(subprocess.Popen, [config.cmd, *args], env=env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True)
        record["procs"][proc.pid] = (proc, config)
        record["commands"].append(args[-1] if args else config.cmd)
        yield process_pb.StartResponse(event=process_pb.ProcessEvent(
            event=Oneof("start", process_pb.ProcessEvent.StartEvent(pid=proc.pid))))
        # Hold the stream while the process runs (as envd does); bounded by the fake's life.
        while proc.poll() is None and not self.fake.closing:
            await asyncio.sleep(0.2)
        if proc.poll() is not None:
            yield process_pb.StartResponse(event=process_pb.ProcessEvent(event=Oneof(
                "end", process_pb.ProcessEvent.EndEvent(exit_code=proc.returncode, exited=True))))

    async def list(self, request: Any, ctx: Any) -> Any:
        record = self._record(ctx)
        return process_pb.ListResponse(processes=[
            process_pb.ProcessInfo(pid=pid, config=config)
            for pid, (proc, config) in record["procs"].items() if proc.poll() is None])


class FakeE2B:
    """The fake: ``with FakeE2B(api_key) as fake:`` then point ``E2B_API_URL`` / ``E2B_SANDBOX_URL``
    at ``fake.url``."""

    def __init__(self, api_key: str, *, extra_env: dict[str, str] | None = None) -> None:
        self.api_key = api_key
        self.extra_env = extra_env or {}
        self.rate_limit_creates = 0
        self.refuse_creates = ""
        self.create_attempts = 0
        self.sandboxes: dict[str, dict[str, Any]] = {}
        self.killed: list[str] = []
        self.closing = False
        self._lock = threading.Lock()
        self.url = ""
        rest = Starlette(routes=[
            Route("/v2/sandboxes", self.create, methods=["POST"]),
            Route("/v2/sandboxes", self.list, methods=["GET"]),
            Route("/sandboxes/{sid}", self.get, methods=["GET"]),
            Route("/sandboxes/{sid}", self.delete, methods=["DELETE"]),
            Route("/files", self.read_file, methods=["GET"]),
            Route("/health", lambda request: Response(status_code=204), methods=["GET"]),
        ])
        envd = ProcessASGIApplication(_Process(self))

        async def app(scope: Any, receive: Any, send: Any) -> None:
            target = envd if scope.get("path", "").startswith("/process.Process/") else rest
            await target(scope, receive, send)

        self.app = app

    # -- lifecycle --------------------------------------------------------------------------------

    def __enter__(self) -> FakeE2B:
        self._stand_in = StandIn(self.app, "fake e2b")
        self.url = self._stand_in.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing = True
        for record in list(self.sandboxes.values()):
            self._kill(record)
        self._stand_in.stop()

    # -- helpers ----------------------------------------------------------------------------------

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("x-api-key") == self.api_key

    @staticmethod
    def _error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"code": status, "message": message}, status_code=status)

    def _times(self, record: dict[str, Any]) -> dict[str, Any]:
        return dict(template_id=record["template"], sandbox_id=record["id"], client_id="client-test",
                    started_at=record["started"], end_at=record["started"] + datetime.timedelta(
                        seconds=record["timeout"]), cpu_count=2, memory_mb=512, disk_size_mb=1024,
                    state=SandboxState.RUNNING, envd_version=ENVD_VERSION, metadata=record["metadata"])

    @staticmethod
    def _kill(record: dict[str, Any]) -> None:
        for proc, _config in record["procs"].values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(10)
        shutil.rmtree(record["root"], ignore_errors=True)

    def kill_server(self, sandbox_id: str) -> None:
        """Kill the processes of a sandbox behind the provider's back."""
        for proc, _config in self.sandboxes[sandbox_id]["procs"].values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

    # -- API --------------------------------------------------------------------------------------

    async def create(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(401, "Invalid API key")
        self.create_attempts += 1
        if self.create_attempts <= self.rate_limit_creates:
            return self._error(429, "Rate limit exceeded: too many sandboxes")
        body = await request.json()
        if self.refuse_creates:
            return self._error(400, self.refuse_creates)
        sid = "i" + uuid.uuid4().hex[:19]
        root = tempfile.mkdtemp(prefix=f"fake-e2b-{sid}-")
        os.mkdir(os.path.join(root, "tmp"))
        record = {"id": sid, "template": body["templateID"], "metadata": body.get("metadata") or {},
                  "env": body.get("envVars") or {}, "timeout": int(body.get("timeout", 300)),
                  "started": datetime.datetime.now(datetime.UTC), "procs": {}, "commands": [],
                  "root": root, "body": body}
        with self._lock:
            self.sandboxes[sid] = record
        return JSONResponse(Sandbox(template_id=record["template"], sandbox_id=sid, client_id="client-test",
                                    envd_version=ENVD_VERSION, domain="e2b.test").to_dict(), status_code=201)

    async def get(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(401, "Invalid API key")
        record = self.sandboxes.get(request.path_params["sid"])
        if record is None:
            return self._error(404, f"sandbox {request.path_params['sid']} not found")
        return JSONResponse(SandboxDetail(**self._times(record)).to_dict())

    async def list(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(401, "Invalid API key")
        from urllib.parse import parse_qsl

        wanted = dict(parse_qsl(request.query_params.get("metadata") or ""))
        items = [ListedSandbox(**self._times(r)).to_dict() for r in list(self.sandboxes.values())
                 if all(r["metadata"].get(k) == v for k, v in wanted.items())]
        return JSONResponse(items)

    async def delete(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._error(401, "Invalid API key")
        with self._lock:
            record = self.sandboxes.pop(request.path_params["sid"], None)
        if record is None:
            return self._error(404, f"sandbox {request.path_params['sid']} not found")
        await asyncio.to_thread(self._kill, record)
        self.killed.append(record["id"])
        return Response(status_code=204)

    # -- envd HTTP ----------------------------------------------------------------------------------

    async def read_file(self, request: Request) -> Response:
        record = self.sandboxes.get(request.headers.get("e2b-sandbox-id", ""))
        path = request.query_params.get("path", "")
        if record is None or not path.startswith("/tmp/"):
            return self._error(404, f"path {path!r} not found")
        try:
            data = await asyncio.to_thread(Path(record["root"], path.lstrip("/")).read_bytes)
        except OSError:
            return self._error(404, f"path {path!r} not found")
        return Response(data, media_type="application/octet-stream")
