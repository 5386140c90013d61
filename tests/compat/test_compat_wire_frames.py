"""Raw ``/ws`` frames, ours against upstream's, side by side (docs/protocol.md §3, §10 T1, T2, T8).

The same frames go to our echo server and to upstream's server (``upstream_side/echo_env.py``
behaves like our echo env on every input used here); the replies must be identical, up to what
legitimately differs (random episode ids, pydantic doc URLs, the reference env's extra state key).
Where we deliberately differ from upstream (§11 B9, B21) the test says so and checks our side.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from compat_harness import Servers
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

pytestmark = pytest.mark.compat

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
RECV_TIMEOUT_S = 20.0
CLOSED = {"closed": 1000}


def ws(url: str) -> Any:
    return ws_connect(url.replace("http://", "ws://") + "/ws", proxy=None, open_timeout=10)


async def recv(conn: ClientConnection) -> dict[str, Any]:
    """The next frame, or ``{"closed": <code>}`` when the server closed the connection."""
    try:
        raw = await asyncio.wait_for(conn.recv(), RECV_TIMEOUT_S)
    except ConnectionClosed as exc:
        return {"closed": exc.rcvd.code if exc.rcvd is not None else None}
    frame = json.loads(raw)
    assert isinstance(frame, dict)
    return frame


async def exchange(url: str, frames: list[Any]) -> list[dict[str, Any]]:
    """One request at a time (as upstream's client does); strings are sent verbatim."""
    out = []
    async with ws(url) as conn:
        for frame in frames:
            await conn.send(frame if isinstance(frame, str) else json.dumps(frame))
            out.append(await recv(conn))
    return out


def normalized(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if k not in ("instances", "url")}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if isinstance(value, str) and UUID_RE.match(value):
        return "<uuid4>"
    return value


async def both(servers: Servers, frames: list[Any], *, single: bool = False) -> tuple[Any, Any]:
    """Replies of (ours, upstream's) to the same frames, exchanged concurrently."""
    if single:
        urls = servers.ours_single.url(), servers.upstream.url("single")
    else:
        urls = servers.ours.url(), servers.upstream.url("main")
    ours, ref = await asyncio.gather(*(exchange(u, frames) for u in urls))
    return ours, ref


async def test_t1_reset_step_state_close(servers: Servers) -> None:
    frames: list[Any] = [
        {"type": "reset", "data": {"seed": 1, "episode_id": "ep-1", "foo": "ignored"}},
        {"type": "step", "data": {"message": "Hello"}},
        {"type": "state"},
    ]
    ours, ref = await both(servers, frames)
    meta = {"original_message": "Hello", "step": 1}
    assert ours == [
        {"type": "observation", "data": {"observation": {"metadata": {}, "echoed_message": "ready",
                                                         "message_length": 0},
                                         "reward": 0.0, "done": False}},
        {"type": "observation", "data": {"observation": {"metadata": meta, "echoed_message": "Hello",
                                                         "message_length": 5},
                                         "reward": 0.5, "done": False, "metadata": meta}},
        {"type": "state", "data": {"episode_id": "ep-1", "step_count": 1}},
    ]
    assert normalized(ours) == normalized(ref)


@pytest.mark.parametrize("which", ["ours", "upstream"])
async def test_t1_close_gets_no_reply_and_code_1000(servers: Servers, which: str) -> None:
    url = servers.ours.url() if which == "ours" else servers.upstream.url("main")
    async with ws(url) as conn:
        await conn.send(json.dumps({"type": "reset"}))
        assert (await recv(conn))["type"] == "observation"
        await conn.send(json.dumps({"type": "close"}))
        assert await recv(conn) == CLOSED


async def test_t2_protocol_and_validation_errors_match_upstream(servers: Servers) -> None:
    frames: list[Any] = [
        {"type": "reset", "data": {"episode_id": "t2"}},
        {"type": "step", "data": {"message": ""}},
        {"type": "step", "data": {"message": "hi", "bogus": 1}},
        {"type": "step"},
        {"type": "step", "data": {"message": "x"}, "id": 7},
        {"type": "step", "data": {"message": 5}},
        {"type": "step", "data": "not an object"},
        {"type": "state", "data": {}},
        {"type": "frobnicate"},
        {"data": {}},
        "not json{",
        {"type": "step", "data": {"message": "ok"}},
        {"type": "state"},
    ]
    ours, ref = await both(servers, frames)
    errors = [f["data"] for f in ours[1:11]]
    assert all(f["type"] == "error" for f in ours[1:11]), ours
    assert [(e["code"], e["message"]) for e in errors] == [
        ("VALIDATION_ERROR", "Invalid message")] * 7 + [
        ("UNKNOWN_TYPE", "Unknown message type: frobnicate"),
        ("UNKNOWN_TYPE", "Unknown message type: "),
        ("INVALID_JSON", "Invalid JSON: Expecting value: line 1 column 1 (char 0)"),
    ]
    # action errors are located relative to the action, envelope errors relative to the envelope
    assert [[(d["type"], d["loc"]) for d in e["errors"]] for e in errors[:7]] == [
        [("string_too_short", ["message"])],
        [("extra_forbidden", ["bogus"])],
        [("missing", ["data"])],
        [("extra_forbidden", ["id"])],
        [("string_type", ["message"])],
        [("dict_type", ["data"])],
        [("extra_forbidden", ["data"])],
    ]
    # T2: the connection and the session survived every one of them
    assert ours[11]["data"]["observation"]["metadata"] == {"original_message": "ok", "step": 1}
    assert ours[12] == {"type": "state", "data": {"episode_id": "t2", "step_count": 1}}
    assert normalized(ours) == normalized(ref)


async def test_pipelined_frames_get_replies_in_order(servers: Servers) -> None:
    frames = [{"type": "reset", "data": {"episode_id": "pipe"}},
              {"type": "step", "data": {"message": "a"}},
              {"type": "step", "data": {"message": ""}},
              {"type": "step", "data": {"message": "bb"}},
              {"type": "state"}]

    async def pipelined(url: str) -> list[dict[str, Any]]:
        async with ws(url) as conn:
            for frame in frames:  # all sent before reading anything
                await conn.send(json.dumps(frame))
            return [await recv(conn) for _ in frames]

    ours, ref = await asyncio.gather(pipelined(servers.ours.url()),
                                     pipelined(servers.upstream.url("main")))
    assert [f["type"] for f in ours] == ["observation", "observation", "error", "observation", "state"]
    assert ours[3]["data"]["observation"]["echoed_message"] == "bb"
    assert ours[4]["data"] == {"episode_id": "pipe", "step_count": 2}
    assert normalized(ours) == normalized(ref)


async def test_t8_capacity_refusal_frame_then_close(servers: Servers) -> None:
    async def refused(url: str) -> list[dict[str, Any]]:
        async with ws(url) as holder:
            await holder.send(json.dumps({"type": "reset"}))
            assert (await recv(holder))["type"] == "observation"
            # the handshake of the second connection succeeds; the refusal is a frame, then 1000
            async with ws(url) as second:
                got = [await recv(second), await recv(second)]
            await holder.send(json.dumps({"type": "state"}))
            got.append({"holder": (await recv(holder))["type"]})
            return got

    ours, ref = await asyncio.gather(refused(servers.ours_single.url()),
                                     refused(servers.upstream.url("single")))
    assert ours == [
        {"type": "error", "data": {
            "message": "Server at capacity: 1/1 sessions active. Cannot accept new connections.",
            "code": "CAPACITY_REACHED", "active_sessions": 1, "max_sessions": 1}},
        CLOSED,
        {"holder": "state"},
    ]
    assert ours == ref


async def test_b9_non_object_and_binary_frames_are_recoverable_on_our_server(
    servers: Servers,
) -> None:
    """Deliberate divergence (§11 B9): upstream kills the session with SESSION_ERROR; we answer
    with a recoverable error and keep the session."""
    async with ws(servers.ours.url()) as conn:
        await conn.send(json.dumps({"type": "reset", "data": {"episode_id": "b9"}}))
        assert (await recv(conn))["type"] == "observation"
        await conn.send("[1,2]")
        err = await recv(conn)
        assert err["type"] == "error"
        assert (err["data"]["code"], err["data"]["message"]) == ("VALIDATION_ERROR", "Invalid message")
        assert [(e["type"], e["loc"], e["msg"]) for e in err["data"]["errors"]] == [
            ("model_type", [], "Input should be a JSON object")]
        await conn.send(b'{"type":"state"}')
        err = await recv(conn)
        assert err["type"] == "error"
        assert (err["data"]["code"], err["data"]["message"]) == (
            "INVALID_JSON", "Binary frames are not supported; send JSON text frames")
        await conn.send(json.dumps({"type": "state"}))
        assert await recv(conn) == {"type": "state", "data": {"episode_id": "b9", "step_count": 0}}

    # the reference really does end the session on the same input (what B9 fixes)
    async with ws(servers.upstream.url("main")) as conn:
        await conn.send("[1,2]")
        err = await recv(conn)
        assert err["data"]["code"] == "SESSION_ERROR"
        assert await recv(conn) == CLOSED


async def test_our_server_accepts_frames_over_16_mib(servers: Servers) -> None:
    """§9.1: inbound frames of at least 16 MiB (upstream's server limit) are accepted; the reply
    (about twice the size: message + metadata copy) stays under upstream's 100 MiB client limit."""
    size = 17 * 1024 * 1024
    async with ws_connect(servers.ours.url().replace("http://", "ws://") + "/ws", proxy=None,
                          max_size=100 * 1024 * 1024) as conn:
        await conn.send(json.dumps({"type": "reset"}))
        assert (await recv(conn))["type"] == "observation"
        await conn.send(json.dumps({"type": "step", "data": {"message": "x" * size}}))
        reply = await recv(conn)
        assert reply["type"] == "observation", str(reply)[:300]
        assert reply["data"]["observation"]["message_length"] == size
        await conn.send(json.dumps({"type": "state"}))
        assert (await recv(conn))["data"]["step_count"] == 1
