"""HTTP routes over real sockets: spec T3 shapes, sessions, one-shot requests, auth, mode, reaping."""

from __future__ import annotations

import asyncio
import hashlib
import time

import pytest
from rest_support import EchoEnv, Serve, bad_factory, wait_until

SID = "OpenEnv-Session-Id"
CAPACITY_1 = {
    "detail": "Server at capacity: 1/1 sessions active. Cannot accept new connections.",
    "code": "CAPACITY_REACHED",
    "active_sessions": 1,
    "max_sessions": 1,
}


async def _new_session(client) -> str:  # type: ignore[no-untyped-def]
    r = await client.post("/sessions")
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


# -- spec T3, exactly -----------------------------------------------------------------------------


async def test_t3_validation_errors_exact(serve: Serve) -> None:
    srv = await serve()
    async with srv.client() as c:
        r = await c.post("/step", json={"action": {"message": ""}})
        assert r.status_code == 422
        [err] = r.json()["detail"]
        assert err.pop("url").startswith("https://errors.pydantic.dev/")
        assert err == {"type": "string_too_short", "loc": ["message"],
                       "msg": "String should have at least 1 character", "input": "", "ctx": {"min_length": 1}}

        r = await c.post("/step", json={"message": "x"})
        assert r.status_code == 422
        assert r.json() == {"detail": [{"type": "missing", "loc": ["body", "action"], "msg": "Field required",
                                        "input": {"message": "x"}}]}

        r = await c.post("/reset", json={"seed": -1})
        assert r.status_code == 422
        assert r.json() == {"detail": [{"type": "greater_than_equal", "loc": ["body", "seed"],
                                        "msg": "Input should be greater than or equal to 0", "input": -1,
                                        "ctx": {"ge": 0}}]}

        r = await c.post("/step", json={"action": {"message": "hi", "bogus": 1}})
        assert r.status_code == 422
        assert [(e["type"], e["loc"]) for e in r.json()["detail"]] == [("extra_forbidden", ["bogus"])]
    # invalid bodies and actions never built an env
    assert EchoEnv.created == 0


async def test_t3_one_shot_bodies_exact(serve: Serve) -> None:
    srv = await serve()
    async with srv.client() as c:
        r = await c.post("/reset", json={"seed": 1, "episode_id": "e1"})
        assert r.status_code == 200
        assert r.headers["OpenEnv-Session"] == "none"
        assert r.json() == {"observation": {"metadata": {}, "echoed_message": "ready", "message_length": 0},
                            "reward": 0.0, "done": False, "metadata": None}

        r = await c.post("/step", json={"action": {"message": "Hello"}, "timeout_s": 5, "request_id": "r1"})
        assert r.status_code == 200
        assert r.headers["OpenEnv-Session"] == "none"
        assert r.json() == {
            "observation": {"metadata": {"original_message": "Hello", "step": 1}, "echoed_message": "Hello",
                            "message_length": 5},
            "reward": 0.5, "done": False, "metadata": {"original_message": "Hello", "step": 1},
        }

        r = await c.get("/state")
        assert r.status_code == 200
        assert r.headers["OpenEnv-Session"] == "none"
        state = r.json()
        assert state["step_count"] == 0 and state["episode_id"] not in (None, "e1")  # a fresh env

        r = await c.post("/reset")  # no body at all
        assert r.status_code == 200 and r.json()["observation"]["echoed_message"] == "ready"
    # every transient env was closed, and none holds a slot
    assert EchoEnv.created == 4
    assert not EchoEnv.live
    assert srv.ctx.sessions.active == 0


async def test_env_exception_and_nan_reward_are_json_500(serve: Serve) -> None:
    srv = await serve()
    async with srv.client() as c:
        r = await c.post("/step", json={"action": {"message": "boom"}})
        assert r.status_code == 500
        assert r.headers["content-type"].startswith("application/json")
        body = r.json()
        assert body["detail"] == "kaboom" and body["code"] == "EXECUTION_ERROR"
        assert r.headers["OpenEnv-Session"] == "none"

        r = await c.post("/step", json={"action": {"message": "nan"}})
        assert r.status_code == 500
        assert r.json() == {"detail": "Non-finite reward: nan", "code": "EXECUTION_ERROR"}

        r = await c.get("/health")  # the server keeps serving
        assert r.json() == {"status": "healthy"}
    assert not EchoEnv.live and srv.ctx.sessions.active == 0


# -- stateful sessions ----------------------------------------------------------------------------


