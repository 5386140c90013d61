"""``HarnessEnvironment``: an env whose steps are turns of an external harness (upstream's RFC 005).

``reset`` stops whatever harness ran before, starts a fresh one with the env's FastMCP tools
injected (renamed where they clash with the harness's own, served by a loopback bridge under
those names), and ``step(HarnessAction(message=...))`` is one turn: the harness runs its own agent
loop and answers. ``ListToolsAction`` / ``CallToolAction`` keep the kernel's MCP routing, so a
trainer can still list and call the tools directly.

A turn that cannot finish ends the episode instead of raising: a dead harness, a turn past its
budget (``timeout_s``, else the config's ``session_timeout_s``) or a stream that stops without
``TURN_COMPLETE`` gives a terminal observation (``done``, ``metadata.error`` / ``error_type`` /
``turn_events``), after the harness and its bridge are stopped. The rubric (if any) scores every
finished turn. Constructing the env starts nothing; ``close`` stops everything and may be called
again.

The env is async (the session manager awaits it on the server's loop); ``event_listener``, when
set, sees each event of a turn as it happens (the ``/harness`` channel streams them).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.utils import run_async_safely
from openenv.tools.wire import Tool
from openenv.types import Action, Observation, State

from .adapter import AgenticHarnessAdapter, HarnessError, HarnessNotRunningError, HarnessTurnTimeoutError
from .bridge import HarnessMCPBridge, build_bridge_server, fastmcp_tools
from .events import HarnessEvent, HarnessEventType, events_to_metadata
from .tools import resolve_tool_conflicts

__all__ = ["HarnessAction", "HarnessEnvironment"]

log = logging.getLogger("openenv_gateway.agentic")


class HarnessAction(Action):
    """One user message: one conversational turn of the harness."""

    message: str


class HarnessEnvironment(MCPEnvironment):
    """Wraps ``adapter`` (a fresh one per env: it owns one harness program) and ``mcp`` (a FastMCP
    server of the env's tools; an empty one when ``None``). See the module docstring."""

    other_action_type: ClassVar[type[Action] | None] = HarnessAction
    # Upstream's: instances share the config's working directory unless the factory gives each its own.
    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = False

    def __init__(self, adapter: AgenticHarnessAdapter, mcp: Any = None, rubric: Any = None,
                 transform: Any = None) -> None:
        if mcp is None:
            from fastmcp import FastMCP

            mcp = FastMCP("harness-env-tools")
        super().__init__(mcp, transform=transform)
        self.rubric = rubric
        self.adapter = adapter
        self._server = mcp  # kept past close(): MCPEnvironment.close forgets mcp_server
        self._state = State(episode_id=None, step_count=0)
        self._trajectory: list[HarnessEvent] = []
        self._episode_active = False
        self._closed = False
        self._bridge: HarnessMCPBridge | None = None
        #: Called with each event of a turn as it happens (set by a streaming transport).
        self.event_listener: Callable[[HarnessEvent], None] | None = None

    @property
    def state(self) -> State:  # type: ignore[override]
        return self._state

    @property
    def trajectory(self) -> list[HarnessEvent]:
        """Every event of the episode so far, across turns (a copy)."""
        return list(self._trajectory)

    # -- episodes -------------------------------------------------------------------------------

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None,  # type: ignore[override]
                          **kwargs: Any) -> Observation:
        self._episode_active = False
        await self.adapter.stop()  # always: a harness that died alone still holds pipes and threads
        await self._stop_bridge()
        tools = await self._injectable_tools()
        resolved = resolve_tool_conflicts(tools, self.adapter.BUILTIN_TOOL_NAMES)
        bridge_url = None
        try:
            if resolved:
                renames = {new.name: old.name for new, old in zip(resolved, tools, strict=True)
                           if new.name != old.name}
                self._bridge = HarnessMCPBridge(await build_bridge_server(self._server, renames))
                bridge_url = await asyncio.to_thread(self._bridge.start)
            await self.adapter.inject_tools(resolved, bridge_url)
            await self.adapter.start(self.adapter.config.working_directory)
        except BaseException:
            await self._stop_all()  # a half-started harness must not outlive a failed reset
            raise
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        self._trajectory = []
        if self.rubric is not None:
            await self._reset_rubric_async()
        self._episode_active = True
        return Observation(done=False, reward=0.0, metadata={
            "episode_id": self._state.episode_id, "injected_tools": [tool.name for tool in resolved]})

    def reset(self, seed: int | None = None, episode_id: str | None = None,  # type: ignore[override]
              **kwargs: Any) -> Observation:
        return run_async_safely(self.reset_async(seed=seed, episode_id=episode_id, **kwargs))

    async def step_other_async(self, action: Action, timeout_s: float | None = None,
                               **kwargs: Any) -> Observation:
        if not isinstance(action, HarnessAction):
            raise TypeError("HarnessEnvironment only accepts HarnessAction, ListToolsAction, or CallToolAction; "
                            f"got {type(action).__name__}")
        return await self._turn(action, timeout_s)

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return run_async_safely(self.step_other_async(action, timeout_s=timeout_s, **kwargs))

    async def _turn(self, action: HarnessAction, timeout_s: float | None) -> Observation:
        if not self._episode_active:
            raise HarnessNotRunningError("No active episode; call reset() before step()")
        if not await self.adapter.is_alive():
            return await self._terminal("harness process is not running", "harness_crashed")
        budget = timeout_s if timeout_s is not None else self.adapter.config.session_timeout_s
        events: list[HarnessEvent] = []
        try:
            async with asyncio.timeout(budget):
                async for event in self.adapter.send_message_streaming(action.message):
                    events.append(event)
                    if self.event_listener is not None:
                        self.event_listener(event)
            if not events or events[-1].type is not HarnessEventType.TURN_COMPLETE:
                raise HarnessError("harness event stream ended without a TURN_COMPLETE event")
        except TimeoutError:
            return await self._terminal(f"harness turn exceeded {budget} seconds", "turn_timeout", events)
        except HarnessTurnTimeoutError as exc:  # before HarnessError: the adapter's own timeout
            return await self._terminal(str(exc), "turn_timeout", events)
        except HarnessError as exc:
            return await self._terminal(str(exc), "harness_crashed", events)
        except asyncio.CancelledError:
            self._episode_active = False  # the harness is mid-turn: this episode cannot go on
            raise
        last = events[-1].data
        self._trajectory.extend(events)
        self._state.step_count += 1
        observation = Observation(done=bool(last.get("done", False)), reward=0.0, metadata={
            "response": str(last.get("response", "")), "turn_events": events_to_metadata(events),
            "turn_number": self._state.step_count})
        if self.rubric is not None:
            observation.reward = await self._apply_rubric_async(action, observation)
        return observation

    async def _terminal(self, message: str, error_type: str, events: list[HarnessEvent] | None = None) -> Observation:
        """Stop the harness and end the episode with ``message`` (the turn's events so far kept)."""
        await self._stop_all()
        self._episode_active = False
        error = HarnessEvent(type=HarnessEventType.ERROR, data={"message": message, "recoverable": False})
        turn = [*(events or []), error]
        self._trajectory.extend(turn)
        return Observation(done=True, reward=0.0, metadata={
            "error": message, "error_type": error_type, "turn_events": events_to_metadata(turn)})

    async def _injectable_tools(self) -> list[Tool]:
        """The env's visible tools that the bridge can serve (those of the FastMCP server)."""
        served = set(await fastmcp_tools(self._server))
        tools = [spec.step_entry() for spec in self.list_tools()]
        skipped = sorted(t.name for t in tools if t.name not in served)
        if skipped:
            log.warning("not injecting tools into harness %r that its tool bridge cannot serve (mode-specific "
                        "tools registered with self.tool()): %s", self.adapter.config.name, ", ".join(skipped))
        return [t for t in tools if t.name in served]

    # -- teardown -------------------------------------------------------------------------------

    async def _stop_bridge(self) -> None:
        bridge, self._bridge = self._bridge, None
        if bridge is not None:
            try:
                await asyncio.to_thread(bridge.stop)
            except Exception:
                log.exception("stopping the harness tool bridge failed")

    async def _stop_all(self) -> None:
        try:
            await asyncio.shield(self.adapter.stop())
        except Exception:
            log.exception("stopping harness %r failed", self.adapter.config.name)
        await self._stop_bridge()

    async def close_async(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._episode_active = False
        await self._stop_all()
        super().close()

    def close(self) -> None:
        if not self._closed:
            run_async_safely(self.close_async())
