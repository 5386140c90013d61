"""The negotiated ``step_batch`` extension (docs/protocol.md §12 "Batched steps"), end to end on real sockets."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from ws_support import EchoAction, EchoEnv, EchoObservation, LiveServer, live_server, rpc, send, ws_open

from openenv.client import GenericEnvClient, SyncEnvClient
from openenv.env import Environment
from openenv.errors import ConfigError, ExecutionError, ValidationError
from openenv.types import State
from openenv_transport_ws.client import WebSocketConnector


class DoneAtEnd(Environment[EchoAction, EchoObservation, State]):
    """Echo whose episode ends on the message ``end``."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> EchoObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return EchoObservation(echoed_message="ready")

    def step(self, action: EchoAction, **kwargs: Any) -> EchoObservation:
        self._state.step_count += 1
        if action.message == "boom":
            raise ValueError("kaboom")
        return EchoObservation(echoed_message=action.message, message_length=len(action.message),
                               done=action.message == "end", reward=float(self._state.step_count))

    @property
    def state(self) -> State:
        return self._state


@pytest.fixture
def server() -> Iterator[LiveServer]:
    with live_server(EchoEnv, max_sessions=4) as srv:
        yield srv


@pytest.fixture
def done_server() -> Iterator[LiveServer]:
    with live_server(DoneAtEnd, max_sessions=4, transport_options={"ws": {"max_batch_actions": 4}}) as srv:
        yield srv


def batch(*messages: Any) -> dict[str, Any]:
    return {"type": "step_batch", "data": {"actions": [
        m if isinstance(m, dict) else {"message": m} for m in messages]}}


async def test_without_negotiation_step_batch_is_an_unknown_type(server: LiveServer) -> None:
    ws = await ws_open(server)
    reply = await rpc(ws, batch("a"))
    assert reply == {"type": "error", "data": {"message": "Unknown message type: step_batch",
                                               "code": "UNKNOWN_TYPE"}}
    # hello without step_batch does not enable it either.
    await rpc(ws, {"type": "hello", "data": {"want": ["ids"]}})
    assert (await rpc(ws, batch("a")))["data"]["code"] == "UNKNOWN_TYPE"
    assert (await rpc(ws, {"type": "state"}))["data"]["step_count"] == 0  # nothing ran
    await ws.close()


async def test_negotiated_batch_runs_in_order_and_matches_single_steps(server: LiveServer) -> None:
    ws = await ws_open(server)
    hello = await rpc(ws, {"type": "hello", "data": {"want": ["step_batch"]}})
    assert hello["data"]["extensions"] == ["step_batch"]
    assert hello["data"]["max_batch_actions"] == 1024
    await rpc(ws, {"type": "reset", "data": {}})
    reply = await rpc(ws, batch("a", "bb", "ccc"))
    assert reply["type"] == "observations"
    assert set(reply) == {"type", "data"}
    assert [op["observation"]["echoed_message"] for op in reply["data"]] == ["a", "bb", "ccc"]
    assert [op["observation"]["metadata"]["step"] for op in reply["data"]] == [1, 2, 3]
    # Each element is exactly the OP a single step frame would have carried.
    single = await rpc(ws, {"type": "step", "data": {"message": "dddd"}})
    again = await rpc(ws, batch("dddd"))
    single["data"]["observation"]["metadata"]["step"] = single["data"]["metadata"]["step"] = 5
    assert again["data"] == [single["data"]]
    assert (await rpc(ws, {"type": "state"}))["data"]["step_count"] == 5
    await ws.close()


async def test_batch_stops_at_the_first_done(done_server: LiveServer) -> None:
    ws = await ws_open(done_server)
    await rpc(ws, {"type": "hello", "data": {"want": ["step_batch"]}})
    await rpc(ws, {"type": "reset", "data": {}})
    reply = await rpc(ws, batch("a", "end", "never"))
    assert [op["done"] for op in reply["data"]] == [False, True]
    assert (await rpc(ws, {"type": "state"}))["data"]["step_count"] == 2
    await ws.close()


async def test_batch_stops_at_an_error_and_the_session_survives(server: LiveServer) -> None:
    ws = await ws_open(server)
    await rpc(ws, {"type": "hello", "data": {"want": ["step_batch"]}})
    await rpc(ws, {"type": "reset", "data": {}})
    reply = await rpc(ws, batch("a", "boom", "never"))
    assert reply["type"] == "observations"
    assert len(reply["data"]) == 2
    assert reply["data"][0]["observation"]["echoed_message"] == "a"
    assert reply["data"][1] == {"error": {"message": "kaboom", "code": "EXECUTION_ERROR",
                                          "exception": "ValueError"}}
    # An invalid action is a validation error in the same place.
    reply = await rpc(ws, batch("b", {"message": ""}, "never"))
    last = reply["data"][-1]["error"]
    assert len(reply["data"]) == 2 and last["code"] == "VALIDATION_ERROR"
    assert last["errors"][0]["loc"] == ["message"]
    # The session lives on, and counted exactly the steps that ran.
    assert (await rpc(ws, {"type": "state"}))["data"]["step_count"] == 2
    assert (await rpc(ws, {"type": "step", "data": {"message": "c"}}))["type"] == "observation"
    await ws.close()


