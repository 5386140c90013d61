"""The negotiated ``sessions`` extension (docs/protocol.md §12): several sessions over one connection."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from ws_support import EchoAction, EchoEnv, EchoObservation, LiveServer, eventually, live_server, rpc, ws_open

from openenv.client import EnvClient, GenericEnvClient, SyncEnvClient
from openenv.env import Environment
from openenv.errors import CapacityError, ConfigError, ExecutionError, ValidationError
from openenv.types import State

HELLO = {"type": "hello", "data": {"want": ["sessions"]}}


@pytest.fixture
def server() -> Iterator[LiveServer]:
    with live_server(EchoEnv, max_sessions=4, transport_options={"ws": {"max_batch_actions": 3}}) as srv:
        yield srv


def many(*pairs: tuple[str, Any]) -> dict[str, Any]:
    return {"type": "step_many", "data": {"steps": [
        {"session_id": sid, "action": a if isinstance(a, dict) else {"message": a}} for sid, a in pairs]}}


async def test_without_hello_the_frames_and_keys_are_upstream_errors(server: LiveServer) -> None:
    ws = await ws_open(server)
    assert (await rpc(ws, {"type": "open"}))["data"]["code"] == "UNKNOWN_TYPE"
    reply = await rpc(ws, {"type": "step", "session_id": "x", "data": {"message": "a"}})
    assert reply["data"]["code"] == "VALIDATION_ERROR"
    assert reply["data"]["errors"][0]["type"] == "extra_forbidden"
    assert server.ctx.sessions.active == 1
    await ws.close()


async def test_sessions_open_step_apart_and_close_with_the_connection(server: LiveServer) -> None:
    ws = await ws_open(server)
    hello = await rpc(ws, HELLO)
    assert hello["data"]["extensions"] == ["sessions"] and hello["data"]["max_batch_actions"] == 3
    first = hello["data"]["session_id"]
    opened = await rpc(ws, {"type": "open"})
    assert opened["type"] == "opened"
    second = opened["data"]["session_id"]
    assert second != first and server.ctx.sessions.active == 2
    await rpc(ws, {"type": "reset", "session_id": second, "data": {"episode_id": "ep-2"}})
    # A frame without session_id still means the first session.
    assert (await rpc(ws, {"type": "step", "data": {"message": "one"}}))["type"] == "observation"
    reply = await rpc(ws, many((second, "a"), (first, "bb"), (second, "ccc")))
    assert reply["type"] == "observations"
    assert [op["observation"]["echoed_message"] for op in reply["data"]] == ["a", "bb", "ccc"]
    # Steps of one session keep the frame's order and count per session.
    assert [op["metadata"]["step"] for op in reply["data"]] == [1, 2, 2]
    state = await rpc(ws, {"type": "state", "session_id": second})
    assert state["data"]["episode_id"] == "ep-2" and state["data"]["step_count"] == 2
    assert (await rpc(ws, {"type": "state"}))["data"]["step_count"] == 2
    await ws.close()
    await eventually(lambda: server.ctx.sessions.active == 0)


async def test_one_failed_step_leaves_the_others_and_the_connection_alone(server: LiveServer) -> None:
    ws = await ws_open(server)
    first = (await rpc(ws, HELLO))["data"]["session_id"]
    second = (await rpc(ws, {"type": "open"}))["data"]["session_id"]
    reply = await rpc(ws, many((first, "boom"), ("nope", "x"), (second, {"message": ""})))
    first_err, unknown, invalid = (item["error"] for item in reply["data"])
    assert first_err["code"] == "EXECUTION_ERROR" and first_err["message"] == "kaboom"
    assert unknown["code"] == "VALIDATION_ERROR" and "Unknown session_id 'nope'" in unknown["message"]
    assert unknown["errors"][0]["loc"] == ["data", "steps", 1, "session_id"]
    assert invalid["code"] == "VALIDATION_ERROR" and invalid["errors"][0]["type"] == "string_too_short"
    reply = await rpc(ws, many((first, "ok"), (second, "ok")))
    assert all("observation" in op for op in reply["data"])
    await ws.close()


async def test_bad_frames_are_explained_and_recoverable(server: LiveServer) -> None:
    ws = await ws_open(server)
    first = (await rpc(ws, HELLO))["data"]["session_id"]
    too_many = await rpc(ws, many(*[(first, "a")] * 4))
    assert too_many["data"]["errors"][0]["type"] == "too_long"
    assert "another step_many frame" in too_many["data"]["errors"][0]["msg"]
    shapeless = await rpc(ws, {"type": "step_many", "data": {"steps": [{"action": 1, "more": 2}]}})
    kinds = [(e["type"], e["loc"]) for e in shapeless["data"]["errors"]]
    assert kinds == [("missing", ["data", "steps", 0, "session_id"]), ("dict_type", ["data", "steps", 0, "action"]),
                     ("extra_forbidden", ["data", "steps", 0, "more"])]
    unknown = await rpc(ws, {"type": "step", "session_id": "ghost", "data": {"message": "a"}})
    assert unknown["data"]["code"] == "VALIDATION_ERROR" and "open" in unknown["data"]["message"]
    primary = await rpc(ws, {"type": "close_session", "data": {"session_id": first}})
    assert primary["data"]["code"] == "VALIDATION_ERROR" and '{"type":"close"}' in primary["data"]["message"]
    assert (await rpc(ws, {"type": "close_session", "data": {}}))["data"]["errors"][0]["type"] == "missing"
    extra = await rpc(ws, {"type": "open", "data": {"size": 2}})
    assert extra["data"]["errors"][0]["type"] == "extra_forbidden" and server.ctx.sessions.active == 1
    assert (await rpc(ws, {"type": "step", "data": {"message": "still here"}}))["type"] == "observation"
    await ws.close()


async def test_capacity_refuses_an_open_without_ending_the_connection() -> None:
    with live_server(EchoEnv, max_sessions=2) as server:
        ws = await ws_open(server)
        await rpc(ws, HELLO)
        second = (await rpc(ws, {"type": "open"}))["data"]["session_id"]
        refused = await rpc(ws, {"type": "open"})
        assert refused["data"]["code"] == "CAPACITY_REACHED"
        closed = await rpc(ws, {"type": "close_session", "data": {"session_id": second}})
        assert closed == {"type": "closed", "data": {"session_id": second}}
        assert server.ctx.sessions.active == 1
        assert (await rpc(ws, {"type": "open"}))["type"] == "opened"
        await ws.close()
        await eventually(lambda: server.ctx.sessions.active == 0)


class PairedEnv(Environment[EchoAction, EchoObservation, State]):
    """A blocking env whose ``pair`` steps wait for each other: they finish only if run concurrently."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    BARRIER = threading.Barrier(2, timeout=5)

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> EchoObservation:
        return EchoObservation(echoed_message="ready")

    def step(self, action: EchoAction, **kwargs: Any) -> EchoObservation:
        if action.message == "pair":
            self.BARRIER.wait()
        return EchoObservation(echoed_message=action.message, message_length=len(action.message))

    @property
    def state(self) -> State:
        return self._state


