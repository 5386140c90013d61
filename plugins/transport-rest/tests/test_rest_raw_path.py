"""The raw-ASGI control routes over real sockets: exact bytes, limits, methods, headers, auth.

``/reset``, ``/step`` and ``/state`` are served by hand-written ASGI endpoints (no Starlette
request/response objects, no Pydantic envelope model); these tests pin what a client sees.
"""

from __future__ import annotations

import hashlib

import pytest
from rest_support import EchoEnv, Serve, raw_http

SID = "OpenEnv-Session-Id"
STEP_HELLO = (b'{"observation":{"metadata":{"original_message":"Hello","step":%d},"echoed_message":"Hello",'
              b'"message_length":5},"reward":0.5,"done":false,"metadata":{"original_message":"Hello","step":%d}}')
RESET_BODY = (b'{"observation":{"metadata":{},"echoed_message":"ready","message_length":0},"reward":0.0,'
              b'"done":false,"metadata":null}')
NOT_ALLOWED = b'{"detail":"Method Not Allowed"}'


async def _session(c) -> str:  # type: ignore[no-untyped-def]
    r = await c.post("/sessions")
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


def _ours(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The headers the app wrote, in order (uvicorn adds date/server in front)."""
    return [(k, v) for k, v in headers if k not in ("date", "server")]


async def test_session_replies_byte_for_byte_in_header_order(serve: Serve) -> None:
    srv = await serve()
    async with srv.client() as c:
        sid = await _session(c)
    step = f"POST /step HTTP/1.1\r\nhost: x\r\n{SID}: {sid}\r\ncontent-type: application/json\r\n" \
           "content-length: 30\r\n\r\n".encode() + b'{"action":{"message":"Hello"}}'
    for n in (1, 2, 3):  # the session keeps its episode across connections
        status, headers, body = await raw_http(srv.url, step)
        assert status == 200
        assert body == STEP_HELLO % (n, n)
        assert _ours(headers) == [("openenv-session-id", sid), ("content-length", str(len(body))),
                                  ("content-type", "application/json")]
    status, headers, body = await raw_http(
        srv.url, f"POST /reset HTTP/1.1\r\nhost: x\r\n{SID}: {sid}\r\ncontent-length: 0\r\n\r\n".encode())
    assert (status, body) == (200, RESET_BODY)
    assert _ours(headers)[0] == ("openenv-session-id", sid)
    status, headers, body = await raw_http(srv.url, f"GET /state HTTP/1.1\r\nhost: x\r\n{SID}: {sid}\r\n\r\n".encode())
    assert status == 200 and body.startswith(b'{"episode_id":"') and body.endswith(b'"step_count":0,"seed":null}')
    assert _ours(headers) == [("openenv-session-id", sid), ("content-length", str(len(body))),
                              ("content-type", "application/json")]


async def test_one_shot_reply_headers(serve: Serve) -> None:
    srv = await serve()
    status, headers, body = await raw_http(
        srv.url, b"POST /step HTTP/1.1\r\nhost: x\r\ncontent-length: 30\r\n\r\n" + b'{"action":{"message":"Hello"}}')
    assert (status, body) == (200, STEP_HELLO % (1, 1))
    assert _ours(headers) == [("openenv-session", "none"), ("content-length", str(len(body))),
                              ("content-type", "application/json")]
    # a one-shot error raised after the env was built gets the marker appended, as before
    status, headers, body = await raw_http(
        srv.url, b"POST /step HTTP/1.1\r\nhost: x\r\ncontent-length: 29\r\n\r\n" + b'{"action":{"message":"boom"}}')
    assert status == 500 and body == b'{"detail":"kaboom","code":"EXECUTION_ERROR","exception":"ValueError"}'
    assert _ours(headers) == [("content-length", str(len(body))), ("content-type", "application/json"),
                              ("openenv-session", "none")]
    assert not EchoEnv.live and srv.ctx.sessions.active == 0


@pytest.mark.parametrize("method, path, allow", [
    ("GET", "/step", {"POST"}), ("PUT", "/step", {"POST"}), ("DELETE", "/reset", {"POST"}),
    ("GET", "/reset", {"POST"}), ("POST", "/state", {"GET", "HEAD"}), ("PATCH", "/state", {"GET", "HEAD"}),
])
async def test_wrong_method_on_a_hot_route_is_json_405(serve: Serve, method: str, path: str,
                                                       allow: set[str]) -> None:
    srv = await serve()
    async with srv.client() as c:
        sid = await _session(c)
        r = await c.request(method, path, json={"action": {"message": "x"}}, headers={SID: sid})
        assert r.status_code == 405
        assert r.content == NOT_ALLOWED
        assert r.headers["content-type"] == "application/json"
        assert set(r.headers["allow"].split(", ")) == allow
        assert srv.ctx.sessions.get(sid).step_count == 0  # nothing ran


async def test_head_state_has_headers_and_no_body(serve: Serve) -> None:
    srv = await serve()
    async with srv.client() as c:
        sid = await _session(c)
        got = await c.get("/state", headers={SID: sid})
        head = await c.head("/state", headers={SID: sid})
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(got.content))
    assert head.headers[SID] == sid


async def test_bad_bodies_on_a_session_are_exact_422s(serve: Serve) -> None:
    srv = await serve()
    async with srv.client() as c:
        sid = await _session(c)
        h = {SID: sid, "content-type": "application/json"}
        cases = [
            (b"{bad", b'{"detail":[{"type":"json_invalid","loc":["body",1],"msg":"JSON decode error","input":{},'
                      b'"ctx":{"error":"Expecting property name enclosed in double quotes"}}]}'),
            (b"", b'{"detail":[{"type":"missing","loc":["body"],"msg":"Field required","input":null}]}'),
            (b"  \n", b'{"detail":[{"type":"missing","loc":["body"],"msg":"Field required","input":null}]}'),
            (b"[1,2]", b'{"detail":[{"type":"model_type","loc":["body"],"msg":"Input should be a valid '
                       b'dictionary or instance of StepRequest","input":[1,2],"ctx":{"class_name":"StepRequest"}}]}'),
            (b'{"action":"x"}', b'{"detail":[{"type":"dict_type","loc":["body","action"],"msg":"Input should be '
                                b'a valid dictionary","input":"x"}]}'),
            (b'{"action":{"message":"x"},"timeout_s":-1.0}',
             b'{"detail":[{"type":"greater_than","loc":["body","timeout_s"],"msg":"Input should be greater than 0",'
             b'"input":-1.0,"ctx":{"gt":0.0}}]}'),
        ]
        for raw, expected in cases:
            r = await c.post("/step", content=raw, headers=h)
            assert (r.status_code, r.content) == (422, expected), raw
        r = await c.post("/reset", content=b"[1]", headers=h)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body"]
        r = await c.post("/step", json={"action": {"message": ""}}, headers=h)  # the env's action schema
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["message"]
        # the session was untouched by all of it and still works
        assert srv.ctx.sessions.get(sid).step_count == 0
        r = await c.post("/step", json={"action": {"message": "Hello"}}, headers=h)
        assert (r.status_code, r.content) == (200, STEP_HELLO % (1, 1))
    assert EchoEnv.created == 1


async def test_lax_envelope_values_still_work(serve: Serve) -> None:
    """Values Pydantic coerces (int timeout, string seed) are accepted exactly as before."""
    srv = await serve()
    async with srv.client() as c:
        sid = await _session(c)
        h = {SID: sid}
        assert (await c.post("/reset", json={"seed": "7", "episode_id": "e"}, headers=h)).status_code == 200
        r = await c.post("/step", json={"action": {"message": "Hello"}, "timeout_s": 4, "request_id": "q"},
                         headers=h)
        assert r.status_code == 200
        state = (await c.get("/state", headers=h)).json()
    # EchoEnv records what reached reset/step: the coerced seed and a float timeout
    assert state == {"episode_id": "e", "step_count": 1, "seed": 7, "last_timeout_s": 4.0}
    assert isinstance(state["last_timeout_s"], float)


async def test_unknown_empty_and_duplicate_session_headers(serve: Serve) -> None:
    srv = await serve(max_sessions=2)
    async with srv.client() as c:
        sid = await _session(c)
        for bad in ("nope", ""):
            for method, path, body in [("POST", "/step", {"action": {"message": "x"}}), ("POST", "/reset", {}),
                                       ("GET", "/state", None)]:
                r = await c.request(method, path, json=body, headers={SID: bad})
                assert (r.status_code, r.content) == (404, b'{"detail":"Unknown session_id: %s"}' % bad.encode())
        # Two session headers: the first one counts (as Starlette's headers.get did).
        r = await c.post("/step", json={"action": {"message": "Hello"}}, headers=[(SID, sid), (SID, "nope")])
        assert r.status_code == 200 and r.headers[SID] == sid
        r = await c.post("/step", json={"action": {"message": "Hello"}}, headers=[(SID, "nope"), (SID, sid)])
        assert r.status_code == 404
        # No header at all: the one-shot path (a transient env, closed again).
        r = await c.post("/step", json={"action": {"message": "Hello"}})
        assert r.status_code == 200 and r.headers["OpenEnv-Session"] == "none" and SID not in r.headers
    assert EchoEnv.created == 2 and len(EchoEnv.live) == 1


async def test_body_limit_on_the_raw_path(serve: Serve) -> None:
    srv = await serve(max_message_bytes=2048)
    async with srv.client() as c:
        sid = await _session(c)
    # A declared size over the limit is refused before any of the body is sent.
    status, _, body = await raw_http(
        srv.url, f"POST /step HTTP/1.1\r\nhost: x\r\n{SID}: {sid}\r\ncontent-length: 1000000000\r\n\r\n".encode())
    assert status == 413
    assert body == (b'{"detail":"Request body of 1000000000 bytes exceeds the server limit of 2048 bytes '
                    b'(max_message_bytes). Send a smaller body or raise the limit.","code":"VALIDATION_ERROR"}')
    async with srv.client() as c:
        # A streamed body without Content-Length is cut off once it passes the limit.
        async def chunks():  # type: ignore[no-untyped-def]
            for _ in range(8):
                yield b" " * 512

        r = await c.post("/step", content=chunks(), headers={SID: sid})
        assert r.status_code == 413 and r.json()["code"] == "VALIDATION_ERROR"
        # Exactly at the limit is fine; one byte over is not.
        action = b'{"action":{"message":"Hello"}}'
        r = await c.post("/step", content=action + b" " * (2048 - len(action)), headers={SID: sid})
        assert (r.status_code, r.content) == (200, STEP_HELLO % (1, 1))
        r = await c.post("/step", content=action + b" " * (2049 - len(action)), headers={SID: sid})
        assert r.status_code == 413 and "2049 bytes" in r.json()["detail"]
        assert srv.ctx.sessions.get(sid).step_count == 1


async def test_client_leaving_mid_body_leaves_the_server_serving(serve: Serve) -> None:
    srv = await serve(max_sessions=2)
    async with srv.client() as c:
        sid = await _session(c)
    for headers in (f"{SID}: {sid}\r\n", ""):  # session-bound and one-shot
        await raw_http(srv.url, f"POST /step HTTP/1.1\r\nhost: x\r\n{headers}content-length: 100\r\n\r\n".encode()
                       + b'{"action":', close_after_send=True)
    async with srv.client() as c:
        r = await c.post("/step", json={"action": {"message": "Hello"}}, headers={SID: sid})
        assert (r.status_code, r.content) == (200, STEP_HELLO % (1, 1))
    # no transient env was built for the abandoned one-shot request; the session is intact
    assert EchoEnv.created == 1 and srv.ctx.sessions.active == 1


async def test_token_auth_on_hot_routes(serve: Serve) -> None:
    srv = await serve(token="s3cret", max_sessions=2)
    async with srv.client(headers={"Authorization": "Bearer s3cret"}) as c:
        sid = await _session(c)
    async with srv.client() as c:
        for method, path in [("POST", "/step"), ("POST", "/reset"), ("GET", "/state")]:
            r = await c.request(method, path, json={"action": {"message": "x"}},
                                headers={SID: sid, "Authorization": "Bearer wrong"})
            assert r.status_code == 401 and "token" in r.json()["detail"], path
        # The same token through the alternative header is the same principal: the owner's session.
        r = await c.post("/step", json={"action": {"message": "Hello"}},
                         headers={SID: sid, "X-OpenEnv-Token": "s3cret"})
        assert (r.status_code, r.content) == (200, STEP_HELLO % (1, 1))
        owner = "token:" + hashlib.sha256(b"s3cret").hexdigest()[:32]
        assert srv.ctx.sessions.get(sid).owner == owner
        # Another principal's session looks unknown on every hot route, and is left alone.
        theirs = (await srv.ctx.sessions.open(owner="someone-else", transport="http")).id
        for method, path, body in [("POST", "/step", {"action": {"message": "x"}}), ("POST", "/reset", {}),
                                   ("GET", "/state", None)]:
            r = await c.request(method, path, json=body, headers={SID: theirs, "X-OpenEnv-Token": "s3cret"})
            assert (r.status_code, r.json()) == (404, {"detail": f"Unknown session_id: {theirs}"})
        assert srv.ctx.sessions.get(theirs).step_count == 0


async def test_user_middleware_sees_hot_routes_again() -> None:
    """The kernel's direct lane skips Starlette only while nothing else is mounted (in-process)."""
    import httpx
    from rest_support import make_plugin_manager

    from openenv.server import create_app

    seen: list[str] = []

    class Recorder:
        def __init__(self, app):  # type: ignore[no-untyped-def]
            self.app = app

        async def __call__(self, scope, receive, send):  # type: ignore[no-untyped-def]
            if scope["type"] == "http":
                seen.append(f"{scope['method']} {scope['path']}")
            await self.app(scope, receive, send)

    for middleware in (False, True):
        app = create_app(EchoEnv, plugin_manager=make_plugin_manager(), transports=["rest"])
        if middleware:
            app.add_middleware(Recorder)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            sid = await _session(c)
            r = await c.post("/step", json={"action": {"message": "Hello"}}, headers={SID: sid})
            assert r.status_code == 200 and r.content == STEP_HELLO % (1, 1)
            assert (await c.get("/step")).content == NOT_ALLOWED  # a wrong method still gets the JSON 405
    assert seen == ["POST /sessions", "POST /step", "GET /step"]
