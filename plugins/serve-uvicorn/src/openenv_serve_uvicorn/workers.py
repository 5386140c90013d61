"""``openenv serve ENV --workers N``: N worker server processes behind one public port.

Each worker is the ordinary single-process server (``openenv serve ... --uds <dir>/w<i>.sock``,
started with the same options, its share of ``--max-sessions``, and die-with-parent). The front
(this module, one asyncio process) owns the public socket and routes each request; it parses HTTP
with ``h11`` and never runs env code, so auth, validation and the session rules stay the workers'
(docs/workers.md):

* a WebSocket upgrade (``/ws``, ``/mcp``) goes to the least loaded worker (or to the worker of
  ``?session_id=``) and is then spliced byte for byte: one TCP connection, one worker;
* an HTTP request naming a session (``OpenEnv-Session-Id`` / ``Mcp-Session-Id`` header,
  ``/sessions/{id}...``) goes to the worker that created it: the front learns the id from the
  reply's session header;
* anything else goes to the least loaded worker, except ``GET /capabilities`` and ``GET /metrics``,
  which every worker answers (each enforcing auth) and the front merges (per worker and in total).

A worker that dies: its WebSocket connections are closed with 1011 and a reason naming the lost
session, requests for its HTTP sessions get the worker's own unknown-session 404 shape, and it is
restarted (at most ``MAX_RESTARTS`` times a minute). SIGTERM/SIGINT stop the front and every worker.
The worker processes themselves are ``openenv_serve_uvicorn.worker_procs``'s; this module routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import h11

from openenv_serve_uvicorn.front_http import (
    drain,
    fetch,
    hop,
    is_upgrade,
    merge_metrics,
    next_cycle,
    next_event,
    reply,
    splice,
)
from openenv_serve_uvicorn.worker_procs import NoWorker, Supervisor, Worker, split_capacity

__all__ = ["Front", "serve_workers"]

log = logging.getLogger("openenv.server")

#: Session ids the front remembers (oldest forgotten first): bounds its memory whatever clients do.
MAX_ROUTED_SESSIONS = 200_000
#: Largest request body kept to send again to another worker when a full one refuses it.
RETRY_BODY_BYTES = 1 << 20
#: Seconds a kept-alive worker connection may sit idle and still be reused (uvicorn's limit is 5).
IDLE_REUSE_S = 2.0
_SESSION_HEADERS = (b"openenv-session-id", b"mcp-session-id")
_MERGED = {"/capabilities", "/metrics"}


class Front(Supervisor):
    """The router: accepts client connections, routes and splices them to the workers."""

    def __init__(self, serve_args: list[str], prefix: list[str], capacities: list[int | None], *,
                 token: str | None, max_header_bytes: int, header_timeout_s: float | None,
                 max_connections: int | None, sockdir: Path) -> None:
        super().__init__(serve_args, prefix, capacities, token=token, sockdir=sockdir)
        self.max_header_bytes = max_header_bytes
        self.header_timeout_s = header_timeout_s
        self.max_connections = max_connections
        self.routes: OrderedDict[str, tuple[Worker, int]] = OrderedDict()
        self.open_connections = 0
        self._rr = 0

    # -- routing ----------------------------------------------------------------------------------

    def _pick(self) -> Worker:
        live = [w for w in self.workers if w.up.is_set()]
        if not live:
            raise NoWorker
        self._rr += 1
        # least loaded; ties rotate so that a quiet server still spreads its first sessions
        return min(live, key=lambda w: (w.load, (w.index - self._rr) % len(self.workers)))

    def _session_id(self, req: h11.Request) -> str | None:
        for name, value in req.headers:
            if name in _SESSION_HEADERS and value != b"none":
                return value.decode("latin-1")
        parts = urlsplit(req.target.decode("latin-1"))
        m = re.match(r"^/sessions/([^/]+)", parts.path)
        if m:
            return m.group(1)
        ids = parse_qs(parts.query).get("session_id")
        return ids[0] if ids else None

    def _route(self, req: h11.Request) -> tuple[Worker, str | None]:
        """The worker for ``req``; raises ``_Lost`` for a session whose worker died."""
        sid = self._session_id(req)
        if sid is not None and sid in self.routes:
            w, gen = self.routes[sid]
            if gen != w.generation or not w.up.is_set():
                del self.routes[sid]
                raise _Lost(sid, w)
            return w, sid
        return self._pick(), sid

    def _learn(self, w: Worker, req: h11.Request, sid: str | None, resp: h11.Response) -> None:
        for name, value in resp.headers:
            if name in _SESSION_HEADERS and value != b"none":
                new = value.decode("latin-1")
                if new not in self.routes:
                    self.routes[new] = (w, w.generation)
                    w.sessions.add(new)
                    while len(self.routes) > MAX_ROUTED_SESSIONS:
                        old, (ow, _) = self.routes.popitem(last=False)
                        ow.sessions.discard(old)
        gone = resp.status_code == 404 or (req.method == b"DELETE" and resp.status_code < 300)
        if sid is not None and gone and sid in self.routes:
            self.routes.pop(sid)[0].sessions.discard(sid)

    # -- connections ------------------------------------------------------------------------------

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open_connections += 1
        try:
            if self.max_connections is not None and self.open_connections > self.max_connections:
                await reply(writer, h11.Connection(h11.SERVER), 503, {
                    "detail": f"the server holds {self.max_connections} connections (--max-connections); "
                              "retry later", "code": "CAPACITY_REACHED"})
                return
            await self._serve_connection(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, h11.ProtocolError, TimeoutError):
            pass  # the client went away or broke HTTP: nothing to answer
        except Exception:  # a bug here costs this connection only: the front keeps serving the rest
            log.exception("the front failed on a connection; it was closed")
        finally:
            self.open_connections -= 1
            writer.close()

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.max_header_bytes)
        while True:
            try:
                ev = await next_event(conn, reader, self.header_timeout_s)
            except h11.RemoteProtocolError as exc:
                if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                    await reply(writer, conn, exc.error_status_hint, {
                        "detail": f"bad HTTP request: {exc}", "code": "BAD_REQUEST"})
                return
            if not isinstance(ev, h11.Request):
                return  # ConnectionClosed between requests
            try:
                w, sid = self._route(ev)
            except NoWorker:
                await reply(writer, conn, 503, {"detail": "no worker process is serving right now (they are "
                                                 "starting or restarting); retry shortly", "code": "CAPACITY_REACHED"})
                return
            except _Lost as lost:
                await self._reply_lost(lost, conn, reader, writer)
                if not next_cycle(conn):
                    return
                continue
            if is_upgrade(ev):
                await self._splice(w, ev, conn.trailing_data[0], reader, writer)
                return
            path = urlsplit(ev.target.decode("latin-1")).path
            if ev.method == b"GET" and path in _MERGED:
                await self._merged(path, ev, conn, reader, writer)
            else:
                await self._forward(w, sid, ev, conn, reader, writer)
            if not next_cycle(conn):
                return

    async def _reply_lost(self, lost: _Lost, conn: h11.Connection, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        # the worker's own unknown-session answer (404), with why
        await drain(conn, reader)
        await reply(writer, conn, 404, {
            "detail": f"Unknown session_id: {lost.sid}: worker {lost.worker.index} exited, and the session "
                      "lived in it: it is lost; open a new one", "code": "SESSION_LOST"})

    async def _connect(self, w: Worker, sid: str | None, *, pooled: bool = True
                       ) -> tuple[Worker, asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to ``w``. When ``w`` turns out to have died (before the supervisor saw it):
        ``_Lost`` for a session it held, else another worker takes the request."""
        for _ in range(len(self.workers)):
            gen = w.generation
            try:
                if pooled:
                    return (w, *await self._open(w))
                return (w, *await asyncio.open_unix_connection(str(w.uds), limit=2**20))
            except OSError:
                if not await self._died(w, gen):
                    raise
                self._lost(w)
                if sid is not None and self.routes.get(sid, (None, 0))[0] is w:
                    del self.routes[sid]
                    raise _Lost(sid, w) from None
                w = self._pick()
        raise NoWorker

    async def _open(self, w: Worker) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        while w.idle:
            since, reader, writer = w.idle.pop()
            # uvicorn closes a keep-alive connection idle for 5 s: never reuse one near that age
            if time.monotonic() - since < IDLE_REUSE_S and not reader.at_eof():
                return reader, writer
            writer.close()
        return await asyncio.open_unix_connection(str(w.uds), limit=2**20)

    async def _forward(self, w: Worker, sid: str | None, req: h11.Request, conn: h11.Connection,
                       reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Stream one request to ``w`` and its response back. A request naming no session (a new
        session, a one-shot reset) that a full worker refuses (503 ``CAPACITY_REACHED``) is sent
        to the next worker with room, so ``--max-sessions`` is the total, not a per-worker
        lottery; its body (at most ``RETRY_BODY_BYTES``) is kept for that."""
        body: list[bytes] | None = [] if sid is None else None
        tried: set[int] = set()
        while True:
            tried.add(w.index)
            others = [o for o in self.workers if o.up.is_set() and o.index not in tried]
            refused = await self._exchange(w, sid, req, conn, reader, writer, body, may_retry=bool(others))
            if not refused:
                return
            w = min(others, key=lambda o: o.load)

    async def _exchange(self, w: Worker, sid: str | None, req: h11.Request, conn: h11.Connection,
                        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: list[bytes] | None,
                        *, may_retry: bool) -> bool:
        """One try of ``_forward``; True when ``w`` refused for capacity and the caller should try
        another worker (nothing was sent to the client then)."""
        try:
            w, wr, ww = await self._connect(w, sid)
        except _Lost as lost:
            await self._reply_lost(lost, conn, reader, writer)
            return False
        except (OSError, NoWorker):
            await drain(conn, reader)
            await reply(writer, conn, 503, {"detail": f"worker {w.index} is not accepting connections "
                                             "(it is restarting); retry shortly", "code": "CAPACITY_REACHED"})
            return False
        gen = w.generation
        wconn = h11.Connection(h11.CLIENT)
        try:
            ww.write(wconn.send(h11.Request(method=req.method, target=req.target, headers=hop(req.headers))))
            if conn.their_state is h11.DONE and body is not None:  # a retry: the body read the first time
                ww.write(b"".join(wconn.send(h11.Data(data=chunk)) for chunk in body if chunk))
                ww.write(wconn.send(h11.EndOfMessage()))
            else:
                held = 0
                while True:
                    ev = await next_event(conn, reader, None)
                    if isinstance(ev, h11.Data):
                        if body is not None:
                            held += len(ev.data)
                            body.append(ev.data)
                            if held > RETRY_BODY_BYTES:
                                body = None  # too large to keep: this request is not retried
                        ww.write(wconn.send(h11.Data(data=ev.data)))
                        await ww.drain()
                    elif isinstance(ev, h11.EndOfMessage):
                        ww.write(wconn.send(h11.EndOfMessage()))
                        break
                    else:
                        return False
            resp = await next_event(wconn, wr, None)
            while isinstance(resp, h11.InformationalResponse):  # 100 Continue: the client waits for it
                writer.write(conn.send(resp))
                resp = await next_event(wconn, wr, None)
            if not isinstance(resp, h11.Response):
                raise ConnectionError("worker closed the connection")
            first: list[bytes] = []
            if resp.status_code == 503 and may_retry and body is not None:
                first, refused = await _capacity_refusal(wconn, wr)
                if refused:
                    self._release(w, gen, wconn, wr, ww)
                    return True
            self._learn(w, req, sid, resp)
            writer.write(conn.send(h11.Response(status_code=resp.status_code, headers=hop(resp.headers),
                                                reason=resp.reason)))
            for chunk in first:
                writer.write(conn.send(h11.Data(data=chunk)))
            while wconn.their_state is not h11.DONE:
                ev = await next_event(wconn, wr, None)
                if isinstance(ev, h11.Data):
                    writer.write(conn.send(h11.Data(data=ev.data)))
                    await writer.drain()
                elif not isinstance(ev, h11.EndOfMessage):
                    raise ConnectionError("worker closed the connection mid-response")
            writer.write(conn.send(h11.EndOfMessage()))
        except (ConnectionError, OSError, h11.ProtocolError, asyncio.IncompleteReadError):
            ww.close()
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE) and conn.their_state is h11.DONE:
                died = await self._died(w, gen)
                detail = (f"worker {w.index} exited while answering this request" + (
                    f"; session {sid} is lost, open a new one" if sid else "")) if died else \
                    f"worker {w.index} closed the connection without a complete answer"
                await reply(writer, conn, 502, {"detail": detail, "code": "SESSION_LOST" if sid else "WORKER_LOST"})
                return False
            raise ConnectionError("worker lost mid-request") from None
        self._release(w, gen, wconn, wr, ww)
        return False

    def _release(self, w: Worker, gen: int, wconn: h11.Connection, wr: asyncio.StreamReader,
                 ww: asyncio.StreamWriter) -> None:
        if wconn.our_state is h11.DONE and wconn.their_state is h11.DONE and w.generation == gen:
            wconn.start_next_cycle()
            w.idle.append((time.monotonic(), wr, ww))  # keep-alive to the worker: no new unix connection per request
        else:
            ww.close()

    async def _merged(self, path: str, req: h11.Request, conn: h11.Connection,
                      reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """``/capabilities`` or ``/metrics`` from every serving worker, merged. A worker's refusal
        (401 without a token, ...) is relayed as it is: the front adds nothing a worker would not."""
        await drain(conn, reader)
        answers: list[tuple[Worker, int, list[tuple[bytes, bytes]], bytes]] = []
        for w in self.workers:
            if not w.up.is_set():
                continue
            try:
                status, headers, body = await fetch(w.uds, req)
            except (OSError, ConnectionError, h11.ProtocolError):
                continue
            if status != 200:
                writer.write(conn.send(h11.Response(status_code=status, headers=hop(headers))))
                writer.write(conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))
                return
            answers.append((w, status, headers, body))
        if not answers:
            await reply(writer, conn, 503, {"detail": "no worker process is serving right now; retry shortly",
                                             "code": "CAPACITY_REACHED"})
            return
        if path == "/capabilities":
            body = json.dumps(self.capabilities([(w, json.loads(b)) for w, _, _, b in answers])).encode()
            ctype = b"application/json"
        else:
            body = merge_metrics([(w.index, b.decode()) for w, _, _, b in answers]).encode()
            ctype = dict(answers[0][2]).get(b"content-type", b"text/plain; version=0.0.4")
        writer.write(conn.send(h11.Response(status_code=200, headers=[
            (b"content-type", ctype), (b"content-length", str(len(body)).encode())])))
        writer.write(conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))

    def capabilities(self, per: list[tuple[Worker, dict[str, Any]]]) -> dict[str, Any]:
        caps = dict(per[0][1])
        caps_total = [w.capacity if w.capacity is not None else c.get("max_sessions") for w, c in per]
        caps["max_sessions"] = sum(c for c in caps_total if isinstance(c, int))
        caps["workers"] = {
            "count": len(self.workers), "serving": len(per),
            "routed_sessions": sum(w.connections + len(w.sessions) for w in self.workers),
            "per_worker": [{"worker": w.index, "pid": w.proc.pid if w.proc else None,
                            "max_sessions": c.get("max_sessions"), "websockets": w.connections,
                            "http_sessions": len(w.sessions), "restarts": len(w.restarts)} for w, c in per],
        }
        return caps

    async def _splice(self, w: Worker, req: h11.Request, rest: bytes, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        """A WebSocket: replay the upgrade request to ``w``, then copy bytes both ways until one
        side closes. A worker that dies under it gets the client a close frame 1011 saying so."""
        try:
            w, _, ww = await self._connect(w, None, pooled=False)
        except (OSError, NoWorker):
            await reply(writer, h11.Connection(h11.SERVER), 503, {
                "detail": f"worker {w.index} is not accepting connections (restarting); retry shortly",
                "code": "CAPACITY_REACHED"})
            return
        gen = w.generation
        head = b"%s %s HTTP/1.1\r\n" % (req.method, req.target)
        head += b"".join(b"%s: %s\r\n" % (k, v) for k, v in req.headers) + b"\r\n"
        ww.write(head + rest)
        w.connections += 1
        try:
            closed_first = await splice(writer, ww)
            if closed_first == "worker" and await self._died(w, gen):
                reason = f"worker {w.index} exited: session lost, open a new one".encode()[:120]
                with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                    writer.transport.write(bytes([0x88, 2 + len(reason)]) + (1011).to_bytes(2, "big") + reason)
        finally:
            w.connections -= 1
            ww.close()

async def _capacity_refusal(wconn: h11.Connection, wr: asyncio.StreamReader) -> tuple[list[bytes], bool]:
    """Read a 503's (small) body: (its chunks, whether it says ``CAPACITY_REACHED``)."""
    chunks: list[bytes] = []
    while wconn.their_state is not h11.DONE:
        ev = await next_event(wconn, wr, None)
        if isinstance(ev, h11.Data):
            chunks.append(ev.data)
        elif not isinstance(ev, h11.EndOfMessage):
            raise ConnectionError("worker closed the connection mid-response")
    return chunks, b'"CAPACITY_REACHED"' in b"".join(chunks)


class _Lost(Exception):
    def __init__(self, sid: str, worker: Worker) -> None:
        super().__init__(sid)
        self.sid, self.worker = sid, worker


def serve_workers(n: int, *, serve_args: list[str], prefix: list[str], host: str, port: int,
                  max_sessions: int | None, token: str | None, ready_file: str | None, fd: int | None,
                  uds: str | None, max_header_bytes: int, header_timeout_s: float | None,
                  max_connections: int | None) -> int:
    """Run the front and ``n`` workers until SIGTERM/SIGINT; returns the exit status (130 after
    SIGINT, 143 after SIGTERM, 1 if the workers could not start)."""
    capacities = split_capacity(max_sessions, n)
    with tempfile.TemporaryDirectory(prefix="openenv-workers-") as tmp:
        front = Front(serve_args, prefix, capacities, token=token, max_header_bytes=max_header_bytes,
                      header_timeout_s=header_timeout_s, max_connections=max_connections, sockdir=Path(tmp))
        try:
            return asyncio.run(_main(front, host, port, ready_file, fd, uds))
        finally:
            front.stopping = True
            front.stop_workers()


async def _main(front: Front, host: str, port: int, ready_file: str | None, fd: int | None,
                uds: str | None) -> int:
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[int] = loop.create_future()

    def on_signal(sig: int) -> None:
        # at once: a Ctrl-C reaches the workers too, and their exits must not look like crashes
        front.stopping = True
        if not stop.done():
            stop.set_result(128 + sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, int(sig))
    starting: asyncio.Future[Any] = asyncio.ensure_future(front.start())
    await asyncio.wait([starting, stop], return_when=asyncio.FIRST_COMPLETED)
    if stop.done():
        starting.cancel()
        return stop.result()
    try:
        starting.result()
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    supervisor = asyncio.ensure_future(front.supervise())
    import socket

    if uds is not None:
        old = os.umask(0o177)  # owner-only from the start, as one process's --uds
        try:
            server = await asyncio.start_unix_server(front.handle, path=uds, limit=2**20)
        finally:
            os.umask(old)
        where: dict[str, Any] = {"uds": uds}
    elif fd is not None:
        server = await asyncio.start_server(front.handle, sock=socket.socket(fileno=fd), limit=2**20)
        where = {"host": host, "port": server.sockets[0].getsockname()[1]}
    else:
        server = await asyncio.start_server(front.handle, host, port, limit=2**20, backlog=2048)
        where = {"host": host, "port": server.sockets[0].getsockname()[1]}
    where["pid"] = os.getpid()
    where["workers"] = [w.proc.pid for w in front.workers if w.proc is not None]
    log.info("serving on %s with %d workers (pids %s)", where.get("uds") or f"http://{host}:{where['port']}",
             len(front.workers), where["workers"])
    if ready_file:
        _write_ready(ready_file, where)
    code = await stop
    front.stopping = True
    server.close()
    supervisor.cancel()
    if uds is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(uds)
    return code


def _write_ready(ready_file: str, where: dict[str, Any]) -> None:
    tmp = ready_file + ".tmp"
    Path(tmp).write_text(json.dumps(where))
    os.replace(tmp, ready_file)  # a reader never sees a half-written file