async def test_blocking_envs_step_their_sessions_concurrently() -> None:
    with live_server(PairedEnv, max_sessions=2) as server:
        ws = await ws_open(server)
        first = (await rpc(ws, HELLO))["data"]["session_id"]
        second = (await rpc(ws, {"type": "open"}))["data"]["session_id"]
        reply = await rpc(ws, many((first, "pair"), (second, "pair")))
        assert [op["observation"]["echoed_message"] for op in reply["data"]] == ["pair", "pair"]
        await ws.close()


async def test_the_client_vector_env(server: LiveServer) -> None:
    client: EnvClient[Any, Any] = EnvClient(server.url, action_type=EchoAction, observation_type=EchoObservation)
    async with client:
        vec = await client.vector(4)  # more than max_batch_actions=3: two frames per step
        assert len(vec) == 4 and server.ctx.sessions.active == 4
        assert [r.observation.echoed_message for r in await vec.reset()] == ["ready"] * 4
        results = await vec.step([EchoAction(message=m) for m in ("a", "bb", "ccc", "dddd")])
        assert [r.observation.message_length for r in results] == [1, 2, 3, 4]
        assert [s.step_count for s in await vec.state()] == [1, 1, 1, 1]
        # The client's own session is session 0.
        assert (await client.state()).step_count == 1
        with pytest.raises(ExecutionError, match="kaboom") as info:
            await vec.step([{"message": m} for m in ("ok", "boom", "ok", "ok")])
        assert info.value.results[1] is None and sorted(info.value.failures) == [1]  # type: ignore[attr-defined]
        assert [r.observation.echoed_message for r in info.value.results if r] == ["ok"] * 3  # type: ignore[attr-defined]
        with pytest.raises(CapacityError):
            await client.vector(2)  # the server is full; the client and its vector are unharmed
        assert (await vec.step([{"message": "x"}] * 4))[3].observation.echoed_message == "x"
        assert (await vec.reset_at(2)).observation.echoed_message == "ready"
        with pytest.raises(ConfigError, match="one action per session"):
            await vec.step([{"message": "x"}])
        # A few sessions only (the others wait, e.g. one being reset): results in the indices' order.
        some = await vec.step_some([3, 1], [{"message": "three"}, {"message": "one"}])
        assert [r.observation.echoed_message for r in some] == ["three", "one"]
        assert [s.step_count for s in await vec.state()] == [3, 3, 0, 4]  # 1 failed once; 2 was just reset
        with pytest.raises(ConfigError, match="distinct session indices"):
            await vec.step_some([1, 1], [{"message": "x"}] * 2)
        await vec.close()
        assert server.ctx.sessions.active == 1
        assert (await client.step(EchoAction(message="alone"))).observation.echoed_message == "alone"
    await eventually(lambda: server.ctx.sessions.active == 0)


