"""The app's direct lane for ``/ws``: taken only when nothing observable changes."""

from __future__ import annotations

from typing import Any

from ws_support import EchoEnv, live_server, plugin_manager, recv, send, ws_open

from openenv.server import create_app


async def _drive(app: Any, headers: list[tuple[bytes, bytes]] | None = None) -> tuple[dict[str, Any], list[Any]]:
    """One in-memory connection (reset, close); returns the scope as the app left it and what it sent."""
    inbound: list[dict[str, Any]] = [
        {"type": "websocket.connect"},
        {"type": "websocket.receive", "text": '{"type":"reset","data":{}}'},
        {"type": "websocket.receive", "text": '{"type":"close"}'},
    ]
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        return inbound.pop(0) if inbound else {"type": "websocket.disconnect", "code": 1000}

    async def send_(message: dict[str, Any]) -> None:
        sent.append(message)

    scope: dict[str, Any] = {
        "type": "websocket", "path": "/ws", "raw_path": b"/ws", "query_string": b"", "root_path": "",
        "headers": headers or [], "scheme": "ws", "server": ("127.0.0.1", 1), "client": ("127.0.0.1", 2),
        "subprotocols": [], "asgi": {"version": "3.0"}, "state": {}, "extensions": {},
    }
    async with app.router.lifespan_context(app):
        await app(scope, receive, send_)
    return scope, sent


async def test_ws_frames_skip_the_router_when_nothing_else_is_mounted() -> None:
    app = create_app(EchoEnv, transports=["ws"], plugin_manager=plugin_manager())
    scope, sent = await _drive(app)
    assert [m["type"] for m in sent] == ["websocket.accept", "websocket.send", "websocket.close"]
    assert "router" not in scope and "endpoint" not in scope  # Starlette's router never ran
    assert scope["app"] is app


async def test_a_valid_token_takes_the_lane_and_a_wrong_one_gets_the_401() -> None:
    app = create_app(EchoEnv, transports=["ws"], plugin_manager=plugin_manager(), token="s3cret")
    scope, sent = await _drive(app, [(b"authorization", b"Bearer s3cret")])
    assert "router" not in scope and sent[1]["type"] == "websocket.send"
    scope, sent = await _drive(app, [(b"authorization", b"Bearer nope")])
    assert [m["type"] for m in sent] == ["websocket.close"] and sent[0]["code"] == 1008


async def test_user_middleware_sees_every_websocket_again() -> None:
    seen: list[str] = []

    class Recorder:
        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send_: Any) -> None:
            seen.append(f"{scope['type']} {scope['path']}")
            await self.app(scope, receive, send_)

    app = create_app(EchoEnv, transports=["ws"], plugin_manager=plugin_manager())
    app.add_middleware(Recorder)
    scope, sent = await _drive(app)
    assert seen == ["websocket /ws"] and "router" in scope
    assert sent[1]["type"] == "websocket.send"


async def test_the_lane_serves_real_sockets() -> None:
    with live_server(EchoEnv) as server:
        ws = await ws_open(server)
        await send(ws, {"type": "reset", "data": {}})
        assert (await recv(ws))["type"] == "observation"
        await send(ws, {"type": "step", "data": {"message": "hi"}})
        reply = await recv(ws)
        assert reply["data"]["observation"]["echoed_message"] == "hi"
        await ws.close()


async def test_a_route_mounted_before_ours_keeps_winning() -> None:
    """Starlette's router takes the first matching route; the lane must not overtake it."""
    from starlette.routing import WebSocketRoute
    from starlette.websockets import WebSocket

    async def mine(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text("mine")
        await websocket.close()

    app = create_app(EchoEnv, transports=["ws"], plugin_manager=plugin_manager())
    app.router.routes.insert(0, WebSocketRoute("/ws", mine))
    _scope, sent = await _drive(app)
    assert [m.get("text") for m in sent if m["type"] == "websocket.send"] == ["mine"]
