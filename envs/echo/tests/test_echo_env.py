"""The echo env's behaviour, directly and through the kernel's session manager."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError

from openenv.env import check_factory, env_traits
from openenv.sessions import SessionManager
from openenv.types import State, observation_payload
from openenv_env_echo import AsyncEchoEnv, EchoAction, EchoEnv, EchoObservation


def test_reset_is_ready_with_zero_reward() -> None:
    env = EchoEnv()
    obs = env.reset(seed=3, episode_id="ep-1")
    assert obs == EchoObservation(echoed_message="ready", message_length=0, reward=0.0, done=False)
    assert env.state == State(episode_id="ep-1", step_count=0)
    assert env.seed == 3


def test_reset_without_episode_id_generates_a_uuid4() -> None:
    env = EchoEnv()
    env.reset()
    first = env.state.episode_id
    env.reset()
    second = env.state.episode_id
    assert first != second
    assert uuid.UUID(first).version == 4 and uuid.UUID(second).version == 4


def test_step_echoes_with_reward_per_character_and_metadata() -> None:
    env = EchoEnv()
    env.reset(episode_id="e")
    obs = env.step(EchoAction(message="Hello"))
    assert obs.echoed_message == "Hello" and obs.message_length == 5
    assert obs.reward == pytest.approx(0.5)
    assert obs.done is False
    assert obs.metadata == {"original_message": "Hello", "step": 1}
    obs = env.step(EchoAction(message="ab"))
    assert obs.metadata == {"original_message": "ab", "step": 2}
    assert obs.reward == pytest.approx(0.2)
    assert env.state.step_count == 2
    env.reset()
    assert env.state.step_count == 0


def test_wire_envelope_matches_upstream_transcript() -> None:
    env = EchoEnv()
    assert observation_payload(env.reset()) == {
        "observation": {"metadata": {}, "echoed_message": "ready", "message_length": 0},
        "reward": 0.0, "done": False,
    }
    payload = observation_payload(env.step(EchoAction(message="Hello")))
    assert payload["observation"] == {
        "metadata": {"original_message": "Hello", "step": 1},
        "echoed_message": "Hello", "message_length": 5,
    }
    assert payload["metadata"] == {"original_message": "Hello", "step": 1}


def test_empty_and_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValidationError):
        EchoAction(message="")
    with pytest.raises(ValidationError):
        EchoAction.model_validate({"message": "x", "bogus": 1})


def test_declared_traits_allow_many_inline_sessions() -> None:
    for cls in (EchoEnv, AsyncEchoEnv):
        traits = env_traits(cls)
        assert traits["SUPPORTS_CONCURRENT_SESSIONS"] is True
        assert traits["BLOCKING"] is False
        check_factory(cls, max_sessions=8)
    assert AsyncEchoEnv.is_async() and not EchoEnv.is_async()


async def test_async_twin_behaves_like_the_sync_env() -> None:
    sync_env, async_env = EchoEnv(), AsyncEchoEnv()
    assert await async_env.reset_async(episode_id="x") == sync_env.reset(episode_id="x")
    action = EchoAction(message="twin")
    assert await async_env.step_async(action) == sync_env.step(action)
    assert async_env.state == sync_env.state


@pytest.mark.parametrize("cls", [EchoEnv, AsyncEchoEnv])
async def test_served_through_the_session_manager(cls: type[EchoEnv]) -> None:
    manager = SessionManager(cls, env_name="echo", max_sessions=2)
    a = await manager.open()
    b = await manager.open()
    try:
        await manager.reset(a, {"seed": 1, "episode_id": "ep-a"})
        await manager.reset(b, {"episode_id": "ep-b"})
        obs = await manager.step(a, {"message": "hey"})
        assert obs.reward == pytest.approx(0.3) and obs.metadata["step"] == 1
        assert await manager.state(a) == {"episode_id": "ep-a", "step_count": 1}
        assert await manager.state(b) == {"episode_id": "ep-b", "step_count": 0}
    finally:
        await manager.shutdown()
    assert manager.active == 0


def test_plugin_registers_lazy_references_and_a_manifest() -> None:
    from openenv.manifest import load_manifest
    from openenv.plugins import PluginManager
    from openenv_env_echo import plugin

    pm = PluginManager(entry_points=[], strict=True)
    pm.register(plugin, name="echo")
    entry = pm.catalog.envs.get("echo")
    assert entry.ref == "openenv_env_echo.env:EchoEnv"
    assert pm.catalog.envs.get("echo_async").load() is AsyncEchoEnv
    manifest = load_manifest(entry.extra["manifest"])
    assert (manifest.spec_version, manifest.name, manifest.type, manifest.runtime, manifest.app,
            manifest.port) == (1, "echo", "space", "fastapi", "server.app:app", 8000)
    assert manifest.description