async def test_stateful_episode_through_session_header(serve: Serve) -> None:
    srv = await serve()
    async with srv.client() as c:
        sid = await _new_session(c)
        h = {SID: sid}
        r = await c.post("/reset", json={"seed": 3, "episode_id": "ep-7", "ignored": True}, headers=h)
        assert r.status_code == 200 and "OpenEnv-Session" not in r.headers
        assert r.headers[SID] == sid
        r1 = await c.post("/step", json={"action": {"message": "Hello"}}, headers=h)
        r2 = await c.post("/step", json={"action": {"message": "Hi"}, "timeout_s": 2.5, "request_id": "x"},
                          headers=h)
        assert r1.json()["metadata"]["step"] == 1
        assert r2.json()["metadata"] == {"original_message": "Hi", "step": 2}  # continues the episode
        r = await c.get("/state", headers=h)
        assert r.status_code == 200
        # step kwargs reached env.step (timeout_s); request_id was dropped (not in its signature)
        assert r.json() == {"episode_id": "ep-7", "step_count": 2, "seed": 3, "last_timeout_s": 2.5}

        info = (await c.get(f"/sessions/{sid}")).json()
        assert info["session_id"] == sid and info["step_count"] == 2 and info["transport"] == "http"
        assert info["idle_timeout_s"] == 300.0  # the kernel's default idle TTL applies
    assert EchoEnv.created == 1  # one env served the whole episode


async def test_sessions_are_independent(serve: Serve) -> None:
    srv = await serve(max_sessions=2)
    async with srv.client() as c:
        a, b = await _new_session(c), await _new_session(c)
        await c.post("/reset", json={"episode_id": "A"}, headers={SID: a})
        await c.post("/reset", json={"episode_id": "B"}, headers={SID: b})
        for _ in range(3):
            await c.post("/step", json={"action": {"message": "a"}}, headers={SID: a})
        await c.post("/step", json={"action": {"message": "b"}}, headers={SID: b})
        sa = (await c.get("/state", headers={SID: a})).json()
        sb = (await c.get("/state", headers={SID: b})).json()
        assert (sa["episode_id"], sa["step_count"]) == ("A", 3)
        assert (sb["episode_id"], sb["step_count"]) == ("B", 1)


async def test_errors_in_a_session_keep_it_usable(serve: Serve) -> None:
    srv = await serve()
    async with srv.client() as c:
        sid = await _new_session(c)
        h = {SID: sid}
        await c.post("/reset", json={"episode_id": "e"}, headers=h)
        r = await c.post("/step", json={"action": {"message": ""}}, headers=h)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["message"]
        r = await c.post("/step", json={"action": {"message": "boom"}}, headers=h)
        assert r.status_code == 500 and r.json()["detail"] == "kaboom"
        r = await c.post("/step", json={"action": {"message": "nan"}}, headers=h)
        assert r.status_code == 500 and r.json()["detail"] == "Non-finite reward: nan"
        r = await c.post("/step", json={"action": {"message": "ok"}}, headers=h)
        assert r.status_code == 200
        assert (await c.get("/state", headers=h)).json()["episode_id"] == "e"
        assert srv.ctx.sessions.active == 1


async def test_unknown_session_is_404_everywhere(serve: Serve) -> None:
    srv = await serve()
    async with srv.client() as c:
        h = {SID: "nope"}
        expected = {"detail": "Unknown session_id: nope"}
        for method, path, body in [("POST", "/reset", {}), ("POST", "/step", {"action": {"message": "x"}}),
                                   ("GET", "/state", None), ("GET", "/sessions/nope", None),
                                   ("DELETE", "/sessions/nope", None)]:
            r = await c.request(method, path, json=body, headers=h)
            assert (r.status_code, r.json()) == (404, expected), (method, path)
    assert EchoEnv.created == 0


async def test_close_session_and_attached_close(serve: Serve) -> None:
    srv = await serve(max_sessions=2)
    async with srv.client() as c:
        sid = await _new_session(c)
        r = await c.delete(f"/sessions/{sid}")
        assert r.json() == {"session_id": sid, "closed": True}
        assert (await c.delete(f"/sessions/{sid}")).status_code == 404
        r = await c.post("/step", json={"action": {"message": "x"}}, headers={SID: sid})
        assert r.status_code == 404
        assert not EchoEnv.live

        # A WebSocket attached to the session (as /ws?session_id= does) defers the close to detach.
        sid = await _new_session(c)
        session = srv.ctx.sessions.join(sid)
        r = await c.delete(f"/sessions/{sid}")
        assert r.json() == {"session_id": sid, "closed": False, "closing": True}
        assert (await c.get(f"/sessions/{sid}")).status_code == 200
        await srv.ctx.sessions.detach(session)
        assert (await c.get(f"/sessions/{sid}")).status_code == 404
    assert not EchoEnv.live and srv.ctx.sessions.active == 0


# -- capacity -------------------------------------------------------------------------------------


