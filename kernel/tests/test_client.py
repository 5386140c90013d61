"""Client semantics that do not depend on a transport: error typing, lost sessions, parsing.

Frames are fed by a scripted in-memory connection (the real transports are exercised end to end
in their own packages and in ``tests/``).
"""

from __future__ import annotations

from typing import Any

import pytest

from openenv.client import EnvClient, GenericEnvClient, SyncEnvClient
from openenv.errors import (
    CapacityError,
    ConfigError,
    OpenEnvError,
    ProtocolError,
    SessionLostError,
    StepTimeoutError,
    ValidationError,
)
from openenv.interfaces import ClientConnector, Connection, ConnectOptions
from openenv.types import Action, Observation, State


class Msg(Action):
    message: str


class Echo(Observation):
    echoed_message: str


class Scripted(Connection):
    def __init__(self, replies: list[Any]) -> None:
        self.replies = replies
        self.sent: list[dict[str, Any]] = []
        self._closed = False

    async def send(self, frame: dict[str, Any]) -> None:
        self.sent.append(frame)

    async def receive(self) -> dict[str, Any]:
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            self._closed = True
            raise reply
        return reply  # type: ignore[no-any-return]

    async def close(self) -> None:
        self._closed = True

    async def abort(self) -> None:
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed


class ScriptedConnector(ClientConnector):
    schemes = ("ws", "http")

    def __init__(self, *scripts: list[Any]) -> None:
        self.scripts = list(scripts)
        self.connections: list[Scripted] = []

    async def connect(self, base_url: str, options: ConnectOptions) -> Connection:
        conn = Scripted(self.scripts.pop(0))
        self.connections.append(conn)
        return conn


def obs(msg: str, reward: Any = 0.5, **extra: Any) -> dict[str, Any]:
    return {"type": "observation", "data": {"observation": {"metadata": {}, "echoed_message": msg},
                                            "reward": reward, "done": False, **extra}}


async def test_typed_results_and_upstream_quirks() -> None:
    conn = ScriptedConnector([obs("ready", reward=True), obs("hi", reward=1),
                              {"type": "state", "data": {"episode_id": "e", "step_count": 1, "extra": 2}}])
    client = EnvClient("http://127.0.0.1:1", action_type=Msg, observation_type=Echo, state_type=State,
                       connector=conn)
    r = await client.reset(seed=1)
    assert r.reward == 1.0 and isinstance(r.observation, Echo) and r.metadata is None
    r = await client.step(Msg(message="hi"))
    assert r.reward == 1.0 and r.observation.echoed_message == "hi"
    st = await client.state()
    assert st.episode_id == "e" and st.step_count == 1
    assert conn.connections[0].sent == [
        {"type": "reset", "data": {"seed": 1}},
        {"type": "step", "data": {"metadata": {}, "message": "hi"}},
        {"type": "state"},
    ]


async def test_error_frames_become_typed_errors_that_keep_details() -> None:
    err = {"type": "error", "data": {"message": "Invalid message", "code": "VALIDATION_ERROR",
                                     "errors": [{"type": "missing", "loc": ["message"]}]}}
    conn = ScriptedConnector([err, obs("ok")])
    client = GenericEnvClient("ws://127.0.0.1:1", connector=conn)
    with pytest.raises(ValidationError) as info:
        await client.step({})
    assert str(info.value) == ("Server error: Invalid message (code: VALIDATION_ERROR)\n"
                               "  - message: invalid [type=missing]")
    assert info.value.errors == [{"type": "missing", "loc": ["message"]}]
    assert isinstance(info.value, RuntimeError)
    r = await client.step({"message": "ok"})  # recoverable: same connection
    assert r.observation["echoed_message"] == "ok"
    assert len(conn.connections) == 1


async def test_capacity_refusal_is_fatal_and_typed() -> None:
    cap = {"type": "error", "data": {"message": "Server at capacity: 1/1 sessions active. Cannot accept new "
                                     "connections.", "code": "CAPACITY_REACHED", "active_sessions": 1,
                                     "max_sessions": 1}}
    client = GenericEnvClient("ws://127.0.0.1:1", connector=ScriptedConnector([cap]))
    with pytest.raises(CapacityError) as info:
        await client.reset()
    assert (info.value.active_sessions, info.value.max_sessions) == (1, 1)
    with pytest.raises(SessionLostError):
        await client.step({"message": "x"})


