"""Test support: tool envs, the kit's live server on 127.0.0.1, JSON-RPC helpers (``wait_until``
is the kit's, re-exported)."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx

import openenv_transport_mcp.plugin
from openenv.env import Environment
from openenv.plugins import PluginManager
from openenv.server import create_app
from openenv.testing import LiveServer, wait_until
from openenv.tools import ToolEnvironment, tool
from openenv.types import Action, Observation, State

try:  # the /ws tunnel and attach tests need the WebSocket transport too
    import openenv_transport_ws.plugin as ws_plugin
except ImportError:  # pragma: no cover - the per-package CI session installs this package alone
    ws_plugin = None  # type: ignore[assignment]

__all__ = ["RELEASE", "CalcEnv", "PlainEnv", "make_app", "post", "rpc", "running", "wait_until", "ws_plugin"]

#: Set by tests to let a hanging tool return (every wait is bounded anyway).
RELEASE = threading.Event()


class CalcEnv(ToolEnvironment):
    """Tools for every outcome: success, raise, hang, mode-restricted, rewarding."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    rewarded: list[str] = []

    @tool
    def echo_message(self, message: str) -> str:
        """Echo back the provided message.

        Args:
            message: What to echo.
        """
        return message

    @tool
    def echo_with_length(self, message: str) -> dict[str, Any]:
        """Echo back the message with its length."""
        return {"message": message, "length": len(message)}

    @tool
    def divide(self, a: float, b: float) -> float:
        """Divide a by b."""
        return a / b

    @tool(timeout_s=0.3)
    def hang(self) -> None:
        """Never finishes in time."""
        RELEASE.wait(5)

    @tool
    def finish(self, answer: str) -> str:
        """End the episode."""
        return answer

    @tool(mode="production")
    def submit(self, answer: str) -> str:
        """Production-only tool."""
        return f"submitted {answer}"

    @tool(mode="simulation")
    def set_seed(self, seed: int) -> int:
        """Simulation-only control."""
        return seed

    def reward_for_tool_call(self, tool_name: str, arguments: dict[str, Any], result: Any,
                             error: Any) -> tuple[float | None, bool]:
        CalcEnv.rewarded.append(tool_name)
        if tool_name == "finish":
            return (1.0 if result == "42" else 0.0), True
        return None, False


class PlainAction(Action):
    message: str


class PlainObservation(Observation):
    echoed: str = ""


class PlainEnv(Environment[PlainAction, PlainObservation, State]):
    """A non-tool env: JSON-RPC tools/* must say it does not support MCP (docs/protocol.md §4.5 kind D)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()))

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> PlainObservation:
        return PlainObservation(echoed="ready")

    def step(self, action: PlainAction, timeout_s: float | None = None, **kwargs: Any) -> PlainObservation:
        self._state.step_count += 1
        return PlainObservation(echoed=action.message)

    @property
    def state(self) -> State:
        return self._state


def make_app(env: Any = CalcEnv, *, ws: bool = True, **settings: Any) -> Any:
    """``create_app`` with a fresh strict plugin manager holding only the transports under test."""
    pm = PluginManager(strict=True, entry_points=[])
    pm.register(openenv_transport_mcp.plugin)
    transports = ["mcp"]
    if ws and ws_plugin is not None:
        pm.register(ws_plugin)
        transports.append("ws")
    settings.setdefault("max_sessions", 4)
    return create_app(env, transports=transports, plugin_manager=pm, **settings)


@contextlib.contextmanager
def running(app: Any) -> Iterator[str]:
    """Serve ``app`` with the kit's ``LiveServer`` (127.0.0.1, a free port, a thread); yield its
    base URL. Hanging tools are released before it stops."""
    try:
        with LiveServer(app) as server:
            try:
                yield server.url
            finally:
                RELEASE.set()
    finally:
        RELEASE.clear()


def rpc(method: str, params: dict[str, Any] | None = None, id: Any = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": id}
    if params is not None:
        body["params"] = params
    return body


def post(client: httpx.Client, base: str, body: Any, **kwargs: Any) -> httpx.Response:
    if isinstance(body, str | bytes):
        return client.post(base + "/mcp", content=body, **kwargs)
    return client.post(base + "/mcp", json=body, **kwargs)
