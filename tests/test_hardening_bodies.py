"""Bodies and headers are bounded while they are read, on every route (issue 21, items 1 and 2).

The server runs in this process (``served``), so its memory is this process's resident set.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest
from websockets.sync.client import connect

from openenv.env import Environment
from openenv.testing import LiveServer as Served
from openenv.testing import live_server as served
from openenv.testing import wait_until
from openenv.tools import CallToolAction, CallToolObservation
from openenv.types import State

MIB = 1024 * 1024


class ToolEnv(Environment[CallToolAction, CallToolObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False

    def reset(self, seed: int | None = None, episode_id: str | None = None) -> CallToolObservation:
        return CallToolObservation(tool_name="")

    def step(self, action: CallToolAction) -> CallToolObservation:
        return CallToolObservation(tool_name=action.tool_name)

    @property
    def state(self) -> State:
        return State()


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    with served(ToolEnv, transports=["ws", "rest", "mcp"], max_message_bytes=MIB,
                max_body_budget_bytes=3 * MIB) as srv:
        yield srv


def rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def open_chunked(srv: Served, path: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n".encode())
    return sock


def send_chunks(sock: socket.socket, total: int, chunk: int = 64 * 1024) -> int:
    """Send up to ``total`` bytes in chunks until the server stops reading; bytes sent."""
    piece = f"{chunk:x}\r\n".encode() + b"[" * chunk + b"\r\n"
    sent = 0
    sock.settimeout(3)
    try:
        while sent < total:
            sock.sendall(piece)
            sent += chunk
    except (TimeoutError, BrokenPipeError, ConnectionResetError):
        pass
    return sent


def status_of(sock: socket.socket) -> int:
    sock.settimeout(10)
    data = b""
    try:
        while b"\r\n" not in data:
            got = sock.recv(4096)
            if not got:
                break
            data += got
    except ConnectionResetError:
        pass
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1") else 0


@pytest.mark.parametrize("path", ["/mcp", "/step", "/reset", "/health"])
def test_a_chunked_body_stops_being_read_at_the_limit(server: Served, path: str) -> None:
    before = rss()
    with open_chunked(server, path) as sock:
        sent = send_chunks(sock, 64 * MIB)
        status = status_of(sock)
    grown = rss() - before
    assert status in (413, 405), status  # /health takes no POST: 405, the body unread either way
    assert grown < 24 * MIB, f"RSS grew by {grown / MIB:.0f} MiB while {sent / MIB:.0f} MiB were sent"
    assert server.ctx.body_budget.used == 0  # every byte held was given back
    assert httpx.get(server.url + "/health", timeout=10).status_code == 200


def test_concurrent_in_limit_bodies_share_a_budget(server: Served) -> None:
    socks = [open_chunked(server, "/step") for _ in range(4)]
    try:
        for s in socks[:3]:  # three bodies of 0.9 MiB each, left unfinished: 2.7 of the 3 MiB budget
            send_chunks(s, 900 * 1024, chunk=900 * 1024)
        wait_until(lambda: server.ctx.body_budget.used >= 2 * MIB, timeout_s=10, interval_s=0.02)
        send_chunks(socks[3], 900 * 1024, chunk=900 * 1024)
        assert status_of(socks[3]) == 503  # the fourth would take the total past the budget
    finally:
        for s in socks:
            s.close()
    wait_until(lambda: not server.ctx.body_budget.used, timeout_s=10, interval_s=0.02)
    assert server.ctx.body_budget.used == 0


def test_too_many_headers_are_answered_431(server: Served) -> None:
    headers = {f"x-h{i}": "v" for i in range(300)}
    r = httpx.get(server.url + "/health", headers=headers, timeout=10)
    assert r.status_code == 431
    assert "accepts at most 100" in r.json()["detail"] and r.json()["code"] == "HEADERS_TOO_LARGE"


def test_a_huge_header_is_answered_431(server: Served) -> None:
    r = httpx.post(server.url + "/step", headers={"x-big": "a" * (1 * MIB)}, json={}, timeout=10)
    assert r.status_code == 431 and "at most 65536" in r.json()["detail"]


def test_a_websocket_handshake_with_too_many_headers_is_refused(server: Served) -> None:
    with pytest.raises(Exception) as info:
        connect(server.ws_url, open_timeout=10, proxy=None,
                additional_headers={f"x-h{i}": "v" for i in range(110)})  # over 100, under websockets' own cap
    assert "431" in str(info.value)