@pytest.mark.parametrize(("data", "kind", "loc"), [
    ({}, "missing", ["data", "actions"]),
    ({"actions": "a"}, "list_type", ["data", "actions"]),
    ({"actions": []}, "too_short", ["data", "actions"]),
    ({"actions": [{"message": "a"}] * 5}, "too_long", ["data", "actions"]),
    ({"actions": [{"message": "a"}], "extra": 1}, "extra_forbidden", ["data", "extra"]),
])
async def test_batch_limits_are_validation_errors(done_server: LiveServer, data: dict[str, Any], kind: str,
                                                  loc: list[Any]) -> None:
    ws = await ws_open(done_server)
    hello = await rpc(ws, {"type": "hello", "data": {"want": ["step_batch"]}})
    assert hello["data"]["max_batch_actions"] == 4
    reply = await rpc(ws, {"type": "step_batch", "data": data})
    assert reply["type"] == "error"
    assert reply["data"]["code"] == "VALIDATION_ERROR"
    assert [(e["type"], e["loc"]) for e in reply["data"]["errors"]] == [(kind, loc)]
    # Nothing ran; the connection still serves.
    assert (await rpc(ws, {"type": "state"}))["data"]["step_count"] == 0
    await ws.close()


async def test_envelope_errors_and_ids(server: LiveServer) -> None:
    ws = await ws_open(server)
    await rpc(ws, {"type": "hello", "data": {"want": ["step_batch"]}})
    reply = await rpc(ws, {"type": "step_batch"})
    assert reply["data"]["errors"][0]["type"] == "missing"
    reply = await rpc(ws, {**batch("a"), "id": 1})  # ids not negotiated: an envelope error
    assert reply["data"]["errors"][0]["loc"] == ["id"]
    await rpc(ws, {"type": "hello", "data": {"want": ["step_batch", "ids"]}})
    reply = await rpc(ws, {**batch("a", "b"), "id": "r1"})
    assert reply["id"] == "r1" and len(reply["data"]) == 2
    await ws.close()


async def test_pipelined_batches_reply_in_order(server: LiveServer) -> None:
    ws = await ws_open(server)
    await rpc(ws, {"type": "hello", "data": {"want": ["step_batch"]}})
    for i in range(5):
        await send(ws, batch(*[f"m{i}-{k}" for k in range(3)]))
    for i in range(5):
        reply = json.loads(await ws.recv())
        assert [op["observation"]["echoed_message"] for op in reply["data"]] == [f"m{i}-{k}" for k in range(3)]
    await ws.close()


def test_capabilities_advertise_step_batch(server: LiveServer) -> None:
    import httpx

    caps = httpx.get(server.url + "/capabilities", timeout=10).json()
    assert "step_batch" in caps["extensions"]
    assert caps["max_batch_actions"] == 1024


# -- the client ----------------------------------------------------------------------------------


async def test_client_step_batch_end_to_end(done_server: LiveServer) -> None:
    client = GenericEnvClient(done_server.url, connector=WebSocketConnector())
    try:
        await client.reset()
        assert "step_batch" in await client.extensions()
        # 6 actions with a server limit of 4: sent as two frames, results in order.
        results = await client.step_batch([{"message": f"m{i}"} for i in range(6)])
        assert [r.observation["echoed_message"] for r in results] == [f"m{i}" for i in range(6)]
        assert [r.reward for r in results] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        # Stops at done, even across frames.
        results = await client.step_batch([{"message": m} for m in ("a", "b", "c", "d", "end", "x")])
        assert [r.observation["echoed_message"] for r in results] == ["a", "b", "c", "d", "end"]
        assert results[-1].done
        await client.reset()
        with pytest.raises(ExecutionError, match="kaboom") as info:
            await client.step_batch([{"message": "a"}, {"message": "b"}, {"message": "boom"}, {"message": "c"}])
        partial = info.value.partial_results  # type: ignore[attr-defined]
        assert [r.observation["echoed_message"] for r in partial] == ["a", "b"]
        with pytest.raises(ValidationError):
            await client.step_batch([{"message": "a"}, {"message": ""}])
        state = await client.state()
        assert state["step_count"] == 4  # a, b, boom (counted by the env), a
        assert (await client.step({"message": "z"})).observation["echoed_message"] == "z"
    finally:
        await client.close()


def test_sync_client_step_batch(server: LiveServer) -> None:
    with SyncEnvClient(server.url, action_type=EchoAction, observation_type=EchoObservation) as env:
        env.reset()
        results = env.step_batch([EchoAction(message="x"), EchoAction(message="yy")])
        assert [r.observation.message_length for r in results] == [1, 2]
        assert env.state().step_count == 2


async def test_client_refuses_when_the_extension_is_not_granted(server: LiveServer) -> None:
    from openenv_transport_ws import server as ws_server

    client = GenericEnvClient(server.url, connector=WebSocketConnector())
    original = ws_server.EXTENSIONS
    ws_server.EXTENSIONS = ("step_kwargs", "ids")  # a server without the extension
    try:
        with pytest.raises(ConfigError, match="'step_batch'"):
            await client.step_batch([{"message": "a"}])
        assert (await client.step({"message": "a"})).observation["echoed_message"] == "a"
    finally:
        ws_server.EXTENSIONS = original
        await client.close()