async def test_one_shot_requests_count_against_capacity(serve: Serve) -> None:
    srv = await serve(max_sessions=1)
    async with srv.client() as c:
        sid = await _new_session(c)
        for method, path, body in [("POST", "/reset", {}), ("POST", "/step", {"action": {"message": "x"}}),
                                   ("GET", "/state", None)]:
            r = await c.request(method, path, json=body)
            assert r.status_code == 503, (method, path)
            assert r.json() == CAPACITY_1
            assert r.headers["OpenEnv-Session"] == "none"
        r = await c.post("/sessions")
        assert (r.status_code, r.json()) == (503, CAPACITY_1)
        # the held session is untouched
        r = await c.post("/step", json={"action": {"message": "still here"}}, headers={SID: sid})
        assert r.status_code == 200
        await c.delete(f"/sessions/{sid}")
        r = await c.post("/reset", json={})
        assert r.status_code == 200 and r.headers["OpenEnv-Session"] == "none"
    assert srv.ctx.sessions.active == 0 and not EchoEnv.live


async def test_factory_failure(serve: Serve) -> None:
    srv = await serve(env=bad_factory)
    async with srv.client() as c:
        r = await c.post("/sessions")
        assert r.status_code == 500
        body = r.json()
        assert body["detail"] == "Environment factory 'bad_factory' failed to create instance."
        assert body["code"] == "FACTORY_ERROR" and body["factory_name"] == "bad_factory"
        assert "no env today" in body["reason"]
        r = await c.post("/reset")
        assert r.status_code == 500 and r.json()["code"] == "FACTORY_ERROR"
        assert r.headers["OpenEnv-Session"] == "none"
    assert srv.ctx.sessions.active == 0


# -- auth and ownership ---------------------------------------------------------------------------


async def test_token_required_before_any_session(serve: Serve) -> None:
    srv = await serve(token="s3cret")
    async with srv.client() as c:
        for method, path in [("POST", "/sessions"), ("POST", "/reset"), ("GET", "/state"),
                             ("DELETE", "/sessions/x")]:
            r = await c.request(method, path)
            assert r.status_code == 401, (method, path)
            assert "token" in r.json()["detail"]
        assert (await c.get("/health")).status_code == 200
    assert EchoEnv.created == 0 and srv.ctx.sessions.active == 0


async def test_ownership_with_token(serve: Serve) -> None:
    srv = await serve(token="s3cret", max_sessions=2)
    auth = {"Authorization": "Bearer s3cret"}
    async with srv.client(headers=auth) as c:
        mine = await _new_session(c)
        # the owner is the principal (a digest of the token, the same on every transport), never the token
        assert srv.ctx.sessions.get(mine).owner == "token:" + hashlib.sha256(b"s3cret").hexdigest()[:32]
        # a session some other principal created (e.g. over another transport with another token)
        theirs = (await srv.ctx.sessions.open(owner="someone-else", transport="http")).id
        for method, path, body, headers in [
            ("DELETE", f"/sessions/{theirs}", None, {}),
            ("GET", f"/sessions/{theirs}", None, {}),
            ("POST", "/step", {"action": {"message": "x"}}, {SID: theirs}),
            ("GET", "/state", None, {SID: theirs}),
        ]:
            r = await c.request(method, path, json=body, headers=headers)
            assert (r.status_code, r.json()) == (404, {"detail": f"Unknown session_id: {theirs}"})
        assert srv.ctx.sessions.get(theirs) is not None  # still alive: nothing was closed
        r = await c.post("/step", json={"action": {"message": "x"}}, headers={SID: mine})
        assert r.status_code == 200
        assert (await c.delete(f"/sessions/{mine}")).json()["closed"] is True
    async with srv.client(headers={"X-OpenEnv-Token": "s3cret"}) as c:  # the alternative header
        assert (await c.post("/sessions")).status_code == 201


# -- mode, JSON errors, limits --------------------------------------------------------------------


async def test_production_mode_refuses_one_shot_control_requests(serve: Serve) -> None:
    srv = await serve(mode="production")
    async with srv.client() as c:
        for method, path in [("POST", "/reset"), ("POST", "/step"), ("GET", "/state")]:
            r = await c.request(method, path, json={"action": {"message": "x"}})
            body = r.json()
            # Upstream has no such routes in production: still a 404, now saying why and what to do.
            assert (r.status_code, body["code"]) == (404, "MODE_ERROR"), path
            assert "Open a session first" in body["detail"], path
        assert EchoEnv.created == 0  # refused before any env was built
        sid = (await c.post("/sessions")).json()["session_id"]  # a held session is driven as on /ws
        r = await c.post("/reset", json={}, headers={SID: sid})
        assert r.status_code == 200
        caps = (await c.get("/capabilities")).json()
        assert caps["rest"]["control_routes"] is True and caps["rest"]["one_shot_control_routes"] is False
    assert EchoEnv.created == 1


