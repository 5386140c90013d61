"""Upstream-style env packages, unmodified, served by our kernel over each of our transports.

The app under test is the fixture's own ``server/app.py`` (``create_app(Env, Action, Observation,
env_name=..., max_concurrent_envs=4)``); clients are the fixture's ``EnvClient`` subclass, our
``GenericEnvClient``, and raw HTTP/JSON-RPC for the REST and MCP transports.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest


def test_typed_upstream_client_over_ws_in_a_script(echo_url: str) -> None:
    """Upstream scripts call ``env.reset()`` without ``await`` and without ``.sync()``."""
    from upstream_style_echo import UpstreamStyleEchoAction, UpstreamStyleEchoEnv, UpstreamStyleEchoObservation

    env = UpstreamStyleEchoEnv(base_url=echo_url)
    try:
        first = env.reset(episode_id="ep-script", seed=7)
        assert isinstance(first.observation, UpstreamStyleEchoObservation)
        assert first.observation.echoed_message == "Upstream Style Echo environment ready!"
        assert first.reward == 0.0 and first.done is False
        assert first.metadata == {"reset_count": 1, "seed": 7}
        result = env.step(UpstreamStyleEchoAction(message="Hello"))
        assert (result.observation.echoed_message, result.observation.message_length) == ("Hello", 5)
        assert result.reward == pytest.approx(0.5)
        state = env.state()
        assert (state.episode_id, state.step_count) == ("ep-script", 1)
        last = env.step(UpstreamStyleEchoAction(message="bye"))
        assert last.done is True and last.observation.done is True
    finally:
        env.close()


def test_typed_upstream_client_sync_wrapper_and_thread_affinity(echo_url: str) -> None:
    from upstream_style_echo import UpstreamStyleEchoAction, UpstreamStyleEchoEnv

    with UpstreamStyleEchoEnv(base_url=echo_url).sync() as env:
        env.reset()
        metas = [env.step(UpstreamStyleEchoAction(message=f"m{i}")).metadata for i in range(5)]
    # upstream runs a session's env on one thread; the compat Environment keeps that guarantee
    assert [m["step"] for m in metas] == [1, 2, 3, 4, 5]
    assert all(m["same_thread"] for m in metas)


async def test_typed_upstream_client_async(echo_url: str) -> None:
    from upstream_style_echo import UpstreamStyleEchoAction, UpstreamStyleEchoEnv

    async with UpstreamStyleEchoEnv(base_url=echo_url) as env:
        await env.reset(episode_id="ep-async")
        results = [await env.step(UpstreamStyleEchoAction(message="x" * n)) for n in (1, 20)]
        assert [r.reward for r in results] == [pytest.approx(0.1), 1.0]
        assert (await env.state()).step_count == 2


async def test_sessions_are_isolated_and_capacity_is_upstream_s(echo_url: str) -> None:
    """``max_concurrent_envs=4`` from server/app.py: four sessions, the fifth is refused."""
    from upstream_style_echo import UpstreamStyleEchoAction, UpstreamStyleEchoEnv
    from upstream_style_echo.server.app import app

    from openenv.testing import wait_until_async

    # The server is shared by the module's tests: a client that just closed may still be releasing
    # its slot on the server's side, so start from an empty server.
    assert await wait_until_async(lambda: app.state.ctx.sessions.active == 0, timeout_s=15)

    clients = [UpstreamStyleEchoEnv(base_url=echo_url) for _ in range(4)]
    try:
        for i, client in enumerate(clients):
            await client.reset(episode_id=f"iso-{i}")
            for _ in range(i):
                await client.step(UpstreamStyleEchoAction(message="hi"))
        states = [await c.state() for c in clients]
        assert [(s.episode_id, s.step_count) for s in states] == [(f"iso-{i}", i) for i in range(4)]
        extra = UpstreamStyleEchoEnv(base_url=echo_url)
        with pytest.raises(RuntimeError) as info:
            await extra.reset()
        assert str(info.value).startswith("Server error: Server at capacity: 4/4 sessions active.")
        assert str(info.value).endswith("(code: CAPACITY_REACHED)")
        await extra.close()
    finally:
        await asyncio.gather(*(c.close() for c in clients))


def test_generic_client_and_validation_errors_keep_the_session(echo_url: str) -> None:
    from openenv.core import GenericAction, GenericEnvClient

    with GenericEnvClient(base_url=echo_url).sync() as env:
        env.reset(episode_id="generic")
        result = env.step(GenericAction(message="hey"))
        assert result.observation["echoed_message"] == "hey"
        assert result.observation["metadata"]["original_message"] == "hey"
        with pytest.raises(RuntimeError) as info:
            env.step({"message": "x", "unexpected": 1})
        assert "(code: VALIDATION_ERROR)" in str(info.value)
        assert info.value.errors[0]["loc"] == ["unexpected"]  # type: ignore[attr-defined]
        assert env.state() == {"episode_id": "generic", "step_count": 1}


def test_rest_transport_with_an_explicit_session(echo_url: str) -> None:
    with httpx.Client(base_url=echo_url, timeout=10) as http:
        sid = http.post("/sessions").json()["session_id"]
        headers = {"OpenEnv-Session-Id": sid}
        try:
            reset = http.post("/reset", json={"episode_id": "rest-ep"}, headers=headers)
            assert reset.status_code == 200 and reset.json()["observation"]["message_length"] == 0
            step = http.post("/step", json={"action": {"message": "abc"}}, headers=headers)
            assert step.status_code == 200
            body = step.json()
            assert body["observation"]["echoed_message"] == "abc" and body["reward"] == pytest.approx(0.3)
            # the HTTP episode continues across requests, unlike upstream's one-shot routes (B1)
            assert http.get("/state", headers=headers).json() == {"episode_id": "rest-ep", "step_count": 1}
            bad = http.post("/step", json={"action": {"msg": "typo"}}, headers=headers)
            assert bad.status_code == 422
            assert http.get("/state", headers=headers).json()["step_count"] == 1
        finally:
            assert http.delete(f"/sessions/{sid}").status_code in (200, 204)


def test_rest_one_shot_routes_and_info_routes(echo_url: str) -> None:
    with httpx.Client(base_url=echo_url, timeout=10) as http:
        step = http.post("/step", json={"action": {"message": "solo"}})
        assert step.status_code == 200 and step.headers["OpenEnv-Session"] == "none"
        assert step.json()["observation"]["echoed_message"] == "solo"
        assert http.get("/health").json() == {"status": "healthy"}
        schema = http.get("/schema").json()
        assert set(schema["action"]["properties"]) == {"metadata", "message"}
        assert schema["action"]["required"] == ["message"]
        assert "echoed_message" in schema["observation"]["properties"]
        assert http.get("/capabilities").json()["env"] == "upstream_style_echo"


def test_mcp_env_over_jsonrpc_http(mcp_echo_url: str) -> None:
    with httpx.Client(base_url=mcp_echo_url, timeout=10) as http:
        listed = http.post("/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "params": {}, "id": 1}).json()
        names = [tool["name"] for tool in listed["result"]["tools"]]
        assert names == ["echo_message", "echo_with_length", "divide"]  # `audit` is production-only
        called = http.post("/mcp", json={"jsonrpc": "2.0", "method": "tools/call", "id": 2, "params": {
            "name": "echo_with_length", "arguments": {"message": "four"}}}).json()
        assert called["result"]["structured_content"] == {"message": "four", "length": 4}


async def test_mcp_tool_client_over_ws_and_jsonrpc(mcp_echo_url: str) -> None:
    from upstream_style_mcp_echo import CallToolAction, ListToolsAction, UpstreamStyleMcpEchoEnv

    from openenv.core.mcp_client import ToolCallFailed

    async with UpstreamStyleMcpEchoEnv(base_url=mcp_echo_url) as env:
        await env.reset()
        assert [t.name for t in await env.list_tools()] == ["echo_message", "echo_with_length", "divide"]
        assert await env.call_tool("echo_message", message="hi") == "hi"
        with pytest.raises(ToolCallFailed) as info:
            await env.call_tool("divide", a=1, b=0)
        assert info.value.error_type == "execution_error" and "division by zero" in str(info.value)
        with pytest.raises(ToolCallFailed) as info:
            await env.call_tool("divide", a="one", b=2)
        assert info.value.error_type == "invalid_args"  # by where it failed, not by message text (B7)
        stepped = await env.step(CallToolAction(tool_name="echo_message", arguments={"message": "via step"}))
        assert stepped.observation.result["data"] == "via step"
        listed = await env.step(ListToolsAction())
        assert [t.name for t in listed.observation.tools][:1] == ["echo_message"]
        state = await env.state()
        assert state.step_count >= 5  # typed, as upstream; the env's own step() override counted every tool call


def test_mcp_tool_client_sync(mcp_echo_url: str) -> None:
    from upstream_style_mcp_echo import UpstreamStyleMcpEchoEnv

    with UpstreamStyleMcpEchoEnv(base_url=mcp_echo_url).sync() as env:
        env.reset()
        assert env.call_tool("echo_with_length", message="ab") == {"message": "ab", "length": 2}
        assert env.has_tool("divide") is True and env.has_tool("audit") is False


async def test_async_env_with_rubric_transform_and_custom_state(guess_url: str) -> None:
    from upstream_style_guess import GuessAction, GuessEnv, GuessState

    async with GuessEnv(base_url=guess_url) as env:
        await env.reset(seed=1)
        state = await env.state()
        assert isinstance(state, GuessState) and 1 <= state.target <= 10 and state.max_attempts == 3
        wrong = 1 if state.target != 1 else 2
        miss = await env.step(GuessAction(guess=wrong))
        closeness = 1.0 - abs(wrong - state.target) / 9.0
        assert miss.reward == pytest.approx(0.2 * closeness)
        assert miss.observation.hint in ("low", "high") and miss.observation.attempts_left == 2
        assert miss.metadata == {"attempts_used": 1}
        hit = await env.step(GuessAction(guess=state.target))
        assert hit.observation.hint == "correct" and hit.done and hit.reward == pytest.approx(1.0)
        async with httpx.AsyncClient(base_url=guess_url) as http:
            schema = (await http.get("/schema")).json()
        assert "target" in schema["state"]["properties"]  # state_cls=GuessState reached /schema


async def test_mcp_tool_client_types_reset_and_state_as_upstream(mcp_echo_url: str) -> None:
    """Upstream's tool clients return ``StepResult`` with an ``Observation`` from ``reset()`` (a
    generic one keeping the env's fields) and a ``State`` from ``state()``, not dicts."""
    from openenv.core import MCPToolClient
    from openenv.core.env_server.types import Observation, State

    async with MCPToolClient(base_url=mcp_echo_url) as env:
        reset = await env.reset(episode_id="typed")
        assert isinstance(reset.observation, Observation)
        assert isinstance(reset.observation.metadata, dict) and reset.observation.done is False
        await env.call_tool("echo_message", message="one")
        state = await env.state()
        assert isinstance(state, State) and state.episode_id == "typed" and state.step_count >= 1


def test_tool_result_is_fastmcps_object_in_the_env_and_a_mapping_on_the_wire() -> None:
    """Inside an env, ``CallToolObservation.result`` is FastMCP's ``CallToolResult`` (upstream's
    MCPEnvironment returned that object); serialized, it is the same mapping as before."""
    from fastmcp.client.client import CallToolResult
    from upstream_style_mcp_echo.server import UpstreamStyleMcpEchoEnvironment

    from openenv.core.env_server.mcp_types import CallToolAction
    from openenv.core.env_server.serialization import serialize_observation

    env = UpstreamStyleMcpEchoEnvironment()
    try:
        obs = env.step(CallToolAction(tool_name="echo_with_length", arguments={"message": "ab"}))
        assert isinstance(obs.result, CallToolResult)
        assert obs.result.data == {"message": "ab", "length": 2} and obs.result.is_error is False
        assert obs.result.content[0].text  # MCP content blocks, as FastMCP gives them
        wire = serialize_observation(obs)["observation"]["result"]
        assert wire["data"] == {"message": "ab", "length": 2}
        assert set(wire) >= {"content", "structured_content", "data", "is_error"}
        assert wire["content"][0]["type"] == "text"
    finally:
        env.close()
