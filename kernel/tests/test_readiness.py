"""``openenv.readiness`` against real servers on 127.0.0.1 (port 0) and real child processes.

The HTTP-only part uses the standard library's ``http.server`` in a thread (what the kernel alone
can check). The ``/ws`` round-trip part uses a real ``websockets`` server that also answers
``/health`` and ``/capabilities``, with a scripted reply to the probe's ``state`` frame; it is
skipped where ``websockets`` is not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from openenv import readiness
from openenv.readiness import NotReady, ProbeFailed, log_tail_text, probe, wait_until_ready

# -- a tiny HTTP server ----------------------------------------------------------------------------


@dataclass
class Script:
    """What the tiny server answers, and what it saw."""

    health: int = 200
    capabilities: int = 200
    transports: list[str] = field(default_factory=lambda: ["rest"])
    seen: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Authorization)


@pytest.fixture
def http_server() -> Iterator[tuple[str, Script]]:
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the stdlib handler's method name
            script.seen.append((self.path, self.headers.get("Authorization")))
            if self.path == "/health":
                status, body = script.health, {"status": "healthy"}
            elif self.path == "/capabilities":
                status, body = script.capabilities, {"transports": script.transports}
            else:
                status, body = 404, {"detail": "Not Found"}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:  # keep the test output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", script
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def no_websockets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import websockets...`` fail, as on a machine with only the kernel installed."""
    for name in ("websockets", "websockets.sync", "websockets.sync.client", "websockets.exceptions"):
        monkeypatch.setitem(sys.modules, name, None)


def closed_port_url() -> str:
    import socket

    with socket.socket() as sock:  # bound, never listening, then closed: connections are refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# -- probe over HTTP -------------------------------------------------------------------------------


def test_http_only_server_is_ready_after_health_and_capabilities(http_server: tuple[str, Script]) -> None:
    url, script = http_server
    assert probe(url, token="s3cret") == "http"
    assert script.seen == [("/health", "Bearer s3cret"), ("/capabilities", "Bearer s3cret")]


def test_unhealthy_and_unreachable_servers_are_not_ready(http_server: tuple[str, Script]) -> None:
    url, script = http_server
    script.health = 503
    with pytest.raises(NotReady, match="GET /health answered HTTP 503"):
        probe(url)
    with pytest.raises(NotReady, match="GET /health failed: ConnectionRefusedError"):
        probe(closed_port_url())


def test_a_refused_token_can_never_get_better(http_server: tuple[str, Script]) -> None:
    url, script = http_server
    for status in (401, 403):
        script.capabilities = status
        with pytest.raises(ProbeFailed, match=f"refused the token .*HTTP {status}"):
            probe(url, token="wrong")


def test_without_websockets_the_check_is_health_and_capabilities(
        http_server: tuple[str, Script], no_websockets: None) -> None:
    url, script = http_server
    script.transports = ["ws", "rest"]  # the server has /ws, but this side cannot speak it
    assert not readiness.have_websockets()
    assert probe(url) == "http"
    with pytest.raises(ProbeFailed, match="needs the websockets library"):
        probe(url, mode="ws")


def test_unknown_mode_is_refused(http_server: tuple[str, Script]) -> None:
    url, script = http_server
    with pytest.raises(ValueError, match="use one of auto, ws, http"):
        probe(url, mode="sometimes")
    assert script.seen == []  # refused before any request


# -- wait_until_ready ------------------------------------------------------------------------------


