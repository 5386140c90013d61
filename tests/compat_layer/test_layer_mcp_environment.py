"""``MCPEnvironment(mcp_server)``: a FastMCP server's tools adapted into the kernel's tool registry."""

from __future__ import annotations

from typing import Any

import pytest
from fastmcp import Context, FastMCP
from upstream_style_mcp_echo.server import UpstreamStyleMcpEchoEnvironment

from openenv.core import UnsupportedFeature
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
)
from openenv.core.env_server.types import Action, Observation, State
from openenv.tools import ToolEnvironment


class Minimal(MCPEnvironment):
    def __init__(self, mcp: Any) -> None:
        super().__init__(mcp)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        return Observation()

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return Observation(metadata={"handled": type(action).__name__})

    @property
    def state(self) -> State:
        return State()


def test_fastmcp_tools_become_kernel_tools() -> None:
    env = UpstreamStyleMcpEchoEnvironment()
    try:
        assert isinstance(env, ToolEnvironment)
        listed = env.step(ListToolsAction())
        assert isinstance(listed, ListToolsObservation)
        by_name = {tool.name: tool for tool in listed.tools}
        assert list(by_name) == ["echo_message", "echo_with_length", "divide"]
        assert by_name["echo_message"].description == "Echo back the provided message."
        assert by_name["divide"].input_schema["properties"]["a"]["type"] == "number"
        assert by_name["divide"].input_schema["required"] == ["a", "b"]
        called = env.step(CallToolAction(tool_name="echo_with_length", arguments={"message": "abc"}))
        assert isinstance(called, CallToolObservation) and called.error is None
        assert called.result.data == {"message": "abc", "length": 3}  # FastMCP's CallToolResult, as upstream
        assert called.result.is_error is False and called.result.content[0].type == "text"
        assert env.state.step_count == 2  # the env's own step() override ran
    finally:
        env.close()


def test_tool_errors_are_in_band_and_classified_by_where_they_happened() -> None:
    env = UpstreamStyleMcpEchoEnvironment()
    try:
        missing = env.step(CallToolAction(tool_name="nope", arguments={}))
        assert missing.error is not None and missing.error.error_type == "tool_not_found"
        bad = env.step(CallToolAction(tool_name="divide", arguments={"a": 1}))
        assert bad.error is not None and bad.error.error_type == "invalid_args"
        boom = env.step(CallToolAction(tool_name="divide", arguments={"a": 1, "b": 0}))
        assert boom.error is not None and boom.error.error_type == "execution_error"
        assert "division by zero" in boom.error.message
    finally:
        env.close()


def test_mode_specific_tools_follow_the_server_mode() -> None:
    env = UpstreamStyleMcpEchoEnvironment()
    try:
        assert "audit" not in [t.name for t in env.list_tools()]
        hidden = env.step(CallToolAction(tool_name="audit", arguments={"note": "n"}))
        assert hidden.error is not None and hidden.error.error_type == "tool_not_found"
        env.mode = "production"  # what the session manager sets from the server's mode (B5)
        assert "audit" in [t.name for t in env.list_tools()]
        shown = env.step(CallToolAction(tool_name="audit", arguments={"note": "n"}))
        assert shown.error is None and shown.result.data == "audited: n"
    finally:
        env.close()


def test_other_actions_go_to_step_impl() -> None:
    class Ping(Action):
        ping: int

    env = UpstreamStyleMcpEchoEnvironment()
    try:
        obs = env.step(Ping(ping=1))
        assert obs.metadata["error"].startswith("Unknown action type: Ping")
    finally:
        env.close()


def test_reserved_tool_names_are_refused_as_upstream() -> None:
    mcp = FastMCP("bad")

    @mcp.tool
    def reset() -> str:
        return "no"

    with pytest.raises(ValueError) as info:
        Minimal(mcp)
    assert str(info.value).startswith("MCP tools cannot use reserved names: ['reset']. Reserved names are: "
                                      "['close', 'reset', 'state', 'step']")
    env = Minimal(FastMCP("ok"))
    with pytest.raises(ValueError, match="reserved"):

        @env.tool()
        def step() -> str:
            return "no"

    with pytest.raises(ValueError, match="Invalid mode 'staging'"):
        env.tool(mode="staging")


def test_tools_added_to_the_server_later_are_picked_up() -> None:
    mcp = FastMCP("late")
    env = Minimal(mcp)
    assert env.list_tools() == []

    @mcp.tool
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    obs = env.step(CallToolAction(tool_name="shout", arguments={"text": "hi"}))
    assert obs.error is None and obs.result.data == "HI"
    assert [t.name for t in env.list_tools()] == ["shout"]
    assert env.step(Action()).metadata == {"handled": "Action"}


def test_async_fastmcp_tools_and_code_mode() -> None:
    mcp = FastMCP("async")

    @mcp.tool
    async def twice(n: int) -> int:
        return 2 * n

    env = Minimal(mcp)
    obs = env.step(CallToolAction(tool_name="twice", arguments={"n": 21}))
    assert obs.error is None and obs.result.data == 42
    assert env.supports_code_mode is False and set(env.get_callables()) == {"twice"}
    with pytest.raises(UnsupportedFeature, match="B13"):
        env.execute_code("result = twice(2)")
    env.close()
    assert env.mcp_server is None


def test_tools_that_need_a_fastmcp_context_are_refused_at_construction() -> None:
    mcp = FastMCP("ctx")

    @mcp.tool
    def progress(x: int, ctx: Context) -> int:
        return x

    with pytest.raises(UnsupportedFeature, match="MCP tool 'progress': parameters FastMCP injects itself \\(ctx;"):
        Minimal(mcp)


def test_upstream_constructor_arguments_belong_to_the_layer() -> None:
    """``transform`` (and ``rubric``) are upstream's constructor arguments: the layer's
    ``Environment`` keeps them, the kernel's ``Environment`` / ``ToolEnvironment`` take none."""
    from openenv.core.env_server.interfaces import Environment as CompatEnvironment
    from openenv.env import Environment as KernelEnvironment

    mark = lambda obs: obs  # noqa: E731
    env = MCPEnvironment.__new__(Minimal)
    MCPEnvironment.__init__(env, FastMCP("t"), transform=mark)
    try:
        assert env.transform is mark and env.rubric is None
        assert isinstance(env, CompatEnvironment)
    finally:
        env.close()
    for cls in (KernelEnvironment, ToolEnvironment):
        assert "transform" not in cls.__dict__ and "rubric" not in cls.__dict__
        with pytest.raises(TypeError):
            cls(transform=mark)  # type: ignore[call-arg]