async def test_wrong_method_is_json_405(serve: Serve) -> None:
    srv = await serve()
    async with srv.client() as c:
        r = await c.get("/reset")
        assert (r.status_code, r.json()) == (405, {"detail": "Method Not Allowed"})


async def test_malformed_bodies_are_422_and_server_keeps_serving(serve: Serve) -> None:
    srv = await serve()
    async with srv.client() as c:
        r = await c.post("/reset", content=b"{bad", headers={"content-type": "application/json"})
        assert r.status_code == 422
        assert r.json() == {"detail": [{"type": "json_invalid", "loc": ["body", 1], "msg": "JSON decode error",
                                        "input": {}, "ctx": {"error": "Expecting property name enclosed in "
                                                                      "double quotes"}}]}
        r = await c.post("/step", content=b"not json")
        assert r.status_code == 422
        assert r.json()["detail"][0]["ctx"] == {"error": "Expecting value"}
        assert r.json()["detail"][0]["loc"] == ["body", 0]

        r = await c.post("/step")
        assert r.json() == {"detail": [{"type": "missing", "loc": ["body"], "msg": "Field required",
                                        "input": None}]}
        r = await c.post("/step", json=[1, 2])
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body"]
        r = await c.post("/step", json={"action": "x"})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "action"]
        r = await c.post("/step", json={"action": {"message": "x"}, "timeout_s": 0})
        assert [(e["type"], e["loc"]) for e in r.json()["detail"]] == [("greater_than", ["body", "timeout_s"])]
        r = await c.post("/reset", json={"episode_id": "x" * 256})
        assert [(e["type"], e["loc"]) for e in r.json()["detail"]] == [("string_too_long", ["body", "episode_id"])]

        r = await c.post("/reset", json={"seed": "5", "episode_id": "lenient"})  # lax coercion, as upstream
        assert r.status_code == 200
    assert EchoEnv.created == 1 and not EchoEnv.live


async def test_body_size_limit(serve: Serve) -> None:
    srv = await serve(max_message_bytes=2048)
    async with srv.client() as c:
        r = await c.post("/step", json={"action": {"message": "x" * 4096}})
        assert r.status_code == 413
        assert r.json()["code"] == "VALIDATION_ERROR" and "2048" in r.json()["detail"]

        async def chunks():  # no Content-Length: the limit holds while streaming too
            for _ in range(8):
                yield b" " * 512

        r = await c.post("/reset", content=chunks())
        assert r.status_code == 413
        r = await c.post("/step", json={"action": {"message": "fits"}})
        assert r.status_code == 200
    assert EchoEnv.created == 1


# -- idle TTL ---------------------------------------------------------------------------------------


async def test_idle_sessions_are_reaped(serve: Serve) -> None:
    srv = await serve(max_sessions=3, idle_timeout_s=30)
    sessions = srv.ctx.sessions
    async with srv.client() as c:
        idle, busy, attached = [await _new_session(c) for _ in range(3)]
        sessions.join(attached)  # a live connection: never reaped (docs/protocol.md §11 B10)
        for sid in (idle, attached):  # pretend 31 s went by without a request
            sessions.get(sid).last_activity -= 31
        # GET info must not count as activity; a step must
        assert (await c.get(f"/sessions/{idle}")).status_code == 200
        sessions.get(busy).last_activity -= 31
        assert (await c.post("/step", json={"action": {"message": "x"}}, headers={SID: busy})).status_code == 200

        assert await sessions.reap_idle() == [idle]
        r = await c.post("/reset", headers={SID: idle})
        assert (r.status_code, r.json()) == (404, {"detail": f"Unknown session_id: {idle}"})
        assert sessions.active == 2 and len(EchoEnv.live) == 2


async def test_background_reaper_expires_http_sessions(serve: Serve) -> None:
    srv = await serve(idle_timeout_s=0.2)
    async with srv.client() as c:
        sid = await _new_session(c)
        started = time.monotonic()
        statuses: list[int] = []

        # Polling the session info does not keep it alive; the reaper closes it on its own.
        for _ in range(200):
            statuses.append((await c.get(f"/sessions/{sid}")).status_code)
            if statuses[-1] == 404:
                break
            await asyncio.sleep(0.02)
        assert statuses[-1] == 404, f"not reaped after {time.monotonic() - started:.1f}s"
        assert await wait_until(lambda: not EchoEnv.live)
        assert (await c.post("/sessions")).status_code == 201  # the slot was freed


@pytest.mark.parametrize("mode", ["simulation", "production"])
async def test_capabilities_advertise_http_sessions(serve: Serve, mode: str) -> None:
    srv = await serve(mode=mode)
    async with srv.client() as c:
        caps = (await c.get("/capabilities")).json()
    assert "http-sessions" in caps["extensions"]
    assert caps["rest"]["session_header"] == SID
    assert caps["transports"] == ["rest"]
