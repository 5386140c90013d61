"""The client against real servers on 127.0.0.1: connection refusals that name the fix, typed
protocol errors, and the REST client's one keep-alive connection.

Each server is a real uvicorn serving ``create_app(EchoEnv, ...)`` on 127.0.0.1 in the test's own
event loop (the kit's ``openenv.testing.serving``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from openenv.client import GenericEnvClient
from openenv.client_connect import ConnectRefused
from openenv.errors import ConfigError, ProtocolError, UnknownNameError, error_from_wire
from openenv.server import create_app
from openenv.testing import serving
from openenv_env_echo.env import EchoEnv

Serve = Callable[..., Awaitable[str]]


class PeerRecorder:
    """ASGI wrapper that records the client address of every HTTP request."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.peers: list[tuple[str, int]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("client"):
            self.peers.append(tuple(scope["client"]))  # type: ignore[arg-type]
        await self.app(scope, receive, send)


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """``await serve(wrap=None, keep_alive_s=5, **settings)`` → base URL, served by the kit's
    ``serving`` on this loop; every server is stopped at teardown."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(wrap: Callable[[Any], Any] | None = None, keep_alive_s: int = 5,
                        **settings: Any) -> str:
            app: Any = create_app(EchoEnv, **settings)
            if wrap is not None:
                app = wrap(app)
            server = await stack.enter_async_context(serving(app, keep_alive_s=keep_alive_s))
            return server.url

        yield start


@pytest.fixture(autouse=True)
def _no_ambient_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENENV_TOKEN", raising=False)


@pytest.mark.parametrize("transport", ["ws", "rest"])
async def test_missing_token_names_token_and_the_env_var(serve: Serve, transport: str) -> None:
    url = await serve(token="s3cret", transports=["ws", "rest"])
    client = GenericEnvClient(url, transport=transport)
    with pytest.raises(ConnectRefused) as caught:
        await client.reset()
    err = caught.value
    assert isinstance(err, ConnectionError) and err.status == 401
    assert "HTTP 401" in str(err) and "pass `token=`" in str(err) and "OPENENV_TOKEN" in str(err)
    await client.close()


async def test_the_token_from_openenv_token_is_used(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    url = await serve(token="s3cret", transports=["ws"])
    monkeypatch.setenv("OPENENV_TOKEN", "s3cret")
    async with GenericEnvClient(url) as client:
        result = await client.reset()
        assert result.observation["echoed_message"] == "ready"
    monkeypatch.setenv("OPENENV_TOKEN", "wrong")
    with pytest.raises(ConnectRefused, match="HTTP 401"):
        await GenericEnvClient(url).connect()
    # an explicit token wins over the variable
    async with GenericEnvClient(url, token="s3cret") as client:
        await client.reset()


async def test_no_ws_route_says_use_rest(serve: Serve) -> None:
    url = await serve(transports=["rest"])
    client = GenericEnvClient(url, transport="ws")
    with pytest.raises(ConnectRefused) as caught:
        await client.reset()
    assert caught.value.status in (403, 404)
    assert 'use `transport="rest"`' in str(caught.value)
    await client.close()
    async with GenericEnvClient(url, transport="rest") as client:  # and the advice works
        assert (await client.reset()).done is False


async def test_no_http_sessions_says_use_ws(serve: Serve) -> None:
    url = await serve(transports=["ws"])
    with pytest.raises(ConnectRefused) as caught:
        await GenericEnvClient(url, transport="rest").connect()
    assert caught.value.status == 404 and 'use `transport="ws"`' in str(caught.value)


async def test_protocol_errors_are_typed_and_the_session_survives(serve: Serve) -> None:
    url = await serve(transports=["ws"])
    async with GenericEnvClient(url) as client:
        await client.reset()
        conn = client._conn
        assert conn is not None
        reply = await conn.request({"type": "no_such_frame"})  # answered UNKNOWN_TYPE
        with pytest.raises(ProtocolError):
            raise error_from_wire(reply["data"])
        assert (await client.step({"message": "still here"})).observation["echoed_message"] == "still here"


async def test_protocol_error_code_maps_to_protocol_error() -> None:
    # A server that answers every frame with a PROTOCOL_ERROR error frame (a real WebSocket server
    # on 127.0.0.1): the client raises ProtocolError, not a bare OpenEnvError.
    from websockets.asyncio.server import ServerConnection
    from websockets.asyncio.server import serve as ws_serve

    async def handler(ws: ServerConnection) -> None:
        async for text in ws:
            if json.loads(text)["type"] == "close":
                return  # ends the connection, as a real server does
            await ws.send('{"type":"error","data":{"message":"frame out of order","code":"PROTOCOL_ERROR",'
                          '"hint":"reset first"}}')

    async with ws_serve(handler, "127.0.0.1", 0, compression=None) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        client = GenericEnvClient(f"http://127.0.0.1:{port}", transport="ws")
        with pytest.raises(ProtocolError) as caught:
            await client.reset()
        await client.close()
    err = caught.value
    assert type(err) is ProtocolError and err.code == "PROTOCOL_ERROR"
    assert err.message == "frame out of order" and err.data["hint"] == "reset first"


async def test_transport_without_client_or_unknown_is_refused_with_the_list() -> None:
    with pytest.raises(ConfigError, match=r"'mcp' has no client connector.*with a client: ws, rest"):
        await GenericEnvClient("http://127.0.0.1:9", transport="mcp").connect()
    with pytest.raises(UnknownNameError, match=r"Unknown transport 'grpc'.*Installed transports:"):
        await GenericEnvClient("http://127.0.0.1:9", transport="grpc").connect()


async def test_rest_client_reuses_one_keep_alive_connection(serve: Serve) -> None:
    recorder: list[PeerRecorder] = []

    def wrap(app: Any) -> PeerRecorder:
        recorder.append(PeerRecorder(app))
        return recorder[0]

    url = await serve(wrap=wrap, transports=["rest"])
    async with GenericEnvClient(url, transport="rest") as client:
        await client.reset()
        for i in range(30):
            await client.step({"message": f"m{i}"})
        await client.state()
    peers = recorder[0].peers
    # POST /sessions, POST /reset, 30 x POST /step, GET /state, DELETE /sessions/{id}
    assert len(peers) == 34
    assert len(set(peers)) == 1, f"the REST client opened {len(set(peers))} TCP connections: {set(peers)}"


async def test_rest_client_survives_the_server_closing_an_idle_connection(serve: Serve) -> None:
    # uvicorn closes a keep-alive connection idle for 1 s here; a step after a longer pause (a
    # policy that thinks) goes out on a new connection instead of failing the session.
    recorder: list[PeerRecorder] = []

    def wrap(app: Any) -> PeerRecorder:
        recorder.append(PeerRecorder(app))
        return recorder[0]

    url = await serve(wrap=wrap, keep_alive_s=1, transports=["rest"])
    async with GenericEnvClient(url, transport="rest") as client:
        await client.reset()
        await client.step({"message": "before"})
        await asyncio.sleep(1.5)
        result = await client.step({"message": "after the pause"})
        assert result.observation["echoed_message"] == "after the pause"
        assert (await client.state())["step_count"] == 2  # same session, nothing replayed
    assert len(set(recorder[0].peers)) == 2