def test_the_sync_client_vector_env(server: LiveServer) -> None:
    with SyncEnvClient(GenericEnvClient(server.url)) as client:
        with client.vector(2) as vec:
            vec.reset()
            results = vec.step([{"message": "a"}, {"message": "b"}])
            assert [r.observation["echoed_message"] for r in results] == ["a", "b"]
            assert server.ctx.sessions.active == 2
        assert server.ctx.sessions.active == 1


async def test_vector_needs_the_extension() -> None:
    with live_server(EchoEnv, max_sessions=2) as server:
        client = GenericEnvClient(server.url)
        async with client:
            client._extensions = set()  # what an upstream server grants
            with pytest.raises(ConfigError, match="new_session"):
                await client.vector(2)
            with pytest.raises(ConfigError, match="positive"):
                await client.vector(0)


async def test_validation_errors_name_the_step() -> None:
    with live_server(EchoEnv, max_sessions=2) as server:
        client = GenericEnvClient(server.url)
        async with client:
            vec = await client.vector(2)
            with pytest.raises(ValidationError) as info:
                await vec.step([{"message": "fine"}, {"nope": 1}])
            assert list(info.value.failures) == [1]  # type: ignore[attr-defined]


async def test_concurrent_calls_on_one_connection_are_serialised(server: LiveServer) -> None:
    import asyncio

    client = GenericEnvClient(server.url)
    async with client:
        vec = await client.vector(3)
        results = await asyncio.gather(*(vec.reset_at(i) for i in range(3)), client.step({"message": "own"}),
                                       vec.step([{"message": "a"}, {"message": "b"}, {"message": "c"}]))
        assert [r.observation["echoed_message"] for r in results[:3]] == ["ready"] * 3
        assert results[3].observation["echoed_message"] == "own"
        assert [r.observation["echoed_message"] for r in results[4]] == ["a", "b", "c"]


async def test_a_connection_cannot_drive_another_connections_sessions(server: LiveServer) -> None:
    a, b = await ws_open(server), await ws_open(server)
    first_a = (await rpc(a, HELLO))["data"]["session_id"]
    opened_a = (await rpc(a, {"type": "open"}))["data"]["session_id"]
    await rpc(b, HELLO)
    for sid in (first_a, opened_a):
        reply = await rpc(b, {"type": "step", "session_id": sid, "data": {"message": "x"}})
        assert reply["data"]["code"] == "VALIDATION_ERROR" and "Unknown session_id" in reply["data"]["message"]
        closing = await rpc(b, {"type": "close_session", "data": {"session_id": sid}})
        assert closing["data"]["code"] == "VALIDATION_ERROR"
    reply = await rpc(b, many((opened_a, "x")))
    assert reply["data"][0]["error"]["code"] == "VALIDATION_ERROR"
    assert (await rpc(a, {"type": "state", "session_id": opened_a}))["data"]["step_count"] == 0
    await a.close()
    await b.close()
    await eventually(lambda: server.ctx.sessions.active == 0)
