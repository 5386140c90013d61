"""A local stand-in for the Novita Agent Sandbox API and a sandbox's envd, on 127.0.0.1, for the
real ``novita-sandbox`` SDK to talk to.

The API replies are built with the SDK's own models (``novita_sandbox.core.api.client.models``) and
serialised with their ``to_dict()``. envd's process service speaks the Connect protocol the SDK's
client speaks (JSON codec: ``application/connect+json`` server streams of 5-byte-framed messages
ending in an end-of-stream frame; unary ``application/json``), with messages in protobuf's JSON
mapping of the SDK's own ``process_pb2``. The SDK is pointed here with ``NOVITA_API_URL`` and
``NOVITA_SANDBOX_URL`` (one envd for every sandbox: the SDK names the sandbox in its
``Novita-Sandbox-Id`` header).

A "sandbox" is a record plus, once a command is started through envd, a real child process group
on this machine. Its ``/tmp`` is a private directory: ``/tmp/`` paths in a command and in file
reads are mapped there. Commands run as ``bash -c`` rather than envd's ``bash -l -c``, because this
host's login profile would reset ``PATH`` (a real template's profile is the template's business).

Faults on demand: a wrong API key is answered 401; the first ``rate_limit_creates`` creates 429;
``refuse_creates`` answers every create 400 with a message (a template Novita cannot start).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from novita_sandbox.core.api.client.models import ListedSandbox, Sandbox, SandboxDetail, SandboxState
from novita_sandbox.core.envd.process import process_pb2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from openenv.testing import StandIn

__all__ = ["FakeNovita"]

ENVD_VERSION = "0.5.7"
_END_STREAM = 0b10


def _frame(flags: int, data: bytes) -> bytes:
    """One Connect envelope: a flags byte, the big-endian length, the message."""
    return struct.pack(">BI", flags, len(data)) + data


def _message(msg: Any) -> bytes:
    return json_format.MessageToJson(msg).encode()


class FakeNovita:
    """The fake: ``with FakeNovita(api_key) as fake:`` then point ``NOVITA_API_URL`` /
    ``NOVITA_SANDBOX_URL`` at ``fake.url``."""

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
        self.app = Starlette(routes=[
            Route("/sandboxes", self.create, methods=["POST"]),
            Route("/v2/sandboxes", self.list, methods=["GET"]),
            Route("/sandboxes/{sid}", self.get, methods=["GET"]),
            Route("/sandboxes/{sid}", self.delete, methods=["DELETE"]),
            Route("/files", self.read_file, methods=["GET"]),
            Route("/health", lambda request: Response(status_code=204), methods=["GET"]),
            Route("/process.Process/Start", self.start, methods=["POST"]),
            Route("/process.Process/List", self.list_processes, methods=["POST"]),
        ])

    # -- lifecycle --------------------------------------------------------------------------------

    def __enter__(self) -> FakeNovita:
        self._stand_in = StandIn(self.app, "fake novita")
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
        root = tempfile.mkdtemp(prefix=f"fake-novita-{sid}-")
        os.mkdir(os.path.join(root, "tmp"))
        record = {"id": sid, "template": body["templateID"], "metadata": body.get("metadata") or {},
                  "env": body.get("envVars") or {}, "timeout": int(body.get("timeout", 300)),
                  "started": datetime.datetime.now(datetime.UTC), "procs": {}, "commands": [],
                  "root": root, "body": body}
        with self._lock:
            self.sandboxes[sid] = record
        return JSONResponse(Sandbox(template_id=record["template"], sandbox_id=sid, client_id="client-test",
                                    envd_version=ENVD_VERSION, domain="novita.test").to_dict(), status_code=201)

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
        record = self.sandboxes.get(request.headers.get("novita-sandbox-id", ""))
        path = request.query_params.get("path", "")
        if record is None or not path.startswith("/tmp/"):
            return self._error(404, f"path {path!r} not found")
        try:
            data = await asyncio.to_thread(Path(record["root"], path.lstrip("/")).read_bytes)
        except OSError:
            return self._error(404, f"path {path!r} not found")
        return Response(data, media_type="application/octet-stream")

    # -- envd process service (Connect, JSON codec) --------------------------------------------------

    async def start(self, request: Request) -> Response:
        record = self.sandboxes.get(request.headers.get("novita-sandbox-id", ""))
        raw = await request.body()
        if record is None:
            return JSONResponse({"code": "not_found", "message": "sandbox not found"}, status_code=404)
        _flags, length = struct.unpack(">BI", raw[:5])
        start = json_format.Parse(raw[5:5 + length], process_pb2.StartRequest())
        config = start.process
        args = [a.replace("/tmp/", f"{record['root']}/tmp/") for a in config.args if a != "-l"]
        env = {**os.environ, **self.extra_env, **record["env"], **dict(config.envs)}
        proc = await asyncio.to_thread(subprocess.Popen, [config.cmd, *args], env=env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True)
        record["procs"][proc.pid] = (proc, config)
        record["commands"].append(args[-1] if args else config.cmd)
        return StreamingResponse(self._events(proc), media_type="application/connect+json")

    async def _events(self, proc: subprocess.Popen[bytes]) -> AsyncIterator[bytes]:
        event = process_pb2.StartResponse()
        event.event.start.pid = proc.pid
        yield _frame(0, _message(event))
        # Hold the stream while the process runs (as envd does); bounded by the fake's life.
        while proc.poll() is None and not self.closing:
            await asyncio.sleep(0.2)
        if proc.poll() is not None:
            end = process_pb2.StartResponse()
            end.event.end.exit_code = proc.returncode
            end.event.end.exited = True
            end.event.end.status = f"exit status {proc.returncode}"
            yield _frame(0, _message(end))
        yield _frame(_END_STREAM, b"{}")

    async def list_processes(self, request: Request) -> Response:
        record = self.sandboxes.get(request.headers.get("novita-sandbox-id", ""))
        if record is None:
            return JSONResponse({"code": "not_found", "message": "sandbox not found"}, status_code=404)
        listed = process_pb2.ListResponse()
        for pid, (proc, config) in record["procs"].items():
            if proc.poll() is None:
                info = listed.processes.add()
                info.pid = pid
                info.config.CopyFrom(config)
        return Response(_message(listed), media_type="application/json")
