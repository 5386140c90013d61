"""The ``/harness`` channel (upstream's RFC 005 WebSocket, docs/protocol.md §6.3) and a harness env
over ``/ws`` in simulation mode, on a real server (openenv.testing.live_server) with the real turn
agent: streamed events, bad input, crashed and hung harnesses, capacity, auth, limits, and a count
of the agent's processes after every session."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from agentic_support import TurnEnv, processes_with
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from openenv.testing import EchoEnv, wait_until
from openenv.testing.live import live_server
from openenv_gateway import CaptureGateway

pytestmark = pytest.mark.requires_plugins("transport-ws")


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch, gateway: CaptureGateway) -> Iterator[str]:
    """A fresh process marker for TurnEnv (and its gateway); afterwards no agent process may be left."""
    mark = "openenv-turn-" + uuid.uuid4().hex
    monkeypatch.setattr(TurnEnv, "marker", mark)
    monkeypatch.setattr(TurnEnv, "gateway", gateway)
    yield mark
    assert wait_until(lambda: processes_with(mark) == [], timeout_s=15), processes_with(mark)


def _open(url: str, path: str = "/harness", **kw: Any) -> ClientConnection:
    return connect(url.replace("http://", "ws://") + path, open_timeout=10, **kw)


def _recv(ws: ClientConnection) -> dict[str, Any]:
    return json.loads(ws.recv(timeout=30))  # type: ignore[no-any-return]


def _turn(ws: ClientConnection, content: str) -> list[dict[str, Any]]:
    """Send one message; the frames up to ``turn_complete`` or a terminal ``error``."""
    ws.send(json.dumps({"type": "message", "content": content}))
    frames = []
    while True:
        frames.append(_recv(ws))
        if frames[-1]["type"] in ("turn_complete", "error"):
            return frames


def _closed(ws: ClientConnection) -> int | None:
    with pytest.raises(ConnectionClosed):
        ws.recv(timeout=10)
    return ws.close_code


def test_harness_streams_each_turns_events_and_survives_bad_frames(marker: str, gateway: CaptureGateway,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    traces: list[Any] = []
    close_episode = gateway.close_episode
    monkeypatch.setattr(gateway, "close_episode", lambda key: traces.append(close_episode(key)) or traces[-1])
    server_cm = live_server(TurnEnv, transports=["ws", "harness"], mode="production", max_sessions=2)
    with server_cm as server, _open(server.url) as ws, _open(server.url) as other:
        started = _recv(ws)
        assert started["type"] == "session_started" and started["data"]["harness"] == "turn-agent"
        assert _recv(other)["data"]["session_id"] != started["data"]["session_id"]
        frames = _turn(ws, "both")
        assert [f["type"] for f in frames] == ["llm_request", "llm_response", "tool_call", "tool_result",
                                               "turn_complete"]
        assert all(isinstance(f["timestamp"], float) for f in frames)
        assert frames[2]["data"] == {"tool_name": "env_add", "arguments": {"a": 2, "b": 3}}
        assert frames[-1]["data"] == {"response": "ok 1 / 5"}
        ws.send("{not json")
        bad = _recv(ws)
        assert bad["type"] == "protocol_error" and bad["data"]["code"] == "INVALID_JSON"
        assert bad["data"]["message"].startswith("Invalid JSON: ")
        shapes = ({"type": "message"}, {"type": "step", "content": "x"}, [1], {"type": "message", "content": 3})
        for shape in shapes:
            ws.send(json.dumps(shape))
            assert _recv(ws)["type"] == "protocol_error"
        ws.send(b"\x00binary")
        assert _recv(ws)["data"]["code"] == "INVALID_JSON"
        assert [f["type"] for f in _turn(ws, "hello")] == ["text_output", "turn_complete"]
        assert _turn(ws, "done")[-1]["data"] == {"response": "finished", "done": True}
        # a crash: the terminal error frame, then close; the other session goes on
        crashed = _turn(ws, "crash")
        assert [f["type"] for f in crashed] == ["text_output", "error"]
        assert crashed[-1]["data"] == {"message": "harness event stream ended without a TURN_COMPLETE event",
                                       "recoverable": False}
        assert _closed(ws) == 1000
        assert _turn(other, "hello")[-1]["data"]["response"] == "echo: hello"
        assert len(processes_with(marker)) == 1
    # the model call of the "both" turn was captured in that harness run's gateway episode
    assert sorted(len(trace.turns) for trace in traces) == [0, 1]


def test_a_hung_harness_times_out_and_a_vanished_client_ends_its_session(marker: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TurnEnv, "session_timeout_s", 1.0)
    with live_server(TurnEnv, transports=["ws", "harness"], mode="production", max_sessions=2) as server:
        with _open(server.url) as ws:
            _recv(ws)
            frames = _turn(ws, "hang")
            assert [f["type"] for f in frames] == ["text_output", "error"]
            assert frames[-1]["data"] == {"message": "harness turn exceeded 1.0 seconds", "recoverable": False}
            assert _closed(ws) == 1000
        with _open(server.url) as ws:
            _recv(ws)
            ws.send(json.dumps({"type": "message", "content": "spawn"}))
            assert _recv(ws)["type"] == "turn_complete"
            ws.send(json.dumps({"type": "message", "content": "hang"}))
            assert _recv(ws)["type"] == "text_output"
            assert len(processes_with(marker)) == 2  # the agent and its helper
            ws.close()  # mid-turn
        assert wait_until(lambda: processes_with(marker) == [], timeout_s=15)
        assert wait_until(lambda: server.app.state.ctx.sessions.active == 0)


def test_capacity_auth_and_frame_limits_are_those_of_ws(marker: str) -> None:
    with live_server(TurnEnv, transports=["ws", "harness"], mode="production", max_sessions=1, token="s3cret",
                     max_message_bytes=2000, transport_options={"harness": {"first_frame_timeout_s": 1.0}}) as server:
        with pytest.raises(InvalidStatus):
            _open(server.url)
        auth = {"Authorization": "Bearer s3cret"}
        with _open(server.url, additional_headers=auth) as ws:
            _recv(ws)
            with _open(server.url, additional_headers=auth) as refused:
                full = _recv(refused)
                assert full["type"] == "error" and full["data"]["code"] == "CAPACITY_REACHED"
                assert set(full["data"]) == {"message", "code"}
                assert _closed(refused) == 1000
            assert _turn(ws, "hello")[-1]["type"] == "turn_complete"
            ws.send(json.dumps({"type": "message", "content": "x" * 3000}))
            assert _closed(ws) == 1009
        assert wait_until(lambda: server.app.state.ctx.sessions.active == 0)
        with _open(server.url, additional_headers=auth) as quiet:
            assert _recv(quiet)["type"] == "session_started"
            assert _closed(quiet) == 1008  # no message within first_frame_timeout_s


def test_simulation_mode_drives_the_env_over_ws_and_refuses_harness(marker: str) -> None:
    with live_server(TurnEnv, transports=["ws", "harness"], max_sessions=1) as server:
        with _open(server.url) as ws:
            refusal = _recv(ws)
            assert refusal["type"] == "error" and refusal["data"]["code"] == "MODE_ERROR"
            assert "production" in refusal["data"]["message"]
            assert _closed(ws) == 1000
        with _open(server.url, "/ws") as ws:
            ws.send(json.dumps({"type": "reset", "data": {}}))
            reset = _recv(ws)["data"]
            assert reset["observation"]["metadata"]["injected_tools"] == ["env_add"]
            ws.send(json.dumps({"type": "step", "data": {"message": "tool env_add {\"a\": 20, \"b\": 22}"}}))
            turn = _recv(ws)["data"]
            meta = turn["observation"]["metadata"]
            assert (meta["response"], meta["turn_number"], turn["done"]) == ("42", 1, False)
            assert [e["type"] for e in meta["turn_events"]] == ["tool_call", "tool_result", "turn_complete"]
            ws.send(json.dumps({"type": "step", "data": {"type": "call_tool", "tool_name": "add",
                                                         "arguments": {"a": 1, "b": 2}}}))
            assert _recv(ws)["data"]["observation"]["result"]["data"] == 3
            ws.send(json.dumps({"type": "step", "data": {"message": "crash"}}))
            crashed = _recv(ws)["data"]
            assert crashed["done"] and crashed["observation"]["metadata"]["error_type"] == "harness_crashed"
            ws.send(json.dumps({"type": "step", "data": {"message": "hello"}}))
            assert _recv(ws)["type"] == "error"  # no active episode until the next reset
            ws.send(json.dumps({"type": "reset", "data": {}}))
            _recv(ws)
            ws.send(json.dumps({"type": "step", "data": {"message": "hi"}}))
            assert _recv(ws)["data"]["observation"]["metadata"]["response"] == "echo: hi"


def test_a_harness_that_fails_to_start_ends_the_connection_and_strict_production_is_refused(
        marker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(TurnEnv, "command", [sys.executable, "-c", "raise SystemExit(2)", marker])
    with live_server(TurnEnv, transports=["ws", "harness"], mode="production") as server:
        with _open(server.url) as ws:
            assert _recv(ws) == {"type": "error", "data": {"message": "harness session failed",
                                                           "code": "SESSION_ERROR"}}
            assert _closed(ws) == 1000
        assert wait_until(lambda: server.app.state.ctx.sessions.active == 0)
    with live_server(TurnEnv, transports=["ws", "harness"], mode="production", strict_production=True) as server, \
            _open(server.url) as ws:
        refusal = _recv(ws)
        assert refusal["data"]["code"] == "MODE_ERROR" and "strict_production" in refusal["data"]["message"]
        assert _closed(ws) == 1000


def test_harness_refuses_an_env_that_is_not_a_harness_env() -> None:
    with live_server(EchoEnv, transports=["ws", "harness"], mode="production") as server, _open(server.url) as ws:
        refusal = _recv(ws)
        assert refusal["type"] == "error" and refusal["data"]["code"] == "NOT_A_HARNESS_ENV"
        assert _closed(ws) == 1000