def test_wait_reports_a_server_that_died_at_once_with_its_log(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        child = subprocess.Popen([sys.executable, "-c", "print('boom on purpose'); raise SystemExit(3)"],
                                 stdout=out, stderr=subprocess.STDOUT)
    try:
        child.wait(30)

        def exited() -> str | None:
            code = child.poll()
            return None if code is None else f"exited with code {code}"

        with pytest.raises(RuntimeError) as info:
            wait_until_ready(closed_port_url(), timeout_s=60, exited=exited,
                             log_tail=lambda: log.read_text(), log_source=str(log), what="env server 'x'")
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(10)
    message = str(info.value)
    assert message.startswith("env server 'x' exited with code 3 during start-up.")
    assert f"--- last log lines of {log} ---\nboom on purpose" in message


def test_wait_times_out_with_the_last_reason_the_hint_and_the_log(http_server: tuple[str, Script]) -> None:
    url, script = http_server
    script.health = 503
    with pytest.raises(TimeoutError) as info:
        wait_until_ready(url, timeout_s=0.3, log_tail=lambda: "line 1\nline 2", what="container c1")
    message = str(info.value)
    assert message.startswith("container c1 did not become ready within 0.3s: still not ready after ")
    assert "(last: GET /health answered HTTP 503). Raise LaunchSpec.startup_timeout_s" in message
    assert message.endswith("\n--- last log lines ---\nline 1\nline 2")
    assert len(script.seen) >= 2  # it kept polling until the deadline


def test_wait_follows_an_address_that_appears_later(http_server: tuple[str, Script]) -> None:
    url, script = http_server
    calls: list[int] = []

    def address() -> str | None:
        calls.append(1)
        return url if len(calls) >= 3 else None  # e.g. a ready file written a moment later

    assert wait_until_ready(address, timeout_s=30) == "http"
    assert len(calls) == 3 and [p for p, _ in script.seen] == ["/health", "/capabilities"]


def test_wait_before_any_address_times_out_saying_so() -> None:
    with pytest.raises(TimeoutError) as info:
        wait_until_ready(lambda: None, timeout_s=0.2, hint="")
    message = str(info.value)
    assert "still not ready after 0 checks (last: the server has not said where it listens yet)." in message
    assert message.endswith(" (no log output)")


def test_wait_turns_a_failed_probe_into_runtime_error_at_once(http_server: tuple[str, Script]) -> None:
    url, script = http_server
    script.capabilities = 401
    with pytest.raises(RuntimeError) as info:
        wait_until_ready(url, timeout_s=60, token="bad", log_tail=lambda: "", log_source="/tmp/x.log")
    assert not isinstance(info.value, TimeoutError)
    assert str(info.value) == (f"server answers at {url} but cannot serve: the server refused the token "
                               "(GET /capabilities answered HTTP 401). (no log output in /tmp/x.log)")
    assert len(script.seen) == 2  # one probe: retrying cannot help


def test_log_tail_text_never_hides_the_error() -> None:
    def broken() -> str:
        raise OSError("disk gone")

    assert log_tail_text(broken) == "\n--- last log lines ---\n(logs unavailable: disk gone)"
    assert log_tail_text(lambda: "  \n") == " (no log output)"
    assert log_tail_text(lambda: "a\nb\n", "/var/log/s.log") == "\n--- last log lines of /var/log/s.log ---\na\nb"


# -- the /ws round-trip ----------------------------------------------------------------------------


@dataclass
class WsScript:
    """What the WebSocket server answers, and the frames it received."""

    reply: str = '{"type":"state","data":{"episode_id":null,"step_count":0}}'
    capabilities: int | None = 200  # None: no /capabilities route (an upstream server)
    transports: list[str] = field(default_factory=lambda: ["ws"])
    upgrade_status: int | None = None  # refuse the /ws upgrade with this status
    frames: list[str] = field(default_factory=list)
    closed_by_server: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def ws_server() -> Iterator[tuple[str, WsScript]]:
    pytest.importorskip("websockets.sync.server")
    from websockets.sync.server import ServerConnection, serve

    script = WsScript()

    def process_request(connection: ServerConnection, request: Any) -> Any:
        path = request.path.split("?", 1)[0]
        if path == "/health":
            return connection.respond(200, '{"status":"healthy"}')
        if path == "/capabilities":
            if script.capabilities is None:
                return connection.respond(404, '{"detail":"Not Found"}')
            return connection.respond(script.capabilities, json.dumps({"transports": script.transports}))
        if path != "/ws":
            return connection.respond(404, '{"detail":"Not Found"}')
        if script.upgrade_status is not None:
            return connection.respond(script.upgrade_status, "refused")
        return None

    def handler(ws: ServerConnection) -> None:
        script.frames.append(str(ws.recv(timeout=10)))
        ws.send(script.reply)
        script.frames.append(str(ws.recv(timeout=10)))  # the close frame
        script.closed_by_server.set()  # returning closes the connection from this side

    server = serve(handler, "127.0.0.1", 0, process_request=process_request, compression=None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.socket.getsockname()[1]}", script
    finally:
        server.shutdown()
        thread.join(10)


@pytest.mark.requires_plugins("transport-ws")
def test_ws_round_trip_sends_state_then_close_and_waits_for_the_server(ws_server: tuple[str, WsScript]) -> None:
    url, script = ws_server
    assert probe(url) == "ws"
    assert script.frames == ['{"type":"state"}', '{"type":"close"}']
    assert script.closed_by_server.is_set()


@pytest.mark.parametrize(("reply", "raises", "match"), [
    ('{"type":"error","data":{"message":"no GPU","code":"FACTORY_ERROR","detail":"cuda"}}',
     ProbeFailed, "the env cannot start a session: no GPU cuda"),
    ('{"type":"error","data":{"message":"boom","code":"SESSION_ERROR"}}',
     ProbeFailed, "the env cannot start a session: boom"),
    ('{"type":"error","data":{"message":"Server at capacity","code":"CAPACITY_REACHED"}}',
     NotReady, "at capacity"),
    ('{"type":"error","data":{"message":"state failed","code":"EXECUTION_ERROR"}}',
     None, ""),  # a working server that answered
    ('{"type":"observation","data":{}}', ProbeFailed, "unexpected reply"),
    ("not json", ProbeFailed, "is not JSON"),
])
@pytest.mark.requires_plugins("transport-ws")
def test_ws_round_trip_reply_policy(ws_server: tuple[str, WsScript], reply: str,
                                    raises: type[Exception] | None, match: str) -> None:
    url, script = ws_server
    script.reply = reply
    if raises is None:
        assert probe(url) == "ws"
    else:
        with pytest.raises(raises, match=match):
            probe(url)
    assert script.frames[0] == '{"type":"state"}'


@pytest.mark.requires_plugins("transport-ws")
def test_ws_upgrade_refusals(ws_server: tuple[str, WsScript]) -> None:
    url, script = ws_server
    script.upgrade_status = 401
    with pytest.raises(ProbeFailed, match=r"refused the token on /ws \(HTTP 401\)"):
        probe(url, token="t")
    # /capabilities took the token, so a 403 is not about it (Starlette's answer for a path
    # without a WebSocket route): retry, and say what the server lists when /ws is not in it.
    script.upgrade_status = 403
    with pytest.raises(NotReady, match=r"^/ws upgrade answered HTTP 403$"):
        probe(url, token="t")
    script.transports = ["rest"]
    with pytest.raises(NotReady, match=r"HTTP 403 \(the server lists no 'ws' transport: rest\)"):
        probe(url, mode="ws")
    script.transports, script.upgrade_status = ["ws"], 503
    with pytest.raises(NotReady, match="/ws upgrade answered HTTP 503"):
        probe(url)
    # An upstream-style server without /capabilities: a 403 can only be the token, and a 404
    # means no /ws, so /health is all there is to check, unless the caller insists on /ws.
    script.capabilities, script.upgrade_status = None, 403
    with pytest.raises(ProbeFailed, match=r"refused the token on /ws \(HTTP 403\)"):
        probe(url, token="t")
    script.upgrade_status = 404
    assert probe(url) == "http"
    with pytest.raises(NotReady, match="/ws upgrade answered HTTP 404"):
        probe(url, mode="ws")
    assert script.frames == []


@pytest.mark.requires_plugins("transport-ws")
def test_ws_is_skipped_when_the_server_does_not_list_it(ws_server: tuple[str, WsScript]) -> None:
    url, script = ws_server
    script.transports = ["rest"]
    assert probe(url) == "http"
    assert probe(url, mode="http") == "http"
    assert script.frames == []
    script.transports = ["ws"]
    assert probe(url, mode="ws") == "ws"


@pytest.mark.requires_plugins("transport-ws")
def test_the_round_trip_goes_through_the_installed_ws_connector(
        ws_server: tuple[str, WsScript], monkeypatch: pytest.MonkeyPatch) -> None:
    import ast
    import inspect

    from openenv_transport_ws import client as connector_module

    seen: list[str] = []
    original = connector_module.WebSocketConnector.connect

    async def counting(self: Any, base_url: str, options: Any) -> Any:
        seen.append(base_url)
        return await original(self, base_url, options)

    monkeypatch.setattr(connector_module.WebSocketConnector, "connect", counting)
    url, script = ws_server
    assert probe(url, token="t") == "ws"
    assert seen == [url]
    assert script.frames == ['{"type":"state"}', '{"type":"close"}']
    # and the probe has no WebSocket client of its own
    tree = ast.parse(inspect.getsource(readiness))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name.split(".")[0] == "websockets"} - {"websockets"}


@pytest.mark.requires_plugins("transport-ws")
async def test_probe_works_from_inside_a_running_event_loop(ws_server: tuple[str, WsScript]) -> None:
    url, script = ws_server
    assert probe(url) == "ws"  # called from a coroutine: the round trip runs on its own thread
    assert script.closed_by_server.is_set()
