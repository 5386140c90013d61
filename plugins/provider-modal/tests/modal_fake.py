"""A local stand-in for Modal's control plane, on 127.0.0.1, for the real ``modal`` SDK to talk to.

It is a grpclib server (the SDK's client speaks grpclib over plain HTTP/2 to an ``http://``
``MODAL_SERVER_URL``) serving the generated ``modal_proto.api_grpc.ModalClientBase`` service with
the SDK's own ``modal_proto.api_pb2`` messages. It implements only the RPCs the provider's flow
makes; every other RPC answers ``UNIMPLEMENTED`` naming itself, so an SDK that starts calling
something new fails loudly instead of being faked by accident.

What is real and what is faked:

* Every request must carry the token pair (``x-modal-token-id`` / ``x-modal-token-secret``) the
  fake was made with, else ``UNAUTHENTICATED``; the V2 sandbox RPCs also need the short-lived JWT
  that ``AuthTokenGet`` issued (``x-modal-auth-token``), as Modal's do.
* Apps are created on ``AppGetOrCreate``; an image definition is "built" once: the first
  ``ImageGetOrCreate`` of a definition answers unbuilt, and ``ImageJoinStreaming`` streams a build
  log line and success (later ones hit the cache). Nothing is pulled: a sandbox runs on this
  machine, in the test's virtual environment (``extra_env`` puts its ``bin`` on ``PATH``).
* ``SandboxCreateV2`` starts the request's entrypoint as a real child process group with the
  environment of the request's inline secret sources. Each encrypted port gets a TLS-terminating
  relay on 127.0.0.1 with the test's self-signed certificate (as Modal's edge terminates TLS and
  forwards plain TCP to the container's port), so ``Tunnel.url`` is ``https://127.0.0.1:<relay>``.
* A sandbox is finished when its process exits (exit code), when terminated, or when its
  ``timeout_secs`` passes; ``SandboxListV2`` lists unfinished ones by app and tags, newest first,
  paged by ``before_timestamp`` as the SDK pages; ``AppFetchLogs`` serves the process's combined
  output as stdout entries.

Faults on demand: ``exhaust_creates`` first creates answer ``RESOURCE_EXHAUSTED``; a client with
other credentials is refused; ``kill_server`` kills a sandbox's process behind the provider's back.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import empty_pb2
from grpclib import GRPCError, Status
from grpclib.server import Server, Stream
from modal_proto import api_pb2
from modal_proto.api_grpc import ModalClientBase

__all__ = ["FakeModal", "SandboxRecord"]

_RESULT = api_pb2.GenericResult
#: What the fake reports as the environment's image builder version (one the SDK supports).
BUILDER_VERSION = "2025.06"


@dataclass
class SandboxRecord:
    """One sandbox: its request, its process, its relays, and how it ended."""

    id: str
    app_id: str
    task_id: str
    definition: api_pb2.Sandbox
    tags: dict[str, str]
    env: dict[str, str]
    log: Path
    created_at: float = field(default_factory=time.time)
    proc: subprocess.Popen[bytes] | None = None
    relays: dict[int, asyncio.Server] = field(default_factory=dict)
    tunnels: dict[int, int] = field(default_factory=dict)  # container port -> relay port
    result: api_pb2.GenericResult | None = None

    def finished(self) -> api_pb2.GenericResult | None:
        """How the sandbox ended, or ``None`` while it runs (its lifetime is enforced here)."""
        if self.result is None and self.proc is not None and self.proc.poll() is not None:
            code = self.proc.returncode
            self.result = _RESULT(status=_RESULT.GENERIC_STATUS_SUCCESS if code == 0 else
                                  _RESULT.GENERIC_STATUS_FAILURE, exitcode=code)
        if self.result is None and time.time() - self.created_at > self.definition.timeout_secs:
            self.kill_process()
            self.result = _RESULT(status=_RESULT.GENERIC_STATUS_TIMEOUT, exception="Sandbox timed out")
        return self.result

    def kill_process(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def close_relays(self) -> None:
        """Stop the port relays (on the fake's event loop, which owns them)."""
        for relay in self.relays.values():
            relay.close()


def _jwt(lifetime_s: float = 3600.0) -> str:
    """An unsigned JWT with an ``exp``: the SDK only decodes the payload to schedule refreshes."""
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    claims = {"exp": int(time.time() + lifetime_s), "jti": uuid.uuid4().hex}
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


class _Service(ModalClientBase):
    """The implemented RPCs (``_concrete`` fills in the rest with ``UNIMPLEMENTED``)."""

    def __init__(self, fake: FakeModal) -> None:
        self.fake = fake

    async def _request(self, name: str, stream: Stream[Any, Any], *, jwt: bool = False) -> Any:
        """Record the call, check its credentials, and read its request."""
        fake = self.fake
        md: Any = stream.metadata or {}
        fake.calls.append(name)
        if md.get("x-modal-token-id") != fake.token_id or md.get("x-modal-token-secret") != fake.token_secret:
            raise GRPCError(Status.UNAUTHENTICATED, "Token validation failed: invalid token ID or secret")
        if jwt and md.get("x-modal-auth-token") not in fake.jwts:
            raise GRPCError(Status.UNAUTHENTICATED, "Missing or invalid auth token")
        return await stream.recv_message()

    def _sandbox(self, sandbox_id: str) -> SandboxRecord:
        record = self.fake.sandboxes.get(sandbox_id)
        if record is None:
            raise GRPCError(Status.NOT_FOUND, f"Sandbox {sandbox_id} not found")
        return record

    # -- session --------------------------------------------------------------------------------

    async def ClientHello(self, stream: Stream[empty_pb2.Empty, api_pb2.ClientHelloResponse]) -> None:
        await self._request("ClientHello", stream)
        await stream.send_message(api_pb2.ClientHelloResponse(image_builder_version=BUILDER_VERSION))

    async def AuthTokenGet(self, stream: Stream[api_pb2.AuthTokenGetRequest, api_pb2.AuthTokenGetResponse]) -> None:
        await self._request("AuthTokenGet", stream)
        token = _jwt()
        self.fake.jwts.add(token)
        await stream.send_message(api_pb2.AuthTokenGetResponse(token=token))

    async def EnvironmentGetOrCreate(self, stream: Stream[api_pb2.EnvironmentGetOrCreateRequest,
                                                          api_pb2.EnvironmentGetOrCreateResponse]) -> None:
        await self._request("EnvironmentGetOrCreate", stream)
        settings = api_pb2.EnvironmentSettings(image_builder_version=BUILDER_VERSION)
        await stream.send_message(api_pb2.EnvironmentGetOrCreateResponse(
            environment_id="en-fake", metadata=api_pb2.EnvironmentMetadata(name="main", settings=settings)))

    async def AppGetOrCreate(self, stream: Stream[api_pb2.AppGetOrCreateRequest,
                                                  api_pb2.AppGetOrCreateResponse]) -> None:
        req = await self._request("AppGetOrCreate", stream)
        app_id = self.fake.apps.get(req.app_name)
        if app_id is None:
            if req.object_creation_type != api_pb2.OBJECT_CREATION_TYPE_CREATE_IF_MISSING:
                raise GRPCError(Status.NOT_FOUND, f"App '{req.app_name}' not found")
            app_id = self.fake.apps[req.app_name] = f"ap-{uuid.uuid4().hex[:22]}"
        await stream.send_message(api_pb2.AppGetOrCreateResponse(
            app_id=app_id, handle_metadata=api_pb2.AppHandleMetadata(app_id=app_id, environment_name="main")))

    # -- images ---------------------------------------------------------------------------------

    async def ImageGetOrCreate(self, stream: Stream[api_pb2.ImageGetOrCreateRequest,
                                                    api_pb2.ImageGetOrCreateResponse]) -> None:
        req = await self._request("ImageGetOrCreate", stream)
        key = req.image.SerializeToString(deterministic=True)
        image_id = self.fake.image_ids.setdefault(key, f"im-{uuid.uuid4().hex[:22]}")
        self.fake.images.setdefault(image_id, list(req.image.dockerfile_commands))
        built = image_id in self.fake.built
        result = _RESULT(status=_RESULT.GENERIC_STATUS_SUCCESS) if built else None
        await stream.send_message(api_pb2.ImageGetOrCreateResponse(image_id=image_id, result=result))

    async def ImageJoinStreaming(self, stream: Stream[api_pb2.ImageJoinStreamingRequest,
                                                      api_pb2.ImageJoinStreamingResponse]) -> None:
        req = await self._request("ImageJoinStreaming", stream)
        if req.image_id not in self.fake.images:
            raise GRPCError(Status.NOT_FOUND, f"Image {req.image_id} not found")
        for line in self.fake.images[req.image_id]:
            await stream.send_message(api_pb2.ImageJoinStreamingResponse(
                task_logs=[api_pb2.TaskLogs(data=f"(fake build) {line}\n",
                                            file_descriptor=api_pb2.FILE_DESCRIPTOR_STDOUT)], entry_id="1"))
        self.fake.built.add(req.image_id)
        await stream.send_message(api_pb2.ImageJoinStreamingResponse(
            result=_RESULT(status=_RESULT.GENERIC_STATUS_SUCCESS), eof=True, entry_id="2"))

    # -- sandboxes ------------------------------------------------------------------------------

    async def SandboxCreateV2(self, stream: Stream[api_pb2.SandboxCreateV2Request,
                                                   api_pb2.SandboxCreateV2Response]) -> None:
        req = await self._request("SandboxCreateV2", stream, jwt=True)
        fake = self.fake
        fake.create_attempts += 1
        if fake.create_attempts <= fake.exhaust_creates:
            raise GRPCError(Status.RESOURCE_EXHAUSTED, "Sandbox limit reached for this workspace (fake quota)")
        if req.app_id not in fake.apps.values():
            raise GRPCError(Status.NOT_FOUND, f"App {req.app_id} not found")
        if req.definition.image_id not in fake.built:
            raise GRPCError(Status.FAILED_PRECONDITION, f"Image {req.definition.image_id} is not built")
        env: dict[str, str] = {}
        for source in req.secret_sources:
            env.update(source.env.contents)
        sid = f"sb-{uuid.uuid4().hex}"  # not the V1 shape (22 characters): the SDK treats it as V2
        record = SandboxRecord(id=sid, app_id=req.app_id, task_id=f"ta-{uuid.uuid4().hex[:22]}",
                               definition=req.definition, tags={t.tag_name: t.tag_value for t in req.tags},
                               env=env, log=fake.workdir / f"{sid}.log")
        fake.sandboxes[sid] = record
        record.proc = await asyncio.to_thread(fake.spawn, list(req.definition.entrypoint_args), env, record.log)
        for spec in req.definition.open_ports.ports:
            if spec.unencrypted:
                raise GRPCError(Status.UNIMPLEMENTED, "the fake serves encrypted ports only")
            relay = await fake.relay(spec.port)
            record.relays[spec.port] = relay
            record.tunnels[spec.port] = relay.sockets[0].getsockname()[1]
        await stream.send_message(api_pb2.SandboxCreateV2Response(
            sandbox_id=sid, task_id=record.task_id, metadata=api_pb2.SandboxHandleMetadata(app_id=req.app_id)))

    async def SandboxGetTunnelsV2(self, stream: Stream[api_pb2.SandboxGetTunnelsRequest,
                                                       api_pb2.SandboxGetTunnelsResponse]) -> None:
        req = await self._request("SandboxGetTunnelsV2", stream, jwt=True)
        record = self._sandbox(req.sandbox_id)
        await stream.send_message(api_pb2.SandboxGetTunnelsResponse(
            result=_RESULT(status=_RESULT.GENERIC_STATUS_SUCCESS),
            tunnels=[api_pb2.TunnelData(host="127.0.0.1", port=relay, container_port=port)
                     for port, relay in record.tunnels.items()]))

    async def SandboxWaitV2(self, stream: Stream[api_pb2.SandboxWaitRequest, api_pb2.SandboxWaitResponse]) -> None:
        req = await self._request("SandboxWaitV2", stream, jwt=True)
        record = self._sandbox(req.sandbox_id)
        deadline = time.monotonic() + min(req.timeout, 60.0)  # a long poll, held at most a minute
        while record.finished() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await stream.send_message(api_pb2.SandboxWaitResponse(
            result=record.finished(), metadata=api_pb2.SandboxHandleMetadata(app_id=record.app_id)))

    async def SandboxGetTaskIdV2(self, stream: Stream[api_pb2.SandboxGetTaskIdRequest,
                                                      api_pb2.SandboxGetTaskIdResponse]) -> None:
        req = await self._request("SandboxGetTaskIdV2", stream, jwt=True)
        record = self._sandbox(req.sandbox_id)
        await stream.send_message(api_pb2.SandboxGetTaskIdResponse(task_id=record.task_id,
                                                                   task_result=record.finished()))

    async def SandboxTerminateV2(self, stream: Stream[api_pb2.SandboxTerminateRequest,
                                                      api_pb2.SandboxTerminateResponse]) -> None:
        req = await self._request("SandboxTerminateV2", stream, jwt=True)
        record = self._sandbox(req.sandbox_id)
        existing = record.finished()
        if existing is None:
            await asyncio.to_thread(record.kill_process)
            record.close_relays()
            record.result = _RESULT(status=_RESULT.GENERIC_STATUS_TERMINATED, exception="Sandbox terminated")
            self.fake.terminated.append(record.id)
        await stream.send_message(api_pb2.SandboxTerminateResponse(existing_result=existing))

    async def SandboxListV2(self, stream: Stream[api_pb2.SandboxListRequest, api_pb2.SandboxListResponse]) -> None:
        req = await self._request("SandboxListV2", stream, jwt=True)
        wanted = {t.tag_name: t.tag_value for t in req.tags}
        rows = sorted((r for r in self.fake.sandboxes.values()
                       if (not req.app_id or r.app_id == req.app_id)
                       and (req.include_finished or r.finished() is None)
                       and all(r.tags.get(k) == v for k, v in wanted.items())
                       and (not req.before_timestamp or r.created_at < req.before_timestamp)),
                      key=lambda r: r.created_at, reverse=True)
        await stream.send_message(api_pb2.SandboxListResponse(sandboxes=[api_pb2.SandboxInfo(
            id=r.id, created_at=r.created_at, app_id=r.app_id,
            tags=[api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in r.tags.items()],
            task_info=api_pb2.TaskInfo(id=r.task_id, sandbox_id=r.id, result=r.finished()),
            metadata=api_pb2.SandboxHandleMetadata(app_id=r.app_id)) for r in rows[:self.fake.page_size]]))

    async def SandboxTagsGetV2(self, stream: Stream[api_pb2.SandboxTagsGetRequest,
                                                    api_pb2.SandboxTagsGetResponse]) -> None:
        req = await self._request("SandboxTagsGetV2", stream, jwt=True)
        record = self._sandbox(req.sandbox_id)
        await stream.send_message(api_pb2.SandboxTagsGetResponse(
            tags=[api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in record.tags.items()]))

    async def AppFetchLogs(self, stream: Stream[api_pb2.AppFetchLogsRequest, api_pb2.AppFetchLogsResponse]) -> None:
        req = await self._request("AppFetchLogs", stream)
        batches = []
        for record in self.fake.sandboxes.values():
            if record.app_id != req.app_id or (req.task_id and record.task_id != req.task_id):
                continue
            text = record.log.read_text(encoding="utf-8", errors="replace") if record.log.exists() else ""
            lines = text.splitlines(keepends=True)[-req.limit:] if req.limit else []
            stamp = record.log.stat().st_mtime if record.log.exists() else time.time()
            batches.append(api_pb2.TaskLogsBatch(task_id=record.task_id, sandbox_id=record.id, items=[
                api_pb2.TaskLogs(data=line, file_descriptor=api_pb2.FILE_DESCRIPTOR_STDOUT, timestamp=stamp)
                for line in lines]))
        await stream.send_message(api_pb2.AppFetchLogsResponse(batches=batches))


def _unimplemented(name: str) -> Callable[[Any, Stream[Any, Any]], Coroutine[Any, Any, None]]:
    async def handler(self: Any, stream: Stream[Any, Any]) -> None:
        raise GRPCError(Status.UNIMPLEMENTED, f"the Modal fake does not implement {name}")
    return handler


def _concrete() -> type[_Service]:
    """``_Service`` with every abstract RPC it does not implement answering ``UNIMPLEMENTED``."""
    missing = {name: _unimplemented(name) for name in _Service.__abstractmethods__}
    return type("FakeModalService", (_Service,), missing)


class FakeModal:
    """``with FakeModal(token_id, token_secret, cert=..., key=...) as fake:`` then set
    ``MODAL_SERVER_URL=fake.url``."""

    def __init__(self, token_id: str, token_secret: str, *, cert: str, key: str, workdir: Path,
                 extra_env: dict[str, str] | None = None) -> None:
        self.token_id, self.token_secret = token_id, token_secret
        self.workdir = workdir
        self.extra_env = extra_env or {}
        self.exhaust_creates = 0
        self.create_attempts = 0
        self.page_size = 100
        self.calls: list[str] = []
        self.jwts: set[str] = set()
        self.apps: dict[str, str] = {}
        self.image_ids: dict[bytes, str] = {}
        self.images: dict[str, list[str]] = {}
        self.built: set[str] = set()
        self.sandboxes: dict[str, SandboxRecord] = {}
        self.terminated: list[str] = []
        self.url = ""
        self._tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._tls.load_cert_chain(cert, key)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    def running(self) -> dict[str, SandboxRecord]:
        """The sandboxes that have not finished."""
        return {sid: r for sid, r in list(self.sandboxes.items()) if r.finished() is None}

    def kill_server(self, sandbox_id: str) -> None:
        """Kill a sandbox's process behind the provider's back (the sandbox then ends, as on Modal)."""
        record = self.sandboxes[sandbox_id]
        assert record.proc is not None
        os.killpg(record.proc.pid, signal.SIGKILL)
        record.proc.wait(10)

    def spawn(self, argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as out:
            return subprocess.Popen(argv, env={**os.environ, **self.extra_env, **env}, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    async def relay(self, port: int) -> asyncio.Server:
        """A TLS listener on 127.0.0.1 that forwards each connection, decrypted, to ``port``."""
        async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, ssl.SSLError, ConnectionError):
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            with contextlib.suppress(OSError, ssl.SSLError, ConnectionError, RuntimeError):
                writer.close()

        async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
            try:
                server_r, server_w = await asyncio.open_connection("127.0.0.1", port)
            except OSError:  # nothing listens in the sandbox yet: the edge drops the connection
                client_w.close()
                return
            await asyncio.gather(pipe(client_r, server_w), pipe(server_r, client_w))

        return await asyncio.start_server(handle, "127.0.0.1", 0, ssl=self._tls)

    # -- lifecycle ------------------------------------------------------------------------------

    def __enter__(self) -> FakeModal:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        started = threading.Event()

        async def main() -> None:
            self._stopped = asyncio.Event()
            server = Server([_concrete()(self)])
            await server.start(sock=sock)
            started.set()
            await self._stopped.wait()
            server.close()
            await server.wait_closed()

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(main(),), daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("the Modal fake did not start within 10 s")
        return self

    def __exit__(self, *exc: object) -> None:
        for record in list(self.sandboxes.values()):
            record.kill_process()
            if self._loop is not None:
                self._loop.call_soon_threadsafe(record.close_relays)
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        if self._thread is not None:
            self._thread.join(10)
