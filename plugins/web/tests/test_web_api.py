"""The /web API over real HTTP on 127.0.0.1: sessions, capacity, isolation, token, validation."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from openenv.plugins import get_plugin_manager
from openenv.rubric import Rubric
from openenv.testing import wait_until
from openenv.testing.live import live_server

ENV = "openenv.testing.envs:EchoEnv"


class _Says(Rubric):
    """A server rubric with a component of its own: 1.0 for "hi", else 0.25."""

    def evaluate(self, action: Any, observation: Any) -> float:
        return 1.0 if action.message == "hi" else 0.25


def post(client: httpx.Client, path: str, **body: Any) -> httpx.Response:
    return client.post(f"/web/api/{path}", json=body)


def test_registered_as_server_only_transport() -> None:
    entry = get_plugin_manager().catalog.transports.get("web")
    assert entry.client is None
    assert entry.server == "openenv_web.server:WebTransport"


def test_page_is_self_contained() -> None:
    with live_server(ENV, transports=["web"]) as srv, httpx.Client(base_url=srv.url) as c:
        r = c.get("/web")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        html = r.text
        assert "/*@JS@*/" not in html and "/*@CSS@*/" not in html
        assert "sendBeacon" in html and "/web/api/" in html
        for marker in ('src="http', "src='http", 'href="http', "@import", "cdn"):
            assert marker not in html.lower(), marker  # works offline: nothing fetched elsewhere


def test_play_and_close() -> None:
    with live_server(ENV, transports=["web"]) as srv, httpx.Client(base_url=srv.url) as c:
        sid = post(c, "session").json()["session_id"]
        assert post(c, "reset", session_id=sid, seed=3).status_code == 200
        r = post(c, "step", session_id=sid, action={"message": "hello"})
        assert r.status_code == 200, r.text
        assert r.json()["observation"]["echoed_message"] == "hello"
        assert r.json()["reward"] == pytest.approx(0.5)
        assert post(c, "state", session_id=sid).json()["step_count"] == 1
        assert post(c, "close", session_id=sid).json() == {"session_id": sid, "closed": True}
        gone = post(c, "step", session_id=sid, action={"message": "x"})
        assert gone.status_code == 404 and gone.json()["code"] == "SESSION_ERROR"
        assert srv.app.state.ctx.sessions.active == 0


def test_validation_error_located_in_action() -> None:
    with live_server(ENV, transports=["web"]) as srv, httpx.Client(base_url=srv.url) as c:
        sid = post(c, "session").json()["session_id"]
        post(c, "reset", session_id=sid)
        r = post(c, "step", session_id=sid, action={"message": ""})
        assert r.status_code == 422
        assert r.json()["detail"][0]["loc"] == ["message"]
        bad = post(c, "step", session_id=sid, action="hello")
        assert bad.status_code == 422
        assert post(c, "step", session_id=sid, action={"message": "ok"}).status_code == 200  # still serving


def test_sessions_are_independent() -> None:
    with live_server(ENV, transports=["web"]) as srv, httpx.Client(base_url=srv.url) as c:
        a = post(c, "session").json()["session_id"]
        b = post(c, "session").json()["session_id"]
        assert a != b
        for sid in (a, b):
            post(c, "reset", session_id=sid)
        post(c, "step", session_id=a, action={"message": "one"})
        post(c, "step", session_id=a, action={"message": "two"})
        assert post(c, "state", session_id=a).json()["step_count"] == 2
        assert post(c, "state", session_id=b).json()["step_count"] == 0


def test_capacity_is_the_managers() -> None:
    with live_server(ENV, transports=["web"], max_sessions=1) as srv, httpx.Client(base_url=srv.url) as c:
        first = post(c, "session").json()["session_id"]
        full = post(c, "session")
        assert full.status_code == 503
        assert full.json()["code"] == "CAPACITY_REACHED" and "capacity" in full.json()["detail"]
        post(c, "close", session_id=first)
        assert post(c, "session").status_code == 201


def test_idle_session_is_reaped() -> None:
    with live_server(ENV, transports=["web"], idle_timeout_s=0.2) as srv, httpx.Client(base_url=srv.url) as c:
        sid = post(c, "session").json()["session_id"]
        wait_until(lambda: not srv.app.state.ctx.sessions.active, timeout_s=5, interval_s=0.05)
        assert srv.app.state.ctx.sessions.active == 0
        assert post(c, "reset", session_id=sid).status_code == 404


def test_missing_and_foreign_session_ids() -> None:
    with live_server(ENV, transports=["web"]) as srv, httpx.Client(base_url=srv.url) as c:
        r = post(c, "step", action={"message": "x"})
        assert r.status_code == 400 and "POST /web/api/session" in r.json()["detail"]
        assert post(c, "step", session_id="nope", action={"message": "x"}).status_code == 404
        assert c.post("/web/api/step", content=b"{not json").status_code == 400


def test_token_protects_page_and_api() -> None:
    with live_server(ENV, transports=["web"], token="s3cret") as srv:
        with httpx.Client(base_url=srv.url) as anon:
            assert anon.get("/web").status_code == 401
            assert post(anon, "session").status_code == 401
        auth = {"Authorization": "Bearer s3cret"}
        with httpx.Client(base_url=srv.url, headers=auth) as c:
            assert c.get("/web").status_code == 200
            sid = post(c, "session").json()["session_id"]
            assert post(c, "reset", session_id=sid).status_code == 200
        with httpx.Client(base_url=srv.url, headers={"Authorization": "Bearer other"}) as other:
            assert post(other, "reset", session_id=sid).status_code == 401


@pytest.mark.parametrize(("method", "path"), [
    ("PUT", "/web"), ("POST", "/web"), ("DELETE", "/web"), ("GET", "/web/api/step"),
    ("PUT", "/web/api/session"), ("DELETE", "/web/api/close"), ("GET", "/web/api/schema")])
def test_a_wrong_method_without_the_token_is_refused_before_routing(method: str, path: str) -> None:
    # Issue 34, item 4: these answered 405 and an Allow header, telling an unauthenticated caller
    # which routes exist; every other route answers 401 before routing.
    with live_server(ENV, transports=["web"], token="s3cret") as srv:
        with httpx.Client(base_url=srv.url) as anon:
            reply = anon.request(method, path)
            assert reply.status_code == 401, reply.text
            assert "allow" not in reply.headers and reply.json()["code"] == "AUTH_ERROR"
        with httpx.Client(base_url=srv.url, headers={"Authorization": "Bearer s3cret"}) as c:
            reply = c.request(method, path)
            assert reply.status_code == 405 and reply.json()["code"] == "METHOD_NOT_ALLOWED"
            assert reply.headers["allow"] == ("GET, HEAD" if path == "/web" else "POST")


def test_token_cookie_flow() -> None:
    """``/web?token=`` sets the HttpOnly cookie and the page's API calls are authorised by it.

    The kernel's auth middleware lets ``WebTransport.self_authenticated_paths`` through to the
    transport's own check (header or cookie); every other path still needs the header.
    """
    with live_server(ENV, transports=["web"], token="s3cret") as srv, httpx.Client(base_url=srv.url) as c:
        first = c.get("/web", params={"token": "s3cret"}, follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/web"
        cookie = first.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/web" in cookie
        assert c.get("/web").status_code == 200  # the cookie jar now carries the token
        schemas = post(c, "schema").json()
        assert "action" in schemas and schemas["observation"]["type"] == "object"  # (image fields declared there)
        sid = post(c, "session").json()["session_id"]
        assert post(c, "reset", session_id=sid).status_code == 200
        assert c.get("/web", params={"token": "wrong"}).status_code == 401
        c.cookies.clear()
        assert c.get("/web").status_code == 401
        assert c.get("/schema").status_code == 401  # the cookie opens only the page's own paths


def test_self_authenticated_paths_are_the_routes() -> None:
    from openenv_web.server import WebTransport

    with live_server(ENV, transports=["web"]) as srv:
        web = next(t for t in srv.app.state.ctx.transports if isinstance(t, WebTransport))
        assert {r.path for r in web.routes()} == set(WebTransport.self_authenticated_paths)


def test_server_rubric_reward_and_components_reach_the_page() -> None:
    # The page never sends the opt-in header other clients use: it always gets the components.
    with (live_server(ENV, transports=["web"], rubric=_Says(name="says_hi")) as srv,
          httpx.Client(base_url=srv.url) as c):
        sid = post(c, "session").json()["session_id"]
        post(c, "reset", session_id=sid)
        hi = post(c, "step", session_id=sid, action={"message": "hi"}).json()
        other = post(c, "step", session_id=sid, action={"message": "hello"}).json()
    assert (hi["reward"], hi["reward_components"]) == (1.0, {"says_hi": 1.0})
    assert (other["reward"], other["reward_components"]) == (0.25, {"says_hi": 0.25})
