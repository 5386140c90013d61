"""What a server transport receives: the contract between the kernel's server and its plugins.

* ``ServerConfig`` — everything that shapes one server (secure, upstream-compatible defaults).
* ``ServerContext`` — what every transport is constructed with: the session manager (the owner of
  every session rule), the env's types, the config, and typed shared services such as the MCP
  request handler.
* ``TransportOptions`` — the base of a transport's own options. A transport declares
  ``options_type: ClassVar[type[TransportOptions]]``; the server validates the options given for it
  (``ServerConfig.transport_options[name]``) at start-up and
  hands the transport the instance (``ServerContext.options_for``). An unknown or ill-typed option
  is a ``ConfigError`` naming the transport and the valid options.

``openenv.server`` re-exports ``ServerConfig`` and ``ServerContext`` for compatibility.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError

from openenv.errors import ConfigError, RuleViolation, did_you_mean
from openenv.guard import DEFAULT_MAX_HEADER_BYTES, DEFAULT_MAX_HEADER_COUNT
from openenv.limits import MAX_BODY_BUDGET_BYTES, BodyBudget
from openenv.modes import Mode
from openenv.types import Action, EnvironmentMetadata, Observation, State

if TYPE_CHECKING:
    from openenv.interfaces import ServerTransport
    from openenv.plugins import PluginManager
    from openenv.rubric import Rubric
    from openenv.sessions import Session, SessionManager
    from openenv.task_api import TaskService

__all__ = [
    "AUTH_HEADER",
    "DEFAULT_HEADER_TIMEOUT_S",
    "DEFAULT_MAX_CONNECTIONS",
    "HeaderLookup",
    "McpRequestHandler",
    "ServerConfig",
    "ServerContext",
    "TransportOptions",
    "server_config",
]

log = logging.getLogger("openenv.server")

AUTH_HEADER = "authorization"

#: Seconds a new connection has to complete its first request's headers (``serve``).
DEFAULT_HEADER_TIMEOUT_S = 10.0
#: Connections held at once, HTTP and WebSocket together (``serve``).
DEFAULT_MAX_CONNECTIONS = 2048


@dataclass
class ServerConfig:
    """Everything that shapes one server. Defaults are the secure, upstream-compatible ones."""

    host: str = "127.0.0.1"
    port: int = 8000
    #: Concurrent sessions. ``None``: ``DEFAULT_CONCURRENT_SESSIONS`` (64) for an env declaring
    #: ``SUPPORTS_CONCURRENT_SESSIONS = True``, else 1 (``openenv.sessions.default_max_sessions``).
    max_sessions: int | None = None
    #: ``None``: ``$OPENENV_MODE``, else simulation (``openenv.modes.Mode.parse``).
    mode: Mode | str | None = None
    #: In production mode, refuse ``reset``/``step`` on every session too (docs/protocol.md §11 B4; off by default).
    strict_production: bool = False
    token: str | None = None
    #: Several credentials: token → principal name (``--tokens-file``). Sessions opened with one
    #: token belong to its principal; tokens naming the same principal share sessions.
    tokens: dict[str, str] | None = None
    #: Deadline of each reset/step/state (seconds; ``None``: none). A call on a thread or in a worker
    #: process that overruns it fails its session and frees the slot (``openenv.sessions``).
    step_timeout_s: float | None = 300.0
    #: Deadline of the env factory, per session.
    factory_timeout_s: float | None = 300.0
    #: ``"thread"`` (default) or ``"process"``: each session's env in a worker process of its own,
    #: killed when a call overruns (``openenv.sessions.isolation``).
    isolation: str = "thread"
    idle_timeout_s: float | None = 300.0
    max_message_bytes: int = 100 * 1024 * 1024
    #: Bytes of request bodies read at once across all connections (``openenv.limits.BodyBudget``).
    max_body_budget_bytes: int = MAX_BODY_BUDGET_BYTES
    #: Most headers / header bytes one request may carry (more: 431, ``openenv.guard``).
    max_header_count: int = DEFAULT_MAX_HEADER_COUNT
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    #: Seconds a new connection has to send its first request's headers (``serve`` only).
    header_timeout_s: float | None = DEFAULT_HEADER_TIMEOUT_S
    #: Connections held at once; past it the oldest silent one is shed (``serve`` only).
    max_connections: int | None = DEFAULT_MAX_CONNECTIONS
    #: Seconds the event loop may go without a tick before the blocking session is logged
    #: (``openenv.watchdog``; ``None`` disables the watchdog).
    loop_block_warn_s: float | None = 1.0
    #: Seconds a shutdown (SIGINT/SIGTERM) may take before the process exits anyway (``serve`` only).
    shutdown_timeout_s: float | None = 15.0
    ping_interval_s: float | None = 20.0
    ping_timeout_s: float | None = 20.0
    #: Transport names to mount; ``None`` mounts every installed transport.
    transports: Sequence[str] | None = None
    env_name: str | None = None
    #: Options per transport name (``{"ws": {"max_batch_actions": 64}}``), validated at start-up
    #: against each transport's ``options_type``.
    transport_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The server's rubric: a ``NAME[=CONFIG]`` spec (``openenv serve --rubric``), a built
    #: ``openenv.rubric.Rubric``, or None for the env's own declaration (``openenv.sessions.scoring``).
    rubric: str | Rubric | None = None

    def __post_init__(self) -> None:
        self.mode = Mode.parse(self.mode)
        if self.strict_production and self.mode is not Mode.PRODUCTION:
            raise ConfigError(
                "strict_production only applies in production mode (it refuses reset/step there); "
                f"this server runs in {self.mode.value} mode. Pass mode='production' "
                "(--mode production or OPENENV_MODE=production), or drop strict_production.")
        if self.isolation not in ("thread", "process"):
            raise ConfigError(f"isolation must be 'thread' or 'process', got {self.isolation!r}.")
        if self.tokens is not None:
            bad = [p for t, p in self.tokens.items() if not (isinstance(t, str) and t and isinstance(p, str) and p)]
            if bad or not self.tokens:
                raise ConfigError("tokens must map each non-empty token to a non-empty principal name "
                                  '(a JSON object {"<token>": "<principal>", ...}).')
        if self.max_message_bytes < 1024:
            raise ConfigError("max_message_bytes must be at least 1024")
        if self.max_sessions is not None and self.max_sessions < 1:
            raise RuleViolation(f"max_sessions must be at least 1, got {self.max_sessions}.")


#: Why settings that no longer exist are gone, and what to do instead.
_REMOVED_SETTINGS = {
    "workers": "sessions live in one process's memory, so one process serves them all (several "
               "worker processes would each see only their own sessions). Scale out with several "
               "servers instead (a provider with replicas, or a client-side pool).",
    "pool_size": "each blocking session runs on a thread of its own; there is no pool to size.",
    "extra": "give a transport's options under its name: transport_options={'ws': {...}}.",
}


def server_config(**settings: Any) -> ServerConfig:
    """``ServerConfig(**settings)``, with a ``ConfigError`` naming the fix for a setting that does
    not exist (a near miss, a removed setting, a transport's option given flat)."""
    known = [f.name for f in dataclasses.fields(ServerConfig)]
    for key in settings:
        if key in known:
            continue
        if key in _REMOVED_SETTINGS:
            raise ConfigError(f"The server setting '{key}' was removed: {_REMOVED_SETTINGS[key]}")
        raise ConfigError(f"Unknown server setting '{key}'.{did_you_mean(key, known)} A transport's own "
                          f"option goes under the transport's name: transport_options={{'<transport>': "
                          f"{{'{key}': ...}}}}.")
    return ServerConfig(**settings)


class TransportOptions(BaseModel):
    """Base of a transport's declared options: typed fields with defaults; unknown keys refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def parse(cls, transport: str, values: Mapping[str, Any]) -> TransportOptions:
        """Validate ``values`` for ``transport``; ``ConfigError`` naming each bad option."""
        try:
            return cls.model_validate(dict(values))
        except PydanticValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(options)'}: {err['msg']}" for err in exc.errors())
            valid = ", ".join(sorted(cls.model_fields)) or "none"
            raise ConfigError(f"Invalid options for transport '{transport}': {problems}. "
                              f"Its options are: {valid}.") from None


class HeaderLookup(Protocol):
    """Request headers as the context reads them: case-insensitive ``get`` (Starlette's ``Headers``,
    or any object with the same ``get``)."""

    def get(self, key: str, /) -> str | None: ...


class McpRequestHandler(Protocol):
    """Answers a JSON-RPC request on a session (``ServerContext.mcp_handler``, set by the MCP
    transport; the WebSocket transport calls it for ``{"type":"mcp"}`` frames)."""

    async def __call__(self, session: Session, request: dict[str, Any]) -> dict[str, Any] | None:
        """The JSON-RPC response; ``None`` for a notification (the WebSocket transport then sends
        upstream's ``{"id": null}`` reply, since it owes one reply per frame)."""
        ...


@dataclass
class ServerContext:
    """What transports get: the session manager, the env's types, the config and shared services."""

    sessions: SessionManager
    config: ServerConfig
    env_name: str
    action_type: type[Action]
    observation_type: type[Observation]
    state_type: type[State]
    env_class: type | None
    plugin_manager: PluginManager
    transports: list[ServerTransport] = field(default_factory=list)
    #: What ``reset`` returns, for ``GET /schema`` (defaults to the env class's, else ``observation_type``).
    reset_observation_type: type[Observation] | None = None
    #: JSON-RPC handler for MCP requests arriving on any carrier. ``None``: the env is not served
    #: over MCP (no MCP transport mounted).
    mcp_handler: McpRequestHandler | None = None
    #: Each mounted transport's validated options, by transport name (see ``options_for``).
    transport_options: dict[str, TransportOptions] = field(default_factory=dict)
    #: Bytes of request bodies being read right now, across every connection and transport.
    body_budget: BodyBudget = field(default_factory=BodyBudget)
    #: The Task API every transport answers from (``openenv.task_api``); set by ``create_app``.
    task_service: TaskService | None = None

    @property
    def mode(self) -> Mode:
        return self.sessions.mode

    def options_for(self, transport: type[ServerTransport] | ServerTransport) -> Any:
        """The validated options of ``transport`` (its ``options_type`` instance; defaults when none
        were given). ``RuleViolation`` if the transport declares no ``options_type``."""
        name = transport.name
        found = self.transport_options.get(name)
        if found is None:
            options_type = getattr(transport, "options_type", None)
            if options_type is None:
                raise RuleViolation(f"Transport '{name}' reads options but declares none: give it "
                                    "`options_type: ClassVar[type[TransportOptions]]`.")
            found = self.transport_options[name] = options_type()
        return found

    def metadata(self) -> EnvironmentMetadata:
        """Metadata of the env, from the class (``get_metadata`` is called on a bare instance only
        when the class overrides it, and never during start-up)."""
        cls: Any = self.env_class
        if cls is not None and "get_metadata" in _overrides(cls):
            try:
                # A live session's env answers best; otherwise a bare instance (no __init__, so no
                # env is built and nothing counts against capacity). Constant metadata works
                # either way; anything that needs __init__ state falls back to the defaults.
                live = next((s.env for s in self.sessions.sessions() if s.env is not None), None)
                md = (live if live is not None else cls.__new__(cls)).get_metadata()
                if isinstance(md, EnvironmentMetadata):
                    return md
                if isinstance(md, dict):
                    return EnvironmentMetadata(**md)
                return EnvironmentMetadata(**md.model_dump())
            except Exception:
                log.debug("get_metadata on a bare instance failed; using defaults", exc_info=True)
        name = self.env_name
        return EnvironmentMetadata(name=name, description=f"{name} environment", version="1.0.0")

    @property
    def auth(self) -> bool:
        """Whether requests must present a token (``token`` or ``tokens`` configured)."""
        return bool(self.config.token or self.config.tokens)

    def authorized(self, headers: HeaderLookup) -> bool:
        """Whether request headers carry a configured token (always True without one)."""
        if not self.auth:
            return True
        return self._principal_of(_presented_token(headers)) is not None

    def _principal_of(self, given: str) -> str | None:
        """The principal of token ``given`` (constant-time over every configured token), or None."""
        found: str | None = None
        raw = given.encode()
        token = self.config.token
        if token and hmac.compare_digest(raw, token.encode()):
            found = "token:" + hashlib.sha256(raw).hexdigest()[:32]
        for candidate, name in (self.config.tokens or {}).items():
            if hmac.compare_digest(raw, candidate.encode()) and found is None:
                found = "principal:" + name
        return found

    def principal(self, headers: HeaderLookup) -> str | None:
        """Who is calling, as transports record it in ``Session.owner``.

        ``None`` without token auth (anyone may use any session). With it, a digest of the token
        the request presents (``"token:<32 hex digits>"``), never the token itself, so a session's
        owner can be logged or compared without holding the secret; with ``tokens``, the named
        principal (``"principal:<name>"``). Sessions opened over any transport with the same
        credential get the same owner. (A request with several ``Authorization`` headers never
        gets here: the kernel's guard refuses it.)
        """
        if not self.auth:
            return None
        given = _presented_token(headers)
        return self._principal_of(given) or "token:" + hashlib.sha256(given.encode()).hexdigest()[:32]


def _presented_token(headers: HeaderLookup) -> str:
    """The token a request presents: ``Authorization: Bearer <t>``, else ``X-OpenEnv-Token``."""
    value = headers.get(AUTH_HEADER) or ""
    scheme, _, given = value.partition(" ")
    if scheme.lower() != "bearer":
        given = headers.get("x-openenv-token") or ""
    return str(given)


def _overrides(cls: type) -> set[str]:
    from openenv.env import Environment

    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is Environment or klass is object:
            break
        names.update(klass.__dict__)
    return names
