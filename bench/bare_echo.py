"""The transport limit: a bare ASGI app that answers like our server, with no framework at all.

``python -m bench.bare_echo --stack default|shipped --templates T.json --ready-file R.json
[--stack-file S.json]``

The app answers a ``step`` frame with the bytes our server sends for the same step (captured from
a real run of our server into ``T.json``: the reply text with its step counter cut out, refilled per
connection), ``reset`` with our reset reply, and ``{"type":"close"}`` with close code 1000. It looks
only at the start of each frame — no JSON parse, no validation, no session object — so whatever it
costs per step is what uvicorn + the WebSocket implementation cost: the floor our server is held to.
It also answers ``POST /sessions``, ``/reset``, ``/step`` and ``DELETE /sessions/{id}`` with our
HTTP bodies, for the HTTP ratio.

With ``--work env`` it is the *floor* instead (target ``floor-shipped``): the same bare app, but a
``step`` does the work no framework can skip — parse the frame (orjson), validate the action
(``EchoAction``'s pydantic-core validator), run ``EchoEnv.step`` (which builds its pydantic
observation) and encode the reply (orjson) — with no session manager, envelope checks or error
handling. Our server's distance to the floor is our framework's cost; the floor's distance to
the bare echo is the env's own Python work, which no server can remove.

Stacks:

* ``default`` — uvicorn's defaults as a plain ``pip install uvicorn websockets`` gives them (the
  pure-Python stack): asyncio loop, h11, uvicorn's default WebSocket implementation
  (``ws="auto"``), ``permessage-deflate`` accepted, bound by uvicorn itself as ``uvicorn.run``
  does. Pinned to asyncio/h11 even if uvloop/httptools happen to be installed, so that the
  reference does not move when our stack does.
* ``shipped`` — run through ``openenv.server.serve`` itself (its ``create_app`` replaced by this
  app), so every setting and the socket set-up are exactly what our server uses, today and after
  any change to ``serve``.
* ``custom`` — ``--loop``/``--http``/``--ws``/``--deflate`` chosen explicitly, with serve()'s other
  settings: to measure a stack before adopting it (bench target ``bare:LOOP:HTTP:WS[:on|off]``).

Both write, at start-up, the resolved stack (loop class, HTTP and WebSocket protocol classes,
compression, uvicorn version) to ``--stack-file``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["build_app", "main", "stack_info"]

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_STEP = '{"type":"step"'
_RESET = '{"type":"reset"'
_CLOSE = '{"type":"close"'
_UNKNOWN = '{"type":"error","data":{"message":"bare echo: unsupported frame","code":"UNKNOWN_TYPE"}}'
_SESSION_HEADER = b"openenv-session-id"

_captured: dict[str, Any] = {}


def _capture_uvicorn_config() -> None:
    """Remember the ``uvicorn.Config`` that gets loaded, to report the resolved stack."""
    import uvicorn

    original = uvicorn.Config.load

    def load(self: Any) -> None:
        original(self)
        _captured["config"] = self

    uvicorn.Config.load = load  # type: ignore[method-assign]


def _name(obj: Any) -> str | None:
    if obj is None:
        return None
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def stack_info() -> dict[str, Any]:
    """The stack this process serves with (call from inside the running server)."""
    import uvicorn

    cfg = _captured.get("config")
    info: dict[str, Any] = {"uvicorn": uvicorn.__version__, "loop": _name(asyncio.get_running_loop())}
    if cfg is not None:
        info.update(
            http=_name(cfg.http_protocol_class),
            ws=_name(cfg.ws_protocol_class),
            ws_per_message_deflate=cfg.ws_per_message_deflate,
            ws_max_size=cfg.ws_max_size,
            ws_ping_interval=cfg.ws_ping_interval,
            access_log=cfg.access_log,
        )
    try:
        import websockets

        info["websockets"] = websockets.__version__
    except ImportError:
        pass
    return info


def build_app(templates: dict[str, Any], stack_file: str | None = None,
              work: str = "none") -> Callable[..., Awaitable[None]]:
    """The bare ASGI app answering with ``templates``, or doing the env's work (see module docstring)."""
    ws = templates["ws"]
    ws_reset: str = ws["reset"]
    ws_parts: list[str] = ws["step_parts"]
    ws_sep: str = ws["step_sep"]
    http = templates.get("http") or {}
    http_reset: bytes = http.get("reset", "{}").encode()
    http_parts: list[str] = http.get("step_parts", ["{}"])
    http_sep: str = http.get("step_sep", "")
    counters: dict[bytes, int] = {}

    async def floor_websocket(receive: Receive, send: Send) -> None:
        import orjson

        from openenv_env_echo.env import EchoEnv
        from openenv_env_echo.models import EchoAction

        validate = EchoAction.__pydantic_validator__.validate_python
        loads, dumps = orjson.loads, orjson.dumps
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        env = EchoEnv()
        while True:
            event = await receive()
            if event["type"] != "websocket.receive":
                return
            text = event.get("text") or ""
            frame = loads(text)
            kind = frame.get("type")
            if kind == "step":
                obs = env.step(validate(frame["data"]))
            elif kind == "reset":
                obs = env.reset()
            elif kind == "close":
                await send({"type": "websocket.close", "code": 1000})
                return
            else:
                await send({"type": "websocket.send", "text": _UNKNOWN})
                continue
            values = obs.__dict__
            meta = values["metadata"]
            body = {"metadata": meta, "echoed_message": values["echoed_message"],
                    "message_length": values["message_length"]}
            payload = {"observation": body, "reward": values["reward"], "done": values["done"]}
            if meta:
                payload["metadata"] = meta
            try:
                await send({"type": "websocket.send",
                            "text": dumps({"type": "observation", "data": payload}).decode()})
            except Exception:  # the client is gone
                return

    async def websocket(receive: Receive, send: Send) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        n = 0
        while True:
            event = await receive()
            if event["type"] != "websocket.receive":
                return
            text = event.get("text") or ""
            if text.startswith(_STEP):
                n += 1
                reply = (ws_sep + str(n)).join(ws_parts)
            elif text.startswith(_RESET):
                n = 0
                reply = ws_reset
            elif text.startswith(_CLOSE):
                await send({"type": "websocket.close", "code": 1000})
                return
            else:
                reply = _UNKNOWN
            try:
                await send({"type": "websocket.send", "text": reply})
            except Exception:  # the client is gone (uvicorn raises an OSError subclass)
                return

    async def respond(send: Send, status: int, body: bytes, sid: bytes | None) -> None:
        headers = [(_SESSION_HEADER, sid)] if sid else []
        headers += [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def http_app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        more = True
        while more:  # drain the request body (bounded by the client's Content-Length)
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            more = message.get("more_body", False)
        sid = None
        for name, value in scope["headers"]:
            if name == _SESSION_HEADER:
                sid = value
                break
        path, method = scope["path"], scope["method"]
        if path == "/step" and method == "POST":
            n = counters.get(sid, 0) + 1 if sid else 1
            if sid:
                counters[sid] = n
            return await respond(send, 200, (http_sep + str(n)).join(http_parts).encode(), sid)
        if path == "/reset" and method == "POST":
            if sid:
                counters[sid] = 0
            return await respond(send, 200, http_reset, sid)
        if path == "/sessions" and method == "POST":
            new = str(uuid.uuid4()).encode()
            counters[new] = 0
            return await respond(send, 201, b'{"session_id":"' + new + b'"}', new)
        if path.startswith("/sessions/") and method == "DELETE":
            key = path.rsplit("/", 1)[1].encode()
            counters.pop(key, None)
            return await respond(send, 200, b'{"session_id":"' + key + b'","closed":true}', None)
        if path == "/health":
            return await respond(send, 200, b'{"status":"healthy"}', None)
        return await respond(send, 404, b'{"detail":"Not Found"}', None)

    async def lifespan(receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if stack_file:
                    _write_json(stack_file, stack_info())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "websocket":
            await (floor_websocket if work == "env" else websocket)(receive, send)
        elif kind == "http":
            await http_app(scope, receive, send)
        elif kind == "lifespan":
            await lifespan(receive, send)

    return app


def _write_json(path: str, data: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


async def _serve_uvicorn(app: Any, ready_file: str, **settings: Any) -> None:
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False, lifespan="on",
                            **settings)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(3000):  # bounded: 30 s
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    if server.started:
        port = server.servers[0].sockets[0].getsockname()[1]
        _write_json(ready_file, {"host": "127.0.0.1", "port": port, "pid": os.getpid()})
    await task


def _runner(loop: str) -> asyncio.Runner:
    if loop == "uvloop":
        import uvloop

        return asyncio.Runner(loop_factory=uvloop.new_event_loop)
    return asyncio.Runner()


def _serve_shipped(app: Any, ready_file: str) -> None:
    import openenv.server as kernel_server

    # serve() (openenv.serving) looks openenv.server.create_app up at call time: hand it the bare
    # app, keep everything else.
    kernel_server.create_app = lambda env, **_: app  # type: ignore[assignment]
    kernel_server.serve("bare-echo", ready_file=ready_file, log_level="warning", host="127.0.0.1", port=0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", choices=["default", "shipped", "custom"], required=True)
    parser.add_argument("--loop", default="asyncio", help="custom stack: asyncio | uvloop")
    parser.add_argument("--http", default="h11", help="custom stack: h11 | httptools")
    parser.add_argument("--ws", default="auto", help="custom stack: websockets-sansio | websockets | wsproto")
    parser.add_argument("--deflate", choices=["on", "off"], default="off", help="custom stack: permessage-deflate")
    parser.add_argument("--templates", required=True, help="JSON reply templates captured from our server")
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--stack-file")
    parser.add_argument("--work", choices=["none", "env"], default="none",
                        help="env: the floor (parse, validate, EchoEnv.step, encode) instead of canned replies")
    args = parser.parse_args(argv)
    with open(args.templates, encoding="utf-8") as f:
        templates = json.load(f)
    _capture_uvicorn_config()
    app = build_app(templates, args.stack_file, args.work)
    if args.stack == "default":
        asyncio.run(_serve_uvicorn(app, args.ready_file, loop="asyncio", http="h11"))
    elif args.stack == "shipped":
        _serve_shipped(app, args.ready_file)
    else:
        # An explicit stack, to weigh a change of ours before making it: the settings serve() uses,
        # with the loop, HTTP and WebSocket implementations and compression chosen.
        settings = {"http": args.http, "ws": args.ws, "ws_per_message_deflate": args.deflate == "on",
                    "ws_max_size": 100 * 1024 * 1024, "timeout_graceful_shutdown": 5}
        runner = _runner(args.loop)
        with runner:
            runner.run(_serve_uvicorn(app, args.ready_file, loop=args.loop, **settings))


if __name__ == "__main__":
    main()
