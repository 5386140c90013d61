"""The upstream client surface: constructor, sync/async duality (docs/protocol.md §8.3), sessions, bootstrap."""

from __future__ import annotations

import asyncio
import threading

import pytest
from layer_helpers import wait_for
from upstream_style_echo import UpstreamStyleEchoAction, UpstreamStyleEchoEnv, UpstreamStyleEchoObservation

from openenv.core import EnvClient, GenericAction, GenericEnvClient, SyncEnvClient
from openenv.core.env_server.types import State
from openenv.errors import SessionLostError

MIXED = ("EnvClient is already being used in async mode. Create a separate client instance when mixing "
         "sync and async code.")


def loop_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "openenv-client-loop"]


def test_constructor_takes_upstreams_arguments_in_upstreams_order() -> None:
    env = UpstreamStyleEchoEnv("http://127.0.0.1:9/", 3.0, 4.0, 1.0, None, 5.0, None, "Production",
                               {"Authorization": "Bearer t"})
    options = env._options
    assert (options.connect_timeout_s, options.message_timeout_s) == (3.0, 4.0)
    assert options.max_message_bytes == 1024 * 1024
    assert (options.ping_interval_s, options.ping_timeout_s) == (None, 5.0)
    assert options.headers == {"Authorization": "Bearer t"} and env._mode == "production"
    with pytest.raises(ValueError, match="Invalid mode"):
        UpstreamStyleEchoEnv(base_url="http://127.0.0.1:9", mode="staging")
    with pytest.raises(ValueError, match="base_url"):
        UpstreamStyleEchoEnv()


def test_subclass_without_hooks_is_typed_by_its_generic_parameters(echo_url: str) -> None:
    class Bare(EnvClient[UpstreamStyleEchoAction, UpstreamStyleEchoObservation, State]):
        pass

    with Bare(base_url=echo_url) as env:  # plain `with`: connects and closes synchronously
        assert isinstance(env.reset().observation, UpstreamStyleEchoObservation)
        assert env.step(UpstreamStyleEchoAction(message="typed")).observation.message_length == 5
        assert isinstance(env.state(), State)


def test_script_use_releases_its_background_thread(echo_url: str) -> None:
    before = len(loop_threads())
    env = UpstreamStyleEchoEnv(base_url=echo_url)
    env.reset()
    assert len(loop_threads()) == before + 1
    env.close()
    assert wait_for(lambda: len(loop_threads()) == before, timeout_s=5)


async def test_mode_lock_refuses_mixing(echo_url: str) -> None:
    env = UpstreamStyleEchoEnv(base_url=echo_url)
    try:
        await env.reset()
        with pytest.raises(RuntimeError) as info:
            await asyncio.to_thread(env.sync().reset)
        assert str(info.value) == MIXED
    finally:
        await env.close()


async def test_lazy_result_resolves_synchronously_when_touched(echo_url: str) -> None:
    env = UpstreamStyleEchoEnv(base_url=echo_url)
    try:
        pending = env.reset(episode_id="lazy")
        assert repr(pending) == "<_LazyResult pending>"  # repr does not resolve
        assert pending.done is False  # attribute access resolves it (sync mode)
        assert pending.observation.echoed_message.endswith("ready!")
        with pytest.raises(TypeError, match="already resolved synchronously"):
            await pending
        result = env.step(UpstreamStyleEchoAction(message="now sync"))  # sync mode: a plain result
        assert result.observation.echoed_message == "now sync"
    finally:
        env.close()


async def test_awaiting_the_lazy_result_claims_async(echo_url: str) -> None:
    env = UpstreamStyleEchoEnv(base_url=echo_url)
    try:
        result = await env.reset()
        assert result.done is False
        assert asyncio.iscoroutine(coro := env.state())  # async mode: plain coroutines from now on
        assert (await coro).step_count == 0
    finally:
        await env.close()


def test_sync_wrapper_identity_and_argument_check(echo_url: str) -> None:
    env = UpstreamStyleEchoEnv(base_url=echo_url)
    assert env.sync() is env.sync()
    assert isinstance(env.sync(), SyncEnvClient) and env.sync().async_client is env
    with pytest.raises(TypeError, match="wraps an EnvClient instance"):
        SyncEnvClient(echo_url)  # type: ignore[arg-type]


async def test_new_session_is_another_server_session_closed_with_its_parent(echo_url: str) -> None:
    parent = UpstreamStyleEchoEnv(base_url=echo_url)
    await parent.reset(episode_id="parent")
    child = await parent.new_session()
    assert type(child) is UpstreamStyleEchoEnv
    await child.reset(episode_id="child")
    await child.step(UpstreamStyleEchoAction(message="c"))
    assert ((await parent.state()).episode_id, (await child.state()).episode_id) == ("parent", "child")
    assert ((await parent.state()).step_count, (await child.state()).step_count) == (0, 1)
    await parent.close()
    assert not parent.connected and not child.connected


