"""Client side of the wire, for the load generator: WebSocket frames and HTTP/1.1 responses.

Plain functions over bytes and blocking sockets (with timeouts), used to open sessions; the hot
loop itself lives in ``engine``. Written for speed over generality:

* WebSocket (RFC 6455): the handshake checks ``Sec-WebSocket-Accept`` and may offer
  ``permessage-deflate`` (as the ``websockets`` client — and so upstream's ``EnvClient`` — does by
  default); client frames are masked with one random key per connection, so a request frame is
  built once and re-sent (servers must unmask but cannot check randomness); compressed replies are
  inflated; pings are answered with pongs; fragmented messages are reassembled.
* HTTP: keep-alive requests; responses must carry ``Content-Length`` (every server measured here
  sends it for JSON bodies); anything else is reported as an error, not guessed at.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import time
import zlib
from typing import Any

__all__ = [
    "CLOSE_CODE_NORMAL", "OP_BINARY", "OP_CLOSE", "OP_CONT", "OP_PING", "OP_PONG", "OP_TEXT",
    "HandshakeError", "WsState", "build_request", "connect_ws", "encode_frame", "header_value",
    "http_roundtrip", "parse_frame", "parse_response", "ws_message", "ws_roundtrip",
]

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_MAX_HEAD = 64 * 1024
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
#: Payload of a normal-closure close frame.
CLOSE_CODE_NORMAL = (1000).to_bytes(2, "big")


class HandshakeError(ConnectionError):
    """The server refused or botched the WebSocket upgrade."""


def _mask(data: bytes, key: bytes) -> bytes:
    n = len(data)
    if not n:
        return b""
    stream = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(stream, "big")).to_bytes(n, "big")


def encode_frame(payload: bytes, opcode: int = OP_TEXT, key: bytes | None = None) -> bytes:
    """One final, masked client frame."""
    key = key or os.urandom(4)
    n = len(payload)
    if n < 126:
        head = bytes((0x80 | opcode, 0x80 | n))
    elif n < 65536:
        head = bytes((0x80 | opcode, 0x80 | 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((0x80 | opcode, 0x80 | 127)) + n.to_bytes(8, "big")
    return head + key + _mask(payload, key)


def parse_frame(buf: bytes, pos: int) -> tuple[int, int, bytes] | None:
    """The frame starting at ``pos``: ``(end, first_byte, payload)``, or None if incomplete."""
    avail = len(buf) - pos
    if avail < 2:
        return None
    b0, b1 = buf[pos], buf[pos + 1]
    length, head = b1 & 0x7F, 2
    if length == 126:
        if avail < 4:
            return None
        length, head = int.from_bytes(buf[pos + 2:pos + 4], "big"), 4
    elif length == 127:
        if avail < 10:
            return None
        length, head = int.from_bytes(buf[pos + 2:pos + 10], "big"), 10
    if b1 & 0x80:  # servers must not mask; tolerate it anyway
        head += 4
    end = pos + head + length
    if end > len(buf):
        return None
    payload = buf[pos + head:end]
    if b1 & 0x80:
        payload = _mask(payload, buf[pos + head - 4:pos + head])
    return end, b0, payload


class WsState:
    """Per-connection WebSocket client state (``__slots__``: read on the hot path)."""

    __slots__ = ("alive", "buf", "closed", "deflate", "extensions", "fd", "frag", "frag_compressed", "frame",
                 "inflater", "key", "replies", "reset_inflater", "sent_at", "sock")

    def __init__(self, sock: socket.socket, key: bytes, extensions: str) -> None:
        self.sock = sock
        self.key = key
        self.buf = b""
        self.extensions = extensions
        low = extensions.lower()
        self.deflate = "permessage-deflate" in low
        self.inflater: Any = zlib.decompressobj(-15) if self.deflate else None
        self.reset_inflater = "server_no_context_takeover" in low
        self.frag: list[bytes] | None = None
        self.frag_compressed = False
        self.closed = False
        # Owned by the engine: the request frame, when it was sent, replies counted, liveness.
        self.fd = sock.fileno()
        self.frame = b""
        self.sent_at = 0.0
        self.replies = 0
        self.alive = True


def ws_message(st: WsState, b0: int, payload: bytes) -> bytes | None:
    """Feed one frame; returns a complete data message, or None (control frame, or a fragment).

    Pings are answered here; a close frame is echoed and marks the state closed.
    """
    opcode = b0 & 0x0F
    if opcode >= OP_CLOSE:
        if opcode == OP_PING:
            st.sock.send(encode_frame(payload, OP_PONG, st.key))
        elif opcode == OP_CLOSE and not st.closed:
            st.closed = True
            try:
                st.sock.send(encode_frame(payload[:2], OP_CLOSE, st.key))
            except OSError:
                pass
        return None
    if opcode != OP_CONT:
        st.frag_compressed = bool(b0 & 0x40)
    if not b0 & 0x80:  # not final
        if st.frag is None:
            st.frag = []
        st.frag.append(payload)
        return None
    if st.frag is not None:
        st.frag.append(payload)
        payload = b"".join(st.frag)
        st.frag = None
    if st.frag_compressed:
        payload = st.inflater.decompress(payload + b"\x00\x00\xff\xff")
        if st.reset_inflater:
            st.inflater = zlib.decompressobj(-15)
    return payload


def _recv_until(sock: socket.socket, buf: bytes, marker: bytes, deadline: float) -> tuple[bytes, int]:
    while True:
        idx = buf.find(marker)
        if idx >= 0:
            return buf, idx
        if len(buf) > _MAX_HEAD:
            raise ConnectionError("response head too large")
        sock.settimeout(max(0.001, deadline - time.perf_counter()))
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("connection closed by the server")
        buf += data


def connect_ws(host: str, port: int, path: str, *, offer_deflate: bool, timeout_s: float) -> WsState:
    """Blocking connect + upgrade. Leaves the socket blocking, with TCP_NODELAY."""
    deadline = time.perf_counter() + timeout_s
    sock = socket.create_connection((host, port), timeout=timeout_s)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ws_key = base64.b64encode(os.urandom(16))
        ext = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n" if offer_deflate else ""
        sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      f"Sec-WebSocket-Key: {ws_key.decode()}\r\nSec-WebSocket-Version: 13\r\n{ext}\r\n").encode())
        buf, idx = _recv_until(sock, b"", b"\r\n\r\n", deadline)
        lines = buf[:idx].decode("latin-1").split("\r\n")
        status = lines[0].split(" ", 2)
        if len(status) < 2 or status[1] != "101":
            raise HandshakeError(f"upgrade refused: {lines[0]!r}")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        expected = base64.b64encode(hashlib.sha1(ws_key + _GUID).digest()).decode()
        if headers.get("sec-websocket-accept") != expected:
            raise HandshakeError("wrong Sec-WebSocket-Accept")
        st = WsState(sock, os.urandom(4), headers.get("sec-websocket-extensions", ""))
        st.buf = buf[idx + 4:]
        return st
    except BaseException:
        sock.close()
        raise


def ws_roundtrip(st: WsState, frame: bytes | None, timeout_s: float) -> bytes:
    """Send ``frame`` (already encoded; None to only read) and return the next data message."""
    deadline = time.perf_counter() + timeout_s
    if frame is not None:
        st.sock.sendall(frame)
    while True:
        parsed = parse_frame(st.buf, 0)
        if parsed is not None:
            end, b0, payload = parsed
            st.buf = st.buf[end:]
            message = ws_message(st, b0, payload)
            if message is not None:
                return message
            if st.closed:
                raise ConnectionError("closed by the server")
            continue
        st.sock.settimeout(max(0.001, deadline - time.perf_counter()))
        data = st.sock.recv(65536)
        if not data:
            raise ConnectionError("connection closed by the server")
        st.buf += data


def build_request(method: str, path: str, host: str, port: int, body: bytes | None = None,
                  headers: dict[str, str] | None = None) -> bytes:
    """A complete HTTP/1.1 request (keep-alive is the default)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append("Content-Type: application/json")
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def header_value(head: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` (lower-case) in a lower-cased header block."""
    start = head.find(b"\r\n" + name + b":")
    if start < 0:
        return None
    start += len(name) + 3
    end = head.find(b"\r\n", start)
    return head[start:end if end >= 0 else len(head)].strip()


def parse_response(buf: bytes) -> tuple[int, int, bytes, bytes] | None:
    """One complete response at the start of ``buf``: ``(consumed, status, lower_head, body)``.

    None while incomplete; raises ``ConnectionError`` for what this client does not handle.
    """
    idx = buf.find(b"\r\n\r\n")
    if idx < 0:
        if len(buf) > _MAX_HEAD:
            raise ConnectionError("response head too large")
        return None
    head = buf[:idx].lower()
    try:
        status = int(head[9:12])
    except ValueError:
        raise ConnectionError(f"bad status line {head[:40]!r}") from None
    length = header_value(head, b"content-length")
    if length is None:
        raise ConnectionError("response without Content-Length (chunked?)")
    end = idx + 4 + int(length)
    if len(buf) < end:
        return None
    return end, status, head, buf[idx + 4:end]


def http_roundtrip(sock: socket.socket, buf: bytes, request: bytes, timeout_s: float) -> tuple[int, bytes, bytes]:
    """Blocking request/response: ``(status, body, leftover)``."""
    deadline = time.perf_counter() + timeout_s
    sock.sendall(request)
    while True:
        parsed = parse_response(buf)
        if parsed is not None:
            end, status, _head, body = parsed
            return status, body, buf[end:]
        sock.settimeout(max(0.001, deadline - time.perf_counter()))
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("connection closed by the server")
        buf += data
