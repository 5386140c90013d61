"""A local stand-in for Hugging Face Jobs and the sandbox server in a job, for the real SDK to talk to.

Three servers on 127.0.0.1, met by ``huggingface_hub`` (and by the provider's relay) exactly where
the real ones would be:

* the **Hub API** (``/api/whoami-v2``, ``/api/jobs/<ns>`` create and list by label,
  ``/api/jobs/<ns>/<id>`` inspect, ``.../cancel``, ``.../logs`` as server-sent events), plain HTTP:
  the SDK is pointed at it through its endpoint setting (``huggingface_hub.constants.ENDPOINT``);
* the **Jobs proxy** of every job's exposed port, HTTPS with a certificate for
  ``*.hf-jobs.test`` from a CA of this stand-in (trusted through ``SSL_CERT_FILE``), routing
  ``https://<job>--49983.hf-jobs.test`` by its Host header to that job's sandbox server: ``/health``
  (protocol 3), ``/v1/exec`` (NDJSON events), ``/v1/processes`` (start, list, kill) and
  ``/v1/proxy/<port>/...`` (a byte pipe to the server a command started, WebSocket upgrades
  included). It checks the caller's HF bearer and the job's ``X-Sandbox-Token`` (the ``SBX_TOKEN``
  secret the SDK sent) on every request;
* an **HTTP CONNECT proxy** (``HTTPS_PROXY``) that is the only way to ``*.hf-jobs.test``: names
  that cannot resolve here are reached through it, as a client behind a corporate proxy reaches
  the real ones. Any other name is refused, so nothing leaves the machine.

A job's "VM" is a private directory (its ``/tmp/`` paths are mapped there) and real child process
groups on this machine, run with this interpreter's ``bin`` first on ``PATH``. Every job has its own
port space in reality; here they share one, so a command's ``--port N`` is given a free port and
``/v1/proxy/N`` goes there. An image not in ``images`` fails like a pull error (stage ``ERROR``
with a log line); a wrong bearer is answered 401.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from openenv.testing import StandIn

__all__ = ["DOMAIN", "IMAGE", "TOKEN", "FakeHFJobs"]

DOMAIN = "hf-jobs.test"
#: The tests' HF token, and the one image the stand-in "pulls": this machine, with this
#: interpreter's env packages. (Here, not in conftest.py: test modules of several packages in one
#: pytest run cannot all import "conftest".)
TOKEN = "hf_test_0123456789abcdef"
IMAGE = "openenv/echo:test"
SERVER_PORT = 49983
USER = {"type": "user", "id": "u-0001", "name": "alice", "fullname": "Alice"}


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Box:
    """One sandbox's "VM": a private directory (its ``/tmp/`` paths are mapped there), its own
    environment, and real child process groups on this machine. A dedicated job is one box; a pool
    host holds many (``/v1/sandboxes``), each with a unix-socket proxy directory of its own."""

    def __init__(self, env: dict[str, str], *, pooled: bool) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.token = uuid.uuid4().hex  # a pooled sandbox's own capability token
        self.root = Path(tempfile.mkdtemp(prefix=f"hfbox-{self.id[:8]}-"))
        (self.root / "tmp").mkdir()
        self.pooled = pooled
        self.env = dict(env)
        if pooled:  # a pooled sandbox cannot bind TCP ports: its servers bind $SBX_PROXY_DIR/<port>.sock
            (self.root / "proxy").mkdir()
            self.env["SBX_PROXY_DIR"] = str(self.root / "proxy")
        self.procs: dict[str, dict[str, Any]] = {}
        self.ports: dict[int, int] = {}

    def stop(self) -> None:
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc["popen"].pid, signal.SIGKILL)
        for proc in self.procs.values():
            with contextlib.suppress(Exception):
                proc["popen"].wait(10)
        shutil.rmtree(self.root, ignore_errors=True)

    def start(self, fake: FakeHFJobs, payload: dict[str, Any], *, background: bool) -> subprocess.Popen[bytes]:
        cmd = payload["cmd"]
        text = cmd if isinstance(cmd, str) else " ".join(cmd)

        def port(match: re.Match[str]) -> str:  # a private port space per box (see the module docs)
            inner = int(match.group(1))
            self.ports.setdefault(inner, _free_port())
            return f"--port {self.ports[inner]}"

        if not self.pooled:
            text = re.sub(r"--port[ =](\d+)", port, text)
        text = text.replace("/tmp/", f"{self.root}/tmp/")
        argv = ["/bin/sh", "-c", text] if isinstance(cmd, str) or payload.get("shell") else \
            [a.replace("/tmp/", f"{self.root}/tmp/") for a in cmd]
        extra = {str(k): str(v) for k, v in (payload.get("env") or {}).items()}
        env = {**os.environ, **fake.extra_env, **self.env, **extra}
        out = subprocess.DEVNULL if background else subprocess.PIPE
        return subprocess.Popen(argv, env=env, cwd=payload.get("cwd") or str(self.root), stdout=out, stderr=out,
                                stdin=subprocess.DEVNULL, start_new_session=True)


class _Job:
    def __init__(self, fake: FakeHFJobs, spec: dict[str, Any], namespace: str) -> None:
        self.id = uuid.uuid4().hex[:24]
        self.namespace = namespace
        self.spec = spec
        self.image = str(spec.get("dockerImage") or spec.get("spaceId") or "")
        self.env = {str(k): str(v) for k, v in (spec.get("environment") or {}).items()}
        self.secrets = {str(k): str(v) for k, v in (spec.get("secrets") or {}).items()}
        self.labels = dict(spec.get("labels") or {})
        self.created = _now()
        self.logs: list[str] = ["===== Job started ====="]
        self.host = self.env.get("SBX_HOST_MODE") == "1"
        self.capacity = int(self.env.get("SBX_CAPACITY", "1"))
        #: A dedicated job's one box (key ""), or a pool host's sandboxes by local id.
        self.boxes: dict[str, _Box] = {} if self.host else {"": _Box(self.env, pooled=False)}
        if self.image in fake.images:
            self.stage = "RUNNING"
        else:
            self.stage = "ERROR"
            self.logs.append(f"Error: pull access denied for {self.image}, repository does not exist")

    @property
    def url(self) -> str:
        return f"https://{self.id}--{SERVER_PORT}.{DOMAIN}"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "createdAt": self.created, "dockerImage": self.image, "owner": dict(USER),
                "command": self.spec.get("command"), "arguments": [], "environment": self.env,
                "flavor": self.spec.get("flavor"), "labels": self.labels, "initiator": dict(USER),
                "status": {"stage": self.stage, "message": None, "exposeUrls": [self.url]},
                "expose": {"ports": [SERVER_PORT]}}

    def stop(self, stage: str = "CANCELED") -> None:
        if self.stage == "RUNNING":
            self.stage = stage
        for box in self.boxes.values():
            box.stop()


class FakeHFJobs:
    """``with FakeHFJobs(token, images={...}) as fake:`` — ``fake.endpoint``, ``fake.https_proxy``,
    ``fake.cafile``; ``fake.jobs`` by id."""

    def __init__(self, token: str, *, images: set[str], extra_env: dict[str, str] | None = None) -> None:
        self.token = token
        self.images = set(images)
        self.extra_env = dict(extra_env or {})
        self.jobs: dict[str, _Job] = {}
        self._dir = tempfile.mkdtemp(prefix="hf-jobs-fake-")
        self.cafile = ""
        self.endpoint = ""
        self.https_proxy = ""
        self._api = StandIn(self._app(), "Hugging Face Hub API")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hf-jobs-fake", daemon=True)
        self._servers: list[asyncio.Server] = []
        self._tls_port = 0

    # -- lifecycle --------------------------------------------------------------------------------

    def __enter__(self) -> FakeHFJobs:
        self.cafile, key = self._certificate()
        self.endpoint = self._api.start()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cafile, key)
        self._thread.start()

        async def serve() -> tuple[int, int]:
            tls = await asyncio.start_server(self._sandbox_conn, "127.0.0.1", 0, ssl=context)
            connect = await asyncio.start_server(self._connect_conn, "127.0.0.1", 0)
            self._servers += [tls, connect]
            return tls.sockets[0].getsockname()[1], connect.sockets[0].getsockname()[1]

        self._tls_port, proxy_port = asyncio.run_coroutine_threadsafe(serve(), self._loop).result(10)
        self.https_proxy = f"http://127.0.0.1:{proxy_port}"
        return self

    def __exit__(self, *exc: object) -> None:
        for job in list(self.jobs.values()):
            job.stop()

        async def close() -> None:
            for server in self._servers:
                server.close()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._api.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def running(self) -> list[_Job]:
        return [j for j in self.jobs.values() if j.stage == "RUNNING"]

    def pids(self) -> list[int]:
        """Live processes started in any job (for leak checks)."""
        return [p["popen"].pid for j in self.jobs.values() for b in j.boxes.values() for p in b.procs.values()
                if p["popen"].poll() is None]

    def _certificate(self) -> tuple[str, str]:
        cert, key = f"{self._dir}/cert.pem", f"{self._dir}/key.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", f"/CN=*.{DOMAIN}", "-addext", f"subjectAltName=DNS:*.{DOMAIN}",
                        "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=60)
        return cert, key

    # -- the Hub API ------------------------------------------------------------------------------

    def _authorized(self, request: Request) -> bool:
        return request.headers.get("authorization", "") == f"Bearer {self.token}"

    def _app(self) -> Starlette:
        def refused() -> JSONResponse:
            return JSONResponse({"error": "Invalid credentials in Authorization header"}, 401)

        async def whoami(request: Request) -> Response:
            return JSONResponse(USER) if self._authorized(request) else refused()

        async def jobs(request: Request) -> Response:
            if not self._authorized(request):
                return refused()
            ns = request.path_params["ns"]
            if request.method == "POST":
                job = _Job(self, await request.json(), ns)
                self.jobs[job.id] = job
                return JSONResponse(job.to_json())
            wanted = [tuple(v.split("=", 1)) for v in request.query_params.getlist("label")]
            stages = request.query_params.getlist("stage")
            found = [j.to_json() for j in self.jobs.values()
                     if all(j.labels.get(k) == v for k, v in wanted) and (not stages or j.stage in stages)]
            return JSONResponse(found)

        async def job(request: Request) -> Response:
            if not self._authorized(request):
                return refused()
            found = self.jobs.get(request.path_params["id"])
            return JSONResponse(found.to_json()) if found else JSONResponse({"error": "Job not found"}, 404)

        async def cancel(request: Request) -> Response:
            if not self._authorized(request):
                return refused()
            found = self.jobs.get(request.path_params["id"])
            if found is None:
                return JSONResponse({"error": "Job not found"}, 404)
            found.stop()
            return JSONResponse(found.to_json())

        async def logs(request: Request) -> Response:
            if not self._authorized(request):
                return refused()
            found = self.jobs.get(request.path_params["id"])
            if found is None:
                return JSONResponse({"error": "Job not found"}, 404)
            body = "".join(f"data: {json.dumps({'data': line, 'timestamp': found.created})}\n\n"
                           for line in found.logs)
            return StreamingResponse(iter([body]), media_type="text/event-stream")

        return Starlette(routes=[
            Route("/api/whoami-v2", whoami),
            Route("/api/jobs/{ns}", jobs, methods=["GET", "POST"]),
            Route("/api/jobs/{ns}/{id}", job),
            Route("/api/jobs/{ns}/{id}/cancel", cancel, methods=["POST"]),
            Route("/api/jobs/{ns}/{id}/logs", logs),
        ])

    # -- the CONNECT proxy ------------------------------------------------------------------------

    async def _connect_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
            host, _, port = target.rpartition(":")
            if method != "CONNECT" or not host.endswith("." + DOMAIN) or port != "443":
                writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                return
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._tls_port)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await _splice(reader, writer, up_reader, up_writer)
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            writer.close()

    # -- the sandbox server behind the Jobs proxy -------------------------------------------------

    async def _sandbox_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
            body = b""
            if int(headers.get("content-length") or 0):
                body = await reader.readexactly(int(headers["content-length"]))
            job_id = headers.get("host", "").split("--", 1)[0]
            job = self.jobs.get(job_id)
            if job is None or job.stage != "RUNNING":
                return await _reply(writer, 502, {"error": "no such running job"})
            if headers.get("authorization") != f"Bearer {self.token}":
                return await _reply(writer, 401, {"error": "invalid HF token"})
            path = target.split("?", 1)[0]
            given = headers.get("x-sandbox-token")
            pooled = re.fullmatch(r"/v1/sandboxes/([^/]+)(/.*)?", path) if job.host else None
            own = pooled is not None and given == getattr(job.boxes.get(pooled.group(1)), "token", None)
            if pooled and method == "DELETE" and pooled.group(2) is None and own:
                return await self._host_call(job, method, path, pooled, body, writer)  # a sandbox ends itself
            if pooled and pooled.group(2) not in (None, "/token"):
                box = job.boxes.get(pooled.group(1))
                if box is None:
                    return await _reply(writer, 404, {"error": "no such sandbox"})
                if given != box.token:  # a pooled sandbox's operations take its own token
                    return await _reply(writer, 403, {"error": "invalid sandbox token"})
                rest = pooled.group(2)
            elif given != job.secrets.get("SBX_TOKEN"):
                return await _reply(writer, 403, {"error": "invalid sandbox token"})
            else:
                box, rest = job.boxes.get(""), path[len("/v1"):] if path.startswith("/v1/") else path
            if job.host and box is None:
                return await self._host_call(job, method, path, pooled, body, writer)
            assert box is not None
            proxied = re.fullmatch(r"/proxy/(\d+)(/.*)?", rest)
            if proxied:
                port = int(proxied.group(1))
                suffix = target[target.index(f"/proxy/{port}") + len(f"/proxy/{port}"):] or "/"
                return await self._proxy(box, port, suffix, lines, body, reader, writer)
            await self._box_call(box, method, rest, body, writer)
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            writer.close()

    async def _host_call(self, job: _Job, method: str, path: str, pooled: re.Match[str] | None, body: bytes,
                         writer: asyncio.StreamWriter) -> None:
        """A pool host's management routes (its host token): create, list, delete sandboxes."""
        if path == "/health":
            return await _reply(writer, 200, {"status": "ok", "protocol": 3, "version": "0.7.0"})
        if path == "/v1/sandboxes" and method == "POST":
            doc = json.loads(body or b"{}")
            if len(job.boxes) >= job.capacity:
                return await _reply(writer, 200, {"sandboxes": [], "rejected": 1})
            box = _Box({**job.env, **{str(k): str(v) for k, v in (doc.get("env") or {}).items()}}, pooled=True)
            job.boxes[box.id] = box
            return await _reply(writer, 200, {"sandboxes": [{"id": box.id, "token": box.token}], "rejected": 0})
        if path == "/v1/sandboxes" and method == "GET":
            return await _reply(writer, 200, [{"id": k} for k in job.boxes])
        if pooled is not None and pooled.group(2) == "/token":
            found = job.boxes.get(pooled.group(1))
            return await _reply(writer, 200 if found else 404, {"token": found.token} if found else {})
        if pooled is not None and method == "DELETE":
            found = job.boxes.pop(pooled.group(1), None)
            if found is not None:
                await asyncio.to_thread(found.stop)
            return await _reply(writer, 200 if found else 404, {"deleted": found is not None})
        await _reply(writer, 404, {"error": f"no route {method} {path}"})

    async def _box_call(self, box: _Box, method: str, rest: str, body: bytes, writer: asyncio.StreamWriter) -> None:
        if rest == "/health":
            return await _reply(writer, 200, {"status": "ok", "protocol": 3, "version": "0.7.0"})
        if rest == "/processes" and method == "POST":
            payload = json.loads(body)
            popen = await asyncio.to_thread(box.start, self, payload, background=True)
            pid_id = uuid.uuid4().hex[:10]
            box.procs[pid_id] = {"popen": popen, "cmd": payload["cmd"], "started": int(time.time() * 1000)}
            return await _reply(writer, 200, {"id": pid_id, "pid": popen.pid, "tag": None})
        if rest == "/processes" and method == "GET":
            return await _reply(writer, 200, [
                {"id": k, "pid": p["popen"].pid, "cmd": p["cmd"], "started_at_ms": p["started"],
                 "running": p["popen"].poll() is None, "exit_code": p["popen"].poll()} for k, p in box.procs.items()])
        if rest.startswith("/processes/") and method == "DELETE":
            proc = box.procs.get(rest.rsplit("/", 1)[1])
            alive = proc is not None and proc["popen"].poll() is None
            if alive:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc["popen"].pid, signal.SIGKILL)  # type: ignore[index]
            return await _reply(writer, 200, {"killed": alive})
        if rest == "/exec" and method == "POST":
            payload = json.loads(body)
            started = time.monotonic()
            popen = await asyncio.to_thread(box.start, self, payload, background=False)
            try:
                out, err = await asyncio.to_thread(popen.communicate, None, payload.get("timeout") or 60)
                timed_out = False
            except subprocess.TimeoutExpired:
                os.killpg(popen.pid, signal.SIGKILL)
                out, err = await asyncio.to_thread(popen.communicate)
                timed_out = True
            events = [{"event": "stdout", "data": out.decode(errors="replace")},
                      {"event": "stderr", "data": err.decode(errors="replace")},
                      {"event": "exit", "exit_code": popen.returncode, "timed_out": timed_out,
                       "duration_ms": int((time.monotonic() - started) * 1000)}]
            data = "".join(json.dumps(e) + "\n" for e in events).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\n"
                         b"Connection: close\r\n\r\n%s" % (len(data), data))
            return await writer.drain()
        await _reply(writer, 404, {"error": f"no route {method} {rest}"})

    async def _proxy(self, box: _Box, port: int, path: str, lines: list[str], body: bytes,
                     reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A byte pipe to what listens on ``port`` in the box: its TCP port (dedicated) or
        ``$SBX_PROXY_DIR/<port>.sock`` (pooled)."""
        try:
            if box.pooled:
                up_reader, up_writer = await asyncio.open_unix_connection(f"{box.root}/proxy/{port}.sock")
            else:
                local = box.ports.get(port)
                if local is None:
                    raise OSError("no port")
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", local)
        except OSError:
            return await _reply(writer, 502, {"error": f"nothing listens on port {port} in the sandbox"})
        method, _, version = lines[0].split(" ", 2)
        # The proxy's own credentials stay here; the rest of the request goes through unchanged.
        kept = [ln for ln in lines[1:] if ln and ln.split(":", 1)[0].strip().lower()
                not in ("authorization", "x-sandbox-token")]
        up_writer.write("\r\n".join([f"{method} {path} {version}", *kept, "", ""]).encode("latin-1") + body)
        await up_writer.drain()
        await _splice(reader, writer, up_reader, up_writer)


async def _reply(writer: asyncio.StreamWriter, status: int, doc: Any) -> None:
    data = json.dumps(doc).encode()
    writer.write(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                 % (status, len(data), data))
    await writer.drain()


async def _splice(a_reader: asyncio.StreamReader, a_writer: asyncio.StreamWriter,
                  b_reader: asyncio.StreamReader, b_writer: asyncio.StreamWriter) -> None:
    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()

    tasks = [asyncio.create_task(pipe(a_reader, b_writer)), asyncio.create_task(pipe(b_reader, a_writer))]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        b_writer.close()
