"""Deeply nested JSON is a structured client error on every route and transport (issue 21, item 3).

The depth limit (``openenv.limits.MAX_JSON_DEPTH``, 64) is applied where each transport parses, so
the answer is the transport's own "invalid JSON" error naming the limit, and a WebSocket session
that sent it goes on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from websockets.sync.client import connect

from openenv.env import Environment
from openenv.limits import MAX_JSON_DEPTH
from openenv.testing import LiveServer as Served
from openenv.testing import live_server as served
from openenv.tools import CallToolAction, CallToolObservation
from openenv.types import State


class ToolEnv(Environment[CallToolAction, CallToolObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False

    def reset(self, seed: int | None = None, episode_id: str | None = None) -> CallToolObservation:
        return CallToolObservation(tool_name="", result={"count": 0})

    def step(self, action: CallToolAction) -> CallToolObservation:
        return CallToolObservation(tool_name=action.tool_name, result={"args": action.arguments})

    @property
    def state(self) -> State:
        return State()


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def deep_action(depth: int) -> str:
    return '{"type":"call_tool","tool_name":"t","arguments":{"x":' + nested(depth) + "}}"


DEPTHS = [MAX_JSON_DEPTH + 10, 5000, 100_000]  # just past the limit; past orjson's; past Python's stack


@pytest.fixture(scope="module")
def server() -> Iterator[Served]:
    with served(ToolEnv, transports=["ws", "rest", "mcp", "web"]) as srv:
        yield srv


@pytest.mark.parametrize("depth", DEPTHS)
def test_ws_answers_an_error_frame_and_keeps_the_session(server: Served, depth: int) -> None:
    with connect(server.ws_url, open_timeout=10, compression=None, proxy=None, max_size=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": {}}))
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        ws.send('{"type":"step","data":' + deep_action(depth) + "}")
        reply = json.loads(ws.recv(timeout=10))
        assert reply["type"] == "error" and reply["data"]["code"] == "INVALID_JSON"
        assert f"nested deeper than {MAX_JSON_DEPTH} levels" in reply["data"]["message"]
        ws.send(json.dumps({"type": "step", "data": {"type": "call_tool", "tool_name": "t",
                                                      "arguments": {"x": [[1]]}}}))
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"  # the session goes on


def test_json_at_the_limit_is_accepted(server: Served) -> None:
    with connect(server.ws_url, open_timeout=10, compression=None, proxy=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": {}}))
        ws.recv(timeout=10)
        ws.send('{"type":"step","data":' + deep_action(MAX_JSON_DEPTH - 4) + "}")
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"


@pytest.mark.parametrize("depth", DEPTHS)
def test_ws_mcp_answers_a_json_rpc_parse_error(server: Served, depth: int) -> None:
    with connect(server.url.replace("http", "ws", 1) + "/mcp", open_timeout=10, compression=None, proxy=None,
                 max_size=None) as ws:
        ws.send('{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":' + nested(depth) + "}}")
        reply = json.loads(ws.recv(timeout=10))
        assert reply["error"]["code"] == -32700 and "nested deeper" in reply["error"]["message"]
        ws.send(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        assert json.loads(ws.recv(timeout=10))["id"] == 2  # the connection goes on


@pytest.mark.parametrize("depth", DEPTHS)
def test_post_mcp_answers_a_json_rpc_parse_error(server: Served, depth: int) -> None:
    body = '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":' + nested(depth) + "}}"
    r = httpx.post(server.url + "/mcp", content=body, headers={"content-type": "application/json"}, timeout=10)
    assert r.status_code < 500 and r.headers["content-type"].startswith("application/json")
    assert r.json()["error"]["code"] == -32700


@pytest.mark.parametrize("route", ["/step", "/reset"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_rest_answers_422_naming_the_limit(server: Served, route: str, depth: int) -> None:
    body = ('{"action":' + deep_action(depth) + "}" if route == "/step"
            else '{"seed":1,"extra":' + nested(depth) + "}")
    r = httpx.post(server.url + route, content=body, headers={"content-type": "application/json"}, timeout=10)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["type"] == "json_invalid" and "nested deeper" in detail["ctx"]["error"]


@pytest.mark.parametrize("route", ["step", "reset", "session"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_web_api_answers_422_naming_the_limit(server: Served, route: str, depth: int) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        sid = client.post("/web/api/session", content=b"{}").json()["session_id"]
        body = '{"session_id":"' + sid + '","action":' + deep_action(depth) + "}"
        r = client.post(f"/web/api/{route}", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422 and r.headers["content-type"].startswith("application/json"), r.text
        assert r.json()["code"] == "VALIDATION_ERROR" and r.json()["max_json_depth"] == MAX_JSON_DEPTH
        assert f"nested deeper than {MAX_JSON_DEPTH} levels" in r.json()["detail"]
        # The connection and the session go on.
        ok = client.post("/web/api/reset", content=json.dumps({"session_id": sid}).encode())
        assert ok.status_code == 200, ok.text
        client.post("/web/api/close", content=json.dumps({"session_id": sid}).encode())
