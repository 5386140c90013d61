"""HTTP pieces of the ``--workers`` front (openenv_serve_uvicorn.workers): h11 reads and replies,
a GET to one worker, and the merge of the workers' Prometheus texts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from pathlib import Path
from typing import Any, cast

import h11

__all__ = ["drain", "fetch", "hop", "is_upgrade", "merge_metrics", "next_cycle", "next_event", "reply", "splice"]


def is_upgrade(req: h11.Request) -> bool:
    return any(k == b"upgrade" and v.lower() == b"websocket" for k, v in req.headers)


def hop(headers: Any) -> list[tuple[bytes, bytes]]:
    # each side's keep-alive is its own (h11 decides it per connection); the body framing headers
    # stay, since h11 frames the body it forwards by them
    return [(k, v) for k, v in headers if k not in (b"connection", b"keep-alive")]


def next_cycle(conn: h11.Connection) -> bool:
    if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
        conn.start_next_cycle()
        return True
    return False


async def next_event(conn: h11.Connection, reader: asyncio.StreamReader, timeout: float | None) -> Any:
    while True:
        ev = conn.next_event()
        if ev is not h11.NEED_DATA:
            return ev
        data = await (asyncio.wait_for(reader.read(65536), timeout) if timeout else reader.read(65536))
        conn.receive_data(data)


async def drain(conn: h11.Connection, reader: asyncio.StreamReader) -> None:
    """Read (and drop) the rest of a request the front answers itself."""
    while conn.their_state is h11.SEND_BODY:
        ev = await next_event(conn, reader, None)
        if isinstance(ev, h11.ConnectionClosed):
            return


async def reply(writer: asyncio.StreamWriter, conn: h11.Connection, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    with contextlib.suppress(h11.LocalProtocolError):
        writer.write(conn.send(h11.Response(status_code=status, headers=[
            (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())])))
        writer.write(conn.send(h11.Data(data=data)) + conn.send(h11.EndOfMessage()))
    with contextlib.suppress(ConnectionError, OSError):
        await writer.drain()


async def fetch(uds: Path, req: h11.Request) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """One GET to a worker with the client's headers (so the worker decides about auth)."""
    reader, writer = await asyncio.open_unix_connection(str(uds), limit=2**20)
    try:
        conn = h11.Connection(h11.CLIENT)
        writer.write(conn.send(h11.Request(method=b"GET", target=req.target, headers=hop(req.headers)))
                     + conn.send(h11.EndOfMessage()))
        resp = await asyncio.wait_for(next_event(conn, reader, None), 30)
        if not isinstance(resp, h11.Response):
            raise ConnectionError("worker closed the connection")
        body = b""
        while isinstance(ev := await asyncio.wait_for(next_event(conn, reader, None), 30), h11.Data):
            body += ev.data
        return resp.status_code, list(resp.headers), body
    finally:
        writer.close()


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$")
#: Per-process facts that do not add up across workers.
_NOT_SUMMED = ("process_", "python_")


def merge_metrics(texts: list[tuple[int, str]]) -> str:
    """Prometheus text of several workers as one: each sample gets ``worker="<i>"``, and the sum
    over workers follows with ``worker="total"`` (not for ``process_*``/``python_*`` facts nor
    ``*_created`` timestamps, which do not add up)."""
    meta: dict[str, list[str]] = {}
    order: list[str] = []
    samples: dict[str, list[str]] = {}
    totals: dict[tuple[str, str], float] = {}
    for index, text in texts:
        family = ""
        for line in text.splitlines():
            if line.startswith("#"):
                parts = line.split(None, 3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    family = parts[2]
                    if family not in meta:
                        meta[family], samples[family] = [], []
                        order.append(family)
                    if line not in meta[family]:
                        meta[family].append(line)
                continue
            m = _SAMPLE.match(line)
            if not m:
                continue
            name, labels, value = m.group(1), m.group(3) or "", m.group(4)
            key = family if family and name.startswith(family) else name
            if key not in samples:
                samples[key], meta[key] = [], []
                order.append(key)
            sep = "," if labels else ""
            samples[key].append(f'{name}{{{labels}{sep}worker="{index}"}} {value}')
            if not name.startswith(_NOT_SUMMED) and not name.endswith("_created"):
                with contextlib.suppress(ValueError):
                    totals[(name, labels)] = totals.get((name, labels), 0.0) + float(value)
    out: list[str] = []
    for key in order:
        out += meta[key] + samples[key]
        for (name, labels), value in totals.items():
            if name.startswith(key) and (key == name or name[len(key):] in ("_bucket", "_sum", "_count",
                                                                           "_total", "_created")):
                sep = "," if labels else ""
                out.append(f'{name}{{{labels}{sep}worker="total"}} {value:g}')
    return "\n".join(out) + "\n"


class _Pipe(asyncio.Protocol):
    """One direction of a splice: what ``own`` receives is written to ``partner``; while ``own``'s
    write buffer is full, ``partner`` is not read (so a slow reader bounds the memory held)."""

    def __init__(self, own: asyncio.Transport, partner: asyncio.Transport, side: str,
                 done: asyncio.Future[str]) -> None:
        self.own, self.partner, self.side, self.done = own, partner, side, done

    def data_received(self, data: bytes) -> None:
        self.partner.write(data)

    def eof_received(self) -> bool:
        self._finish()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()

    def pause_writing(self) -> None:
        self.partner.pause_reading()

    def resume_writing(self) -> None:
        self.partner.resume_reading()

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(self.side)


async def splice(client: asyncio.StreamWriter, worker: asyncio.StreamWriter) -> str:
    """Copy bytes both ways between two connections until one side closes; returns which
    (``"client"`` or ``"worker"``). The bytes go from one transport's callback straight to the
    other's write, with no task, buffer or ``await`` per message: the WebSocket hot path.

    Called right after the upgrade request was written to the worker: nothing of either
    connection is buffered in its ``StreamReader`` then (a WebSocket client sends no frame before
    the 101, and the worker has not answered yet)."""
    done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    ct, wt = cast(asyncio.Transport, client.transport), cast(asyncio.Transport, worker.transport)
    ct.set_protocol(_Pipe(ct, wt, "client", done))
    wt.set_protocol(_Pipe(wt, ct, "worker", done))
    for t in (ct, wt):
        t.resume_reading()  # its StreamReader may have paused it
    return await done