def test_sync_new_session(echo_url: str) -> None:
    with UpstreamStyleEchoEnv(base_url=echo_url).sync() as env:
        env.reset(episode_id="sync-parent")
        child = env.new_session()
        child.reset(episode_id="sync-child")
        assert (env.state().episode_id, child.state().episode_id) == ("sync-parent", "sync-child")
    assert not child.async_client.connected


def test_client_moved_to_another_event_loop_never_continues_silently(echo_url: str) -> None:
    async def start() -> UpstreamStyleEchoEnv:
        env = UpstreamStyleEchoEnv(base_url=echo_url)
        await env.reset(episode_id="first-loop")
        return env

    env = asyncio.run(start())  # its socket belonged to that (now closed) loop

    from upstream_style_echo.server.app import app

    sessions = app.state.ctx.sessions
    assert sessions.active == 1

    async def keep_going() -> str:
        with pytest.raises(SessionLostError, match="another event loop"):
            await env.step(UpstreamStyleEchoAction(message="lost"))
        # The abandoned socket is shut down, so its server session ends now (not at garbage
        # collection, holding a capacity slot until then).
        assert await asyncio.to_thread(wait_for, lambda: sessions.active == 0)
        await env.reset(episode_id="second-loop")  # reset starts over, on a new session
        await env.step(UpstreamStyleEchoAction(message="found"))
        state = await env.state()
        await env.close()
        return f"{state.episode_id}/{state.step_count}"

    assert asyncio.run(keep_going()) == "second-loop/1"


def test_client_handed_from_async_code_to_a_script(echo_url: str) -> None:
    async def start() -> UpstreamStyleEchoEnv:
        env = UpstreamStyleEchoEnv(base_url=echo_url)
        await env.reset()
        return env

    env = asyncio.run(start())
    try:
        env.reset(episode_id="handed-over")  # no running loop: runs on the background loop
        assert env.step(UpstreamStyleEchoAction(message="ok")).observation.echoed_message == "ok"
        assert env.state().episode_id == "handed-over"
    finally:
        env.close()


def test_generic_client_hooks() -> None:
    client = GenericEnvClient(base_url="http://127.0.0.1:9")
    result = client._parse_result({"observation": {"x": 1}, "reward": True})  # an upstream server's bool
    assert (result.observation, result.reward, result.done, result.metadata) == ({"x": 1}, 1.0, False, None)
    assert client._step_payload(UpstreamStyleEchoAction(message="m")) == {"metadata": {}, "message": "m"}
    assert client._parse_state({"episode_id": "e"}) == {"episode_id": "e"}
    assert repr(GenericAction(message="hi")) == "GenericAction(message='hi')"


def test_upstream_provider_misuse_is_refused_with_the_alternative() -> None:
    from openenv.core import UnsupportedFeature

    class LocalDockerProvider:  # what upstream code passes
        def start_container(self, image: str) -> str:
            return "http://localhost:1"

    # Without a base_url there is nothing to attach the provider to (issue 32: with one, it is
    # stopped on close — tests/compat_layer/test_layer_providers.py).
    with pytest.raises(TypeError, match="ContainerProvider"):
        UpstreamStyleEchoEnv(provider=object())
    with pytest.raises(TypeError, match="ContainerProvider instance or a provider name"):
        UpstreamStyleEchoEnv.from_docker_image("echo-env:latest", provider=object())
    with pytest.raises(UnsupportedFeature, match=r"hf\.space"):
        UpstreamStyleEchoEnv.from_env("openenv/echo_env")


@pytest.mark.slow
@pytest.mark.usefixtures("no_leftover_processes")
def test_from_provider_bootstrap_handle(cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream's lazy handle: ``.sync()`` or ``await``; the provider's server stops on close."""
    monkeypatch.setenv("OPENENV_STATE_DIR", cli_env["OPENENV_STATE_DIR"])
    handle = UpstreamStyleEchoEnv.from_provider("echo", provider="local")
    assert repr(handle).endswith("pending>")
    env = handle.sync()
    try:
        env.reset()
        assert env.step(UpstreamStyleEchoAction(message="prov")).observation.echoed_message == "prov"
    finally:
        env.close()
    with pytest.raises(RuntimeError, match="already resolved"):
        handle.sync()

    async def use() -> int:
        client = await UpstreamStyleEchoEnv.from_provider("echo", provider="local")
        try:
            await client.reset()
            return (await client.step(UpstreamStyleEchoAction(message="four"))).observation.message_length
        finally:
            await client.close()

    assert asyncio.run(use()) == 4


def test_mcp_tool_client_takes_upstreams_own_argument_order() -> None:
    from openenv.core import MCPToolClient

    client = MCPToolClient("http://127.0.0.1:9", 2.0, 3.0, None, None, None, None, 2.0, {"X-A": "b"})
    options = client._options
    assert (options.connect_timeout_s, options.message_timeout_s) == (2.0, 3.0)
    assert (options.ping_interval_s, options.max_message_bytes) == (None, 2 * 1024 * 1024)
    assert options.headers == {"X-A": "b"} and client._mode == "production"
    with pytest.raises(ValueError, match="only supports 'production' mode"):
        MCPToolClient(base_url="http://127.0.0.1:9", mode="simulation")
