"""``CommandTurnAdapter``: any program that speaks a small JSON-lines protocol, as an RFC 005 harness.

The protocol (one JSON object per line, UTF-8):

* the program starts and prints ``{"type": "ready"}`` when it can take messages (within the
  config's ``startup_timeout_s``);
* each turn, it reads ``{"type": "message", "content": "<the user message>"}`` from stdin and
  prints events ``{"type": "<event>", "data": {...}}`` (``llm_request``, ``llm_response``,
  ``llm_chunk``, ``tool_call``, ``tool_result``, ``text_output``, ``error``), ending the turn with
  ``{"type": "turn_complete", "data": {"response": "<its answer>", "done": false}}``;
* any other stdout line (not JSON, or of an unknown type) becomes a ``text_output`` event with the
  line as ``text``, so a chatty program does not break its turns; a line may be at most
  ``max_line_bytes`` long (cut there). stderr is for logs; only its tail is kept, for errors.

What the program finds in its environment (nothing else of the caller's, beyond ``PATH``,
``LANG``/``LC_ALL``, ``HOME``, ``TMPDIR`` and the config's ``env_vars``):

* ``OPENENV_HARNESS_TOOLS_URL``: the Streamable HTTP MCP endpoint of the env's tools (the bridge),
  ``OPENENV_MCP_CONFIG``: a ``.mcp.json`` file naming it (``{"mcpServers": {"openenv": {"type":
  "http", "url": ...}}}``; at the config's ``mcp_config_path``, else in the working directory), and
  ``OPENENV_HARNESS_TOOLS``: the injected tools as JSON (``name``, ``description``,
  ``input_schema``) — when the env has tools;
* with a ``CaptureGateway``: ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``ANTHROPIC_BASE_URL`` /
  ``ANTHROPIC_API_KEY`` pointing at the gateway with a fresh episode key (and the config's
  ``api_key_env_var``, if named, holding that key too), ``OPENENV_MODEL`` the config's model, so
  every model call of the harness is captured; the episode's trace is in ``traces`` after ``stop``.

The program runs in its own process group; ``stop`` ends the group (SIGTERM, SIGKILL after
``terminate_grace_s``), so helpers it started do not outlive the episode.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openenv.tools.wire import Tool

from .adapter import AgenticHarnessAdapter, HarnessNotRunningError, HarnessStartupError
from .config import HarnessConfig
from .events import HarnessEvent, HarnessEventType
from .process import HarnessProcess

if TYPE_CHECKING:
    from openenv_gateway.gateway import CaptureGateway
    from openenv_gateway.trace import EpisodeTrace

__all__ = ["CommandTurnAdapter"]

_EVENT_TYPES = {t.value: t for t in HarnessEventType}
_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "SYSTEMROOT", "HOME", "TMPDIR")


class CommandTurnAdapter(AgenticHarnessAdapter):
    """Runs ``config.command`` under the JSON-lines protocol (see the module docstring).

    ``gateway``: a started ``CaptureGateway`` whose URL and a per-episode key the program gets.
    ``builtin_tools``: the program's own tool names (env tools with these names are renamed).
    """

    def __init__(self, config: HarnessConfig, *, gateway: CaptureGateway | None = None,
                 builtin_tools: Collection[str] = (), terminate_grace_s: float = 5.0,
                 max_line_bytes: int = 1 << 20) -> None:
        super().__init__(config)
        self.BUILTIN_TOOL_NAMES = frozenset(builtin_tools)  # type: ignore[misc]
        self.gateway = gateway
        self.terminate_grace_s = terminate_grace_s
        self.max_line_bytes = max_line_bytes
        self.process: HarnessProcess | None = None
        #: Traces of the gateway episodes of past harness runs (one per ``start``/``stop``).
        self.traces: list[EpisodeTrace] = []
        self._key: str | None = None
        self._tools: list[Tool] = []
        self._bridge_url: str | None = None

    async def inject_tools(self, tools: list[Tool], bridge_url: str | None = None) -> None:
        self._tools, self._bridge_url = list(tools), bridge_url

    async def start(self, working_directory: str) -> None:
        if self.process is not None and self.process.is_running():
            raise HarnessStartupError("harness process is already running")
        try:
            os.makedirs(working_directory, exist_ok=True)
        except OSError as exc:
            raise HarnessStartupError(f"cannot use working directory {working_directory!r}: {exc}") from exc
        env = {k: os.environ[k] for k in _KEPT_ENV if k in os.environ}
        env.update(self._tool_env(working_directory))
        if self.gateway is not None:
            self._key = self.gateway.open_episode(f"{self.config.name}-{uuid.uuid4().hex[:12]}",
                                                  {"harness": self.config.name})
            base = self.gateway.base_url
            env.update({"OPENAI_BASE_URL": base + "/v1", "OPENAI_API_KEY": self._key,
                        "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": self._key,
                        "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"})
            if self.config.api_key_env_var:
                env[self.config.api_key_env_var] = self._key
        if self.config.model is not None:
            env["OPENENV_MODEL"] = self.config.model
        env.update(self.config.env_vars)
        self.process = HarnessProcess(self.config.command, working_directory, env,
                                      startup_timeout_s=self.config.startup_timeout_s,
                                      terminate_grace_s=self.terminate_grace_s,
                                      max_line_bytes=self.max_line_bytes, inherit_env=False)
        try:
            await self.process.start(ready_check=_is_ready)
        except BaseException:
            await self.stop()
            raise

    def _tool_env(self, working_directory: str) -> dict[str, str]:
        if self._bridge_url is None:
            return {}
        path = Path(self.config.mcp_config_path or os.path.join(working_directory, ".mcp.json"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"mcpServers": {"openenv": {"type": "http", "url": self._bridge_url}}}))
        return {"OPENENV_HARNESS_TOOLS_URL": self._bridge_url, "OPENENV_MCP_CONFIG": str(path),
                "OPENENV_HARNESS_TOOLS": json.dumps([t.model_dump() for t in self._tools])}

    async def stop(self) -> None:
        process, self.process = self.process, None
        try:
            if process is not None:
                await process.stop()
        finally:
            key, self._key = self._key, None
            if key is not None and self.gateway is not None:
                try:
                    self.traces.append(self.gateway.close_episode(key))
                except KeyError:
                    pass

    async def is_alive(self) -> bool:
        return self.process is not None and self.process.is_running()

    @property
    def stderr_tail(self) -> str:
        """The last lines the program wrote to stderr (bounded)."""
        return self.process.drain_stderr() if self.process is not None else ""

    async def send_message_streaming(self, message: str) -> AsyncIterator[HarnessEvent]:
        process = self.process
        if process is None or not process.is_running():
            raise HarnessNotRunningError("harness process is not running")
        await process.write_line(json.dumps({"type": "message", "content": message}))
        while True:
            line = await process.read_line()
            if line is None:  # the program closed its output (exited): the turn ends unfinished
                return
            event = _event_of(line)
            yield event
            if event.type is HarnessEventType.TURN_COMPLETE:
                return


def _is_ready(line: str) -> bool:
    try:
        frame = json.loads(line)
    except ValueError:
        return False
    return isinstance(frame, dict) and frame.get("type") == "ready"


def _event_of(line: str) -> HarnessEvent:
    try:
        frame: Any = json.loads(line)
    except ValueError:
        frame = None
    kind = _EVENT_TYPES.get(frame.get("type")) if isinstance(frame, dict) else None  # type: ignore[arg-type]
    if kind is None or not isinstance(frame.get("data", {}), dict):
        return HarnessEvent(type=HarnessEventType.TEXT_OUTPUT, data={"text": line})
    return HarnessEvent(type=kind, data=frame.get("data") or {})