async def test_never_reconnects_silently_after_a_drop() -> None:
    conn = ScriptedConnector([obs("ready"), SessionLostError("connection closed")], [obs("fresh")])
    client = GenericEnvClient("ws://127.0.0.1:1", connector=conn)
    await client.reset()
    with pytest.raises(SessionLostError):
        await client.step({"message": "x"})
    with pytest.raises(SessionLostError, match="Call reset"):
        await client.step({"message": "x"})
    with pytest.raises(SessionLostError):
        await client.state()
    assert len(conn.connections) == 1  # nothing was opened behind the caller's back
    r = await client.reset()  # explicit: a new session
    assert r.observation["echoed_message"] == "fresh"
    assert len(conn.connections) == 2


async def test_timeout_marks_the_session_lost() -> None:
    conn = ScriptedConnector([obs("ready"), StepTimeoutError("no reply within 60 s")])
    client = GenericEnvClient("ws://127.0.0.1:1", connector=conn)
    await client.reset()
    with pytest.raises(StepTimeoutError):
        await client.step({"message": "x"})
    with pytest.raises(SessionLostError):
        await client.step({"message": "x"})


async def test_step_kwargs_are_refused_when_the_server_did_not_negotiate_them() -> None:
    unknown = {"type": "error", "data": {"message": "Unknown message type: hello", "code": "UNKNOWN_TYPE"}}
    conn = ScriptedConnector([obs("ready"), unknown])
    client = GenericEnvClient("ws://127.0.0.1:1", connector=conn)
    await client.reset()
    with pytest.raises(ConfigError, match="does not accept step arguments timeout_s"):
        await client.step({"message": "x"}, timeout_s=5)
    granted = {"type": "hello", "data": {"extensions": ["step_kwargs"]}}
    conn2 = ScriptedConnector([granted, obs("x")])
    client2 = GenericEnvClient("ws://127.0.0.1:1", connector=conn2)
    await client2.step({"message": "x"}, timeout_s=5)
    assert conn2.connections[0].sent[-1] == {"type": "step", "data": {"message": "x"}, "kwargs": {"timeout_s": 5}}


async def test_malformed_replies_and_non_finite_rewards_are_protocol_errors() -> None:
    conn = ScriptedConnector([{"type": "state", "data": {}}, obs("x", reward="high")])
    client = GenericEnvClient("ws://127.0.0.1:1", connector=conn)
    with pytest.raises(ProtocolError, match="Expected a 'observation' frame"):
        await client.reset()
    with pytest.raises(ProtocolError, match="Reward must be a number"):
        await client.step({"message": "x"})


def test_base_url_rules() -> None:
    with pytest.raises(ConfigError, match="query string"):
        GenericEnvClient("http://h:1/?x=1")
    with pytest.raises(ConfigError, match="base_url"):
        GenericEnvClient()


def test_sync_twin_has_the_same_surface() -> None:
    conn = ScriptedConnector([obs("ready"), obs("hi"), {"type": "state", "data": {"episode_id": None,
                                                                                   "step_count": 1}}])
    with SyncEnvClient(GenericEnvClient("ws://127.0.0.1:1", connector=conn)) as env:
        assert env.reset().observation["echoed_message"] == "ready"
        assert env.step({"message": "hi"}).reward == 0.5
        assert env.state()["step_count"] == 1
    assert conn.connections[0].closed


async def test_step_batch_needs_the_extension_and_keeps_partial_results() -> None:
    unknown = {"type": "error", "data": {"message": "Unknown message type: hello", "code": "UNKNOWN_TYPE"}}
    conn = ScriptedConnector([unknown])
    client = GenericEnvClient("ws://127.0.0.1:1", connector=conn)
    with pytest.raises(ConfigError, match="'step_batch'"):
        await client.step_batch([{"message": "x"}])
    assert [f["type"] for f in conn.connections[0].sent] == ["hello"]  # no step_batch was sent
    granted = {"type": "hello", "data": {"extensions": ["step_kwargs", "step_batch"], "max_batch_actions": 2}}
    op = obs("a")["data"]
    failed = {"type": "observations", "data": [op, {"error": {"message": "kaboom", "code": "EXECUTION_ERROR"}}]}
    conn2 = ScriptedConnector([granted, {"type": "observations", "data": [op, op]}, failed])
    client2 = GenericEnvClient("ws://127.0.0.1:1", connector=conn2)
    with pytest.raises(OpenEnvError, match="kaboom") as info:
        await client2.step_batch([{"message": str(i)} for i in range(5)])
    assert info.value.code == "EXECUTION_ERROR"
    assert len(info.value.partial_results) == 3  # type: ignore[attr-defined]
    sent = conn2.connections[0].sent
    assert sent[0] == {"type": "hello", "data": {"want": [
        "step_kwargs", "step_batch", "sessions", "tasks", "snapshot"]}}
    assert [len(f["data"]["actions"]) for f in sent[1:]] == [2, 2]  # chunked by the advertised limit
