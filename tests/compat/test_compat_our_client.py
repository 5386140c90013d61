"""OUR client drives an unmodified upstream 0.10 server (docs/protocol.md §8, §9.2, §10 T1, T2, T8).

The server is upstream's ``create_app`` serving ``upstream_side/echo_env.py`` (a typed echo env in
upstream's documented style) in the upstream venv. Its quirks are the point: boolean rewards, no
top-level ``metadata`` when empty, error frames that end the session, no extensions.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from compat_harness import ServerProcess, Servers, spawn_upstream
from websockets.asyncio.client import connect as ws_connect

from openenv.client import EnvClient, GenericEnvClient
from openenv.errors import (
    CapacityError,
    ConfigError,
    ExecutionError,
    OpenEnvError,
    SessionLostError,
    ValidationError,
)
from openenv.types import State
from openenv_env_echo.models import EchoAction, EchoObservation

pytestmark = pytest.mark.compat

READY_OBS = {"metadata": {}, "echoed_message": "ready", "message_length": 0}
CAPACITY_MESSAGE = "Server at capacity: 1/1 sessions active. Cannot accept new connections."
TIMEOUTS: dict[str, Any] = {"connect_timeout_s": 10.0, "message_timeout_s": 20.0}


@pytest.fixture
def url(servers: Servers) -> str:
    """Upstream's roomy app (4 sessions)."""
    return servers.upstream.url("main")


@pytest.fixture
def single_url(servers: Servers) -> str:
    """Upstream's one-slot app."""
    return servers.upstream.url("single")


def typed(url: str) -> EnvClient[EchoAction, EchoObservation]:
    return EnvClient(url, action_type=EchoAction, observation_type=EchoObservation,
                     state_type=State, **TIMEOUTS)


