"""``GET /`` of a served env and the start-up line: a person opening the server's address lands on
the browser page when one is served, else on an index of the routes (never a bare 404), and the
start-up log names the routes and ``/web``."""

from __future__ import annotations

import logging

import httpx
import pytest

from openenv.testing.live import live_server

ENV = "openenv.testing.envs:EchoEnv"


def test_root_redirects_to_the_web_page_when_it_is_served() -> None:
    with live_server(ENV, transports=["ws", "web"]) as srv, httpx.Client(base_url=srv.url) as c:
        r = c.get("/", follow_redirects=False)
        assert r.status_code == 307 and r.headers["location"] == "/web"
        page = c.get("/", follow_redirects=True)
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]


def test_root_lists_the_routes_without_a_web_page() -> None:
    with live_server(ENV, transports=["ws"]) as srv, httpx.Client(base_url=srv.url) as c:
        r = c.get("/")
        assert r.status_code == 200
        doc = r.json()
        assert {"/health", "/schema", "/ws"} <= set(doc["routes"]) and "/web" not in doc["routes"]


def test_the_start_up_line_names_the_routes_and_the_web_page(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="openenv.server"), live_server(ENV, transports=["ws", "web"]):
        pass
    lines = [r.getMessage() for r in caplog.records if "/health" in r.getMessage()]
    assert lines and "/ws" in lines[0] and "open /web in a browser" in lines[0], lines
