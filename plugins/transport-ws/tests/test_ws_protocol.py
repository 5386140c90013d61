"""The /ws dialect against upstream's transcripts: T1, the §3.6 error rows, envelopes, pipelining."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticValidationError
from ws_support import (
    URL,
    EchoEnv,
    LiveServer,
    closed_with,
    live_server,
    recv,
    rpc,
    send,
    ws_open,
)


@pytest.fixture
def server() -> Iterator[LiveServer]:
    EchoEnv.RELEASE.clear()
    with live_server(EchoEnv, max_sessions=4) as srv:
        yield srv


async def test_t1_transcript_exactly(server: LiveServer) -> None:
    ws = await ws_open(server)
    assert await rpc(ws, {"type": "reset", "data": {"seed": 1, "episode_id": "ep-1", "foo": "ignored"}}) == {
        "type": "observation",
        "data": {"observation": {"metadata": {}, "echoed_message": "ready", "message_length": 0},
                 "reward": 0.0, "done": False},
    }
    assert await rpc(ws, {"type": "step", "data": {"message": "Hello"}}) == {
        "type": "observation",
        "data": {"observation": {"metadata": {"original_message": "Hello", "step": 1},
                                 "echoed_message": "Hello", "message_length": 5},
                 "reward": 0.5, "done": False, "metadata": {"original_message": "Hello", "step": 1}},
    }
    assert await rpc(ws, {"type": "state"}) == {"type": "state", "data": {"episode_id": "ep-1", "step_count": 1}}
    await send(ws, {"type": "close"})
    assert await closed_with(ws) == (1000, "")
    assert server.ctx.sessions.active == 0
    assert "ep-1" in EchoEnv.closed


def _err(kind: str, loc: list[Any], msg: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "loc": loc, "msg": msg, "input": value, **extra, "url": URL + kind}


def _invalid(*errors: dict[str, Any]) -> dict[str, Any]:
    return {"type": "error", "data": {"message": "Invalid message", "code": "VALIDATION_ERROR",
                                      "errors": list(errors)}}


# (inbound frame, expected reply) — every recoverable row of docs/protocol.md §3.6 with our B6/B9 fixes.
RECOVERABLE = [
    pytest.param({"type": "step", "data": {"message": ""}}, _invalid(
        _err("string_too_short", ["message"], "String should have at least 1 character", "",
             ctx={"min_length": 1})), id="action-too-short"),
    pytest.param({"type": "step", "data": {"message": "hi", "bogus": 1}}, _invalid(
        _err("extra_forbidden", ["bogus"], "Extra inputs are not permitted", 1)), id="action-extra"),
    pytest.param({"type": "step"}, _invalid(
        _err("missing", ["data"], "Field required", {"type": "step"})), id="step-missing-data"),
    pytest.param({"type": "step", "data": {"message": "x"}, "id": 7}, _invalid(
        _err("extra_forbidden", ["id"], "Extra inputs are not permitted", 7)), id="id-not-negotiated"),
    pytest.param({"type": "step", "data": {"message": "x"}, "kwargs": {"timeout_s": 1}}, _invalid(
        _err("extra_forbidden", ["kwargs"], "Extra inputs are not permitted", {"timeout_s": 1})),
        id="kwargs-not-negotiated"),
    pytest.param({"type": "frobnicate"}, {"type": "error", "data": {
        "message": "Unknown message type: frobnicate", "code": "UNKNOWN_TYPE"}}, id="unknown-type"),
    pytest.param({"data": {}}, {"type": "error", "data": {
        "message": "Unknown message type: ", "code": "UNKNOWN_TYPE"}}, id="missing-type"),
    pytest.param({"type": 5}, {"type": "error", "data": {
        "message": "Unknown message type: 5", "code": "UNKNOWN_TYPE"}}, id="non-string-type"),
    pytest.param("not json{", {"type": "error", "data": {
        "message": "Invalid JSON: Expecting value: line 1 column 1 (char 0)", "code": "INVALID_JSON"}},
        id="invalid-json"),
    pytest.param({"type": "step", "data": {"message": "boom"}}, {"type": "error", "data": {
        "message": "kaboom", "code": "EXECUTION_ERROR", "exception": "ValueError"}}, id="env-raises"),
    pytest.param({"type": "step", "data": {"message": "nan"}}, {"type": "error", "data": {
        "message": "Non-finite reward: nan", "code": "EXECUTION_ERROR"}}, id="nan-reward"),
    pytest.param({"type": "reset", "data": {"fail": "reset failed"}}, {"type": "error", "data": {
        "message": "reset failed", "code": "EXECUTION_ERROR", "exception": "RuntimeError"}},
        id="reset-raises"),
    pytest.param({"type": "reset", "data": {"seed": -5}}, _invalid(
        {"type": "greater_than_equal", "loc": ["seed"], "msg": "Input should be greater than or equal to 0",
         "input": -5, "ctx": {"ge": 0}}), id="reset-seed-B21"),
    pytest.param({"type": "reset", "data": None}, _invalid(
        _err("dict_type", ["data"], "Input should be a valid dictionary", None)), id="reset-data-null"),
    pytest.param({"type": "step", "data": [1]}, _invalid(
        _err("dict_type", ["data"], "Input should be a valid dictionary", [1])), id="step-data-list"),
    pytest.param({"type": "state", "data": {}}, _invalid(
        _err("extra_forbidden", ["data"], "Extra inputs are not permitted", {})), id="state-with-data"),
    pytest.param({"type": "close", "data": {}}, _invalid(
        _err("extra_forbidden", ["data"], "Extra inputs are not permitted", {})), id="close-with-data"),
    pytest.param({"type": "mcp"}, _invalid(
        _err("missing", ["data"], "Field required", {"type": "mcp"})), id="mcp-missing-data"),
    pytest.param({"type": "mcp", "data": "tools/list"}, _invalid(
        _err("dict_type", ["data"], "Input should be a valid dictionary", "tools/list")),
        id="mcp-data-not-object"),
    *(pytest.param(json.dumps(value), _invalid(
        _err("model_type", [], "Input should be a JSON object", value)), id=f"non-object-{i}")
      for i, value in enumerate([[1, 2], 42, "x", None])),
]


@pytest.mark.parametrize(("frame", "expected"), RECOVERABLE)
async def test_recoverable_error_rows_keep_the_session(server: LiveServer, frame: Any, expected: Any) -> None:
    ws = await ws_open(server)
    await rpc(ws, {"type": "reset", "data": {"episode_id": "keep-me"}})
    await rpc(ws, {"type": "step", "data": {"message": "one"}})
    reply = await rpc(ws, frame)
    if reply["data"].get("code") == "EXECUTION_ERROR" and "exception" not in expected["data"]:
        reply["data"].pop("exception", None)
    assert reply == expected
    # The session survived with its episode untouched (the NaN step did run in the env; only
    # its reply was refused).
    steps = 2 if frame == {"type": "step", "data": {"message": "nan"}} else 1
    assert await rpc(ws, {"type": "state"}) == {
        "type": "state", "data": {"episode_id": "keep-me", "step_count": steps}}
    await ws.close()


async def test_binary_frame_is_a_recoverable_invalid_json(server: LiveServer) -> None:
    ws = await ws_open(server)
    await rpc(ws, {"type": "reset", "data": {"episode_id": "bin"}})
    assert await rpc(ws, b'{"type":"state"}') == {"type": "error", "data": {
        "message": "Binary frames are not supported; send JSON text frames", "code": "INVALID_JSON"}}
    assert (await rpc(ws, {"type": "state"}))["data"] == {"episode_id": "bin", "step_count": 0}
    await ws.close()


async def test_boolean_reward_is_refused_as_execution_error(server: LiveServer) -> None:
    ws = await ws_open(server)
    reply = await rpc(ws, {"type": "step", "data": {"message": "bool"}})
    assert reply["type"] == "error"
    assert reply["data"]["code"] == "EXECUTION_ERROR"
    assert "not a boolean" in reply["data"]["message"]
    await ws.close()


async def test_state_and_close_raising(server: LiveServer) -> None:
    ws = await ws_open(server)
    await rpc(ws, {"type": "reset", "data": {}})
    await rpc(ws, {"type": "step", "data": {"message": "break_state"}})
    reply = await rpc(ws, {"type": "state"})
    assert reply["type"] == "error"
    assert (reply["data"]["message"], reply["data"]["code"]) == ("'x'", "EXECUTION_ERROR")
    # Still usable after the failed state read.
    assert (await rpc(ws, {"type": "step", "data": {"message": "break_close"}}))["type"] == "observation"
    await send(ws, {"type": "close"})
    assert await closed_with(ws) == (1000, "")
    # env.close() raised: logged, and the slot is still freed.
    assert server.ctx.sessions.active == 0
    ws2 = await ws_open(server)
    assert (await rpc(ws2, {"type": "reset", "data": {}}))["type"] == "observation"
    await ws2.close()


async def test_pipelining_four_frames_four_replies_in_order(server: LiveServer) -> None:
    ws = await ws_open(server)
    frames = [
        {"type": "reset", "data": {"episode_id": "pipe"}},
        {"type": "step", "data": {"message": "a"}},
        {"type": "step", "data": {"message": "bcd"}},
        {"type": "state"},
    ]
    await ws.send(json.dumps(frames[0]))
    for frame in frames[1:]:
        await ws.send(json.dumps(frame))
    replies = [await recv(ws) for _ in frames]
    assert [r["type"] for r in replies] == ["observation", "observation", "observation", "state"]
    assert replies[1]["data"]["observation"]["echoed_message"] == "a"
    assert replies[2]["data"]["observation"]["echoed_message"] == "bcd"
    assert replies[3]["data"] == {"episode_id": "pipe", "step_count": 2}
    await ws.close()


# -- envelopes: our hand-written checks against Pydantic models shaped like upstream's ------------


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Reset(_Msg):
    type: Literal["reset"] = "reset"
    data: dict[str, Any] = Field(default_factory=dict)


class _Step(_Msg):
    type: Literal["step"] = "step"
    data: dict[str, Any]


class _State(_Msg):
    type: Literal["state"] = "state"


class _Close(_Msg):
    type: Literal["close"] = "close"


class _Mcp(_Msg):
    type: Literal["mcp"] = "mcp"
    data: dict[str, Any]


_ORACLE: dict[str, type[BaseModel]] = {
    "reset": _Reset, "step": _Step, "state": _State, "close": _Close, "mcp": _Mcp}

ENVELOPES = [
    {"type": "step", "id": 7},
    {"type": "step", "data": 5, "z": 1, "a": [1]},
    {"id": 1, "type": "reset", "data": "x"},
    {"type": "reset", "data": {}, "kwargs": {}},
    {"type": "state", "data": None, "extra": True},
    {"type": "close", "reason": "bye"},
    {"type": "mcp", "data": [], "id": "a"},
    {"type": "mcp", "params": {}},
]


@pytest.mark.parametrize("frame", ENVELOPES, ids=lambda f: json.dumps(f, sort_keys=True))
async def test_envelope_errors_match_pydantic(server: LiveServer, frame: dict[str, Any]) -> None:
    with pytest.raises(PydanticValidationError) as info:
        _ORACLE[frame["type"]](**frame)
    expected = json.loads(json.dumps(info.value.errors()))
    ws = await ws_open(server)
    reply = await rpc(ws, frame)
    assert reply == {"type": "error", "data": {"message": "Invalid message", "code": "VALIDATION_ERROR",
                                               "errors": expected}}
    await ws.close()


async def test_each_frame_counts_as_activity(server: LiveServer) -> None:
    ws = await ws_open(server)
    await rpc(ws, {"type": "reset", "data": {}})
    (session,) = server.ctx.sessions.sessions()
    assert session.connections == 1  # an owned, connected session is never reaped
    for frame in ({"type": "state"}, "garbage", {"type": "nope"}):
        before = session.last_activity
        await rpc(ws, frame)
        assert session.last_activity > before
    await ws.close()