async def raw_exchange(url: str, frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Send frames one at a time on a fresh ``/ws`` connection and return the replies."""
    replies = []
    async with ws_connect(url.replace("http://", "ws://") + "/ws", proxy=None) as ws:
        for frame in frames:
            await ws.send(json.dumps(frame))
            replies.append(json.loads(await asyncio.wait_for(ws.recv(), 20)))
    return replies


async def test_generic_client_reset_step_state(url: str) -> None:
    async with GenericEnvClient(url, **TIMEOUTS) as env:
        r = await env.reset(seed=1, episode_id="ep-1", foo="ignored")
        assert r.observation == READY_OBS
        assert (r.reward, r.done, r.metadata) == (0.0, False, None)
        r = await env.step({"message": "Hello"})
        meta = {"original_message": "Hello", "step": 1}
        assert r.observation == {"metadata": meta, "echoed_message": "Hello", "message_length": 5}
        assert (r.reward, r.done, r.metadata) == (0.5, False, meta)
        state = await env.state()
        assert state["episode_id"] == "ep-1"
        assert state["step_count"] == 1


async def test_typed_client_with_our_models(url: str) -> None:
    async with typed(url) as env:
        r = await env.reset(episode_id="typed-1")
        assert isinstance(r.observation, EchoObservation)
        assert r.observation.echoed_message == "ready"
        r = await env.step(EchoAction(message="Hello"))
        assert isinstance(r.observation, EchoObservation)
        assert r.observation.echoed_message == "Hello"
        assert r.observation.message_length == 5
        assert r.observation.reward == 0.5
        assert r.observation.metadata == {"original_message": "Hello", "step": 1}
        state = await env.state()
        assert isinstance(state, State)
        assert (state.episode_id, state.step_count) == ("typed-1", 1)
        # extra state keys of the upstream env survive (State allows extras)
        assert isinstance(state.model_dump()["instances"], int)


@pytest.mark.parametrize("base", ["http://{hp}", "http://{hp}/", "ws://{hp}"])
def test_sync_client(servers: Servers, base: str) -> None:
    hp = servers.upstream.url("main").removeprefix("http://")
    with GenericEnvClient(base.format(hp=hp), **TIMEOUTS).sync() as env:
        assert env.reset(episode_id="sync-1").observation == READY_OBS
        assert env.step({"message": "abc"}).observation["message_length"] == 3
        state = env.state()
        assert (state["episode_id"], state["step_count"]) == ("sync-1", 1)


def test_typed_sync_client(url: str) -> None:
    with typed(url).sync() as env:
        env.reset()
        r = env.step(EchoAction(message="sync"))
        assert r.observation.echoed_message == "sync"
        assert r.reward == pytest.approx(0.4)
        assert env.state().step_count == 1


async def test_validation_error_is_typed_and_session_survives(url: str) -> None:
    async with GenericEnvClient(url, **TIMEOUTS) as env:
        await env.reset(episode_id="inv-1")
        await env.step({"message": "one"})
        with pytest.raises(ValidationError) as info:
            await env.step({"message": ""})
        err = info.value
        # upstream's first line, then the field, the reason and the value sent
        assert str(err) == ("Server error: Invalid message (code: VALIDATION_ERROR)\n"
                            "  - message: String should have at least 1 character [type=string_too_short, input='']")
        assert isinstance(err, RuntimeError)  # code catching upstream's RuntimeError still works
        assert err.code == "VALIDATION_ERROR"
        assert [(e["type"], e["loc"]) for e in err.errors] == [("string_too_short", ["message"])]
        assert err.errors[0]["ctx"] == {"min_length": 1}

        with pytest.raises(ValidationError) as info:
            await env.step({"message": "hi", "bogus": 1})
        assert [(e["type"], e["loc"], e["input"]) for e in info.value.errors] == [
            ("extra_forbidden", ["bogus"], 1)]

        r = await env.step({"message": "two"})
        assert r.observation["metadata"] == {"original_message": "two", "step": 2}
        state = await env.state()
        assert (state["episode_id"], state["step_count"]) == ("inv-1", 2)


async def test_execution_error_is_typed_and_session_survives(url: str) -> None:
    async with GenericEnvClient(url, **TIMEOUTS) as env:
        await env.reset(episode_id="boom-1")
        with pytest.raises(ExecutionError) as info:
            await env.step({"message": "boom"})
        assert str(info.value).splitlines()[0] == "Server error: kaboom (code: EXECUTION_ERROR)"
        await env.step({"message": "fine"})
        state = await env.state()
        assert (state["episode_id"], state["step_count"]) == ("boom-1", 1)


async def test_boolean_reward_and_missing_metadata(url: str) -> None:
    # premise: upstream really sends `true` and no top-level metadata for this step (T2)
    replies = await raw_exchange(url, [{"type": "reset"}, {"type": "step", "data": {"message": "bool"}}])
    assert replies[1] == {"type": "observation", "data": {
        "observation": {"metadata": {}, "echoed_message": "b", "message_length": 1},
        "reward": True, "done": True}}

    async with GenericEnvClient(url, **TIMEOUTS) as env:
        await env.reset()
        r = await env.step({"message": "bool"})
        assert r.reward == 1.0
        assert type(r.reward) is float
        assert r.done is True
        assert r.metadata is None
        assert r.observation == {"metadata": {}, "echoed_message": "b", "message_length": 1}

    async with typed(url) as env:
        await env.reset()
        r = await env.step(EchoAction(message="bool"))
        assert type(r.reward) is float
        assert r.reward == 1.0
        assert r.observation.reward == 1.0
        assert type(r.observation.reward) is float
        assert r.observation.done is True
        assert r.observation.metadata == {}


async def test_capacity_refusal_is_typed(single_url: str) -> None:
    holder = GenericEnvClient(single_url, **TIMEOUTS)
    second = GenericEnvClient(single_url, **TIMEOUTS)
    try:
        await holder.reset(episode_id="holder")
        with pytest.raises(CapacityError) as info:
            await second.reset()
        err = info.value
        assert str(err) == f"Server error: {CAPACITY_MESSAGE} (code: CAPACITY_REACHED)"
        assert (err.active_sessions, err.max_sessions) == (1, 1)
        assert err.code == "CAPACITY_REACHED"
        # the refused client has no session: it must not pretend to step one
        with pytest.raises(SessionLostError):
            await second.step({"message": "x"})
        # the holder is untouched
        await holder.step({"message": "still here"})
        state = await holder.state()
        assert (state["episode_id"], state["step_count"]) == ("holder", 1)
    finally:
        await holder.close()
    try:
        # the slot is free once upstream has torn the holder's session down (bounded retry)
        for _ in range(50):
            try:
                r = await second.reset(episode_id="second")
                break
            except CapacityError:
                await asyncio.sleep(0.1)
        else:
            pytest.fail("the slot was never freed after the holder closed")
        assert r.observation == READY_OBS
        state = await second.state()
        assert (state["episode_id"], state["step_count"]) == ("second", 0)
    finally:
        await second.close()


async def test_step_kwargs_refused_against_upstream(url: str) -> None:
    """Upstream servers grant no extensions (§12): step arguments raise instead of being dropped,
    and probing for extensions leaves the session intact."""
    async with GenericEnvClient(url, **TIMEOUTS) as env:
        await env.reset(episode_id="kw-1")
        assert await env.extensions() == set()
        with pytest.raises(ConfigError):
            await env.step({"message": "x"}, timeout_s=5)
        await env.step({"message": "y"})
        state = await env.state()
        assert (state["episode_id"], state["step_count"]) == ("kw-1", 1)


@pytest.fixture
def restarted(servers: Servers) -> Iterator[list[ServerProcess]]:
    """Holds upstream servers a test restarts, so they are always stopped."""
    procs: list[ServerProcess] = []
    yield procs
    for proc in procs:
        proc.stop()


async def test_no_silent_reconnect_after_upstream_server_dies(
    servers: Servers, upstream_python: str, restarted: list[ServerProcess],
) -> None:
    victim = servers.victim
    url = victim.url("main")
    port = victim.info["ports"]["main"]
    env = GenericEnvClient(url, **TIMEOUTS)
    try:
        await env.reset(episode_id="doomed")
        await env.step({"message": "one"})

        victim.kill(signal.SIGKILL)
        await asyncio.to_thread(victim.proc.wait, 10)
        # A new server on the same port: a client that reconnected behind our back would now
        # happily step a fresh env there. Ours must say the episode is gone instead.
        replacement = spawn_upstream("victim-restarted", servers.workdir / "restart",
                                     upstream_python, [f"main:2:{port}"])
        restarted.append(replacement)
        await asyncio.to_thread(replacement.wait_ready)

        with pytest.raises(SessionLostError) as info:
            await env.step({"message": "two"})
        assert isinstance(info.value, ConnectionError)
        assert "reset()" in str(info.value)
        with pytest.raises(SessionLostError):
            await env.state()

        # only reset() opens a new session, and it is the first env the new server ever built
        r = await env.reset(episode_id="fresh")
        assert r.observation == READY_OBS
        state = await env.state()
        assert state == {"episode_id": "fresh", "step_count": 0, "instances": 1}
    finally:
        try:
            await env.close()
        except OpenEnvError:
            pass
