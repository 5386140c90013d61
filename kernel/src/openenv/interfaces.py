"""Abstract interfaces that plugins implement: transports, client connectors, providers, rubrics.

Each required member is abstract and documented with its contract. The reusable contract test
suites in ``openenv.testing`` check implementations against these promises.
"""

from __future__ import annotations

import os
import socket
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from openenv.rubric import Rubric as _KernelRubric

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from openenv.context import ServerContext

__all__ = [
    "ClientConnector",
    "ConnectOptions",
    "Connection",
    "EngineUnavailable",
    "HandleInfo",
    "LaunchSpec",
    "Provider",
    "ProviderHandle",
    "Rubric",
    "ServerTransport",
    "owner_id",
]


# -- transports -----------------------------------------------------------------------------------


class ServerTransport(ABC):
    """Server side of a transport: contributes routes to the app that serves one env.

    A transport is a thin adapter: it turns frames or requests into calls on
    ``ctx.sessions`` (the transport-independent ``SessionManager``) and results back into frames,
    parsing each inbound message once and serialising each reply once.
    """

    #: Registry name, e.g. ``"ws"``.
    name: ClassVar[str] = ""
    #: Paths this transport authenticates itself (the kernel's header-only token check lets them
    #: through): a transport listing a path here must refuse every request without a valid token.
    self_authenticated_paths: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    @abstractmethod
    def routes(self) -> list[BaseRoute]:
        """Starlette routes to mount (paths are absolute, e.g. ``/ws``)."""

    async def startup(self) -> None:  # noqa: B027 - optional hook
        """Called once when the server starts, before the first connection."""

    async def shutdown(self) -> None:  # noqa: B027 - optional hook
        """Called once when the server stops, after connections are closed."""

    def capabilities(self) -> dict[str, Any]:
        """Extra capability data advertised at ``GET /capabilities`` (docs/protocol.md §12)."""
        return {}


@dataclass
class ConnectOptions:
    """How a client connection is opened. Defaults match upstream's client (docs/protocol.md §8.1, §3.8)."""

    headers: dict[str, str] = field(default_factory=dict)
    connect_timeout_s: float = 10.0
    message_timeout_s: float | None = 60.0
    max_message_bytes: int = 100 * 1024 * 1024
    ping_interval_s: float | None = 20.0
    ping_timeout_s: float | None = 20.0
    #: Attach to an existing server session instead of creating one (``/ws?session_id=``).
    session_id: str | None = None
    #: Ask for the ``binary_images`` extension: observation images as binary frames (docs/protocol.md
    #: §12); a transport that has no binary frames ignores it.
    binary_images: bool = False


class Connection(ABC):
    """One client connection = one server session. Frames are JSON objects (dicts).

    Replies are correlated by position: exactly one reply per request, in order.
    """

    @abstractmethod
    async def send(self, frame: dict[str, Any]) -> None:
        """Send one frame. Raises ``SessionLostError`` if the connection is gone."""

    @abstractmethod
    async def receive(self) -> dict[str, Any]:
        """Receive the next frame. Raises ``SessionLostError`` if the connection closed first."""

    async def request(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Send a frame and return its reply."""
        await self.send(frame)
        return await self.receive()

    @abstractmethod
    async def close(self) -> None:
        """Close gracefully (``{"type":"close"}`` where the protocol has it). Idempotent."""

    @abstractmethod
    async def abort(self) -> None:
        """Drop the connection at once without a goodbye (after a timeout). Idempotent."""

    def discard(self) -> None:
        """Drop the connection from outside its event loop (that loop may be closed already), so
        the server ends the session now instead of when the socket is collected. No I/O on any
        loop; idempotent. The default does nothing (a connection with no socket of its own, e.g.
        stateless HTTP, leaves its session to the server's idle timeout)."""
        return None

    @property
    @abstractmethod
    def closed(self) -> bool:
        """True once the connection can no longer carry frames."""


class ClientConnector(ABC):
    """Client side of a transport: opens ``Connection``s to a server base URL."""

    #: URL schemes this connector handles, e.g. ``("ws", "wss", "http", "https")``.
    schemes: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    async def connect(self, base_url: str, options: ConnectOptions) -> Connection:
        """Open a connection to the env served at ``base_url`` (no path suffix).

        Raises ``ConnectionError("Failed to connect to <url>: <reason>")`` on failure.
        """


# -- providers ------------------------------------------------------------------------------------


def owner_id() -> str:
    """Identity of this process as an owner of provider resources: ``host:pid:start-time``.

    Resources are labelled with it so that ``gc`` can tell whether their owner is still alive.
    """
    return f"{socket.gethostname()}:{os.getpid()}:{_process_start_ticks(os.getpid())}"


def _process_start_ticks(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return str(int(time.time()))


def owner_alive(owner: str) -> bool:
    """Whether the process named by an ``owner_id()`` string still runs (same host only)."""
    try:
        host, pid_text, ticks = owner.split(":")
        pid = int(pid_text)
    except ValueError:
        return False
    if host != socket.gethostname():
        return True  # cannot know; never collect another host's resources
    if not os.path.exists(f"/proc/{pid}"):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return _process_start_ticks(pid) == ticks


class EngineUnavailable(RuntimeError):
    """The engine a provider drives (Docker, a cluster, a cloud API) is not there.

    Raise it from ``ps``/``gc`` (and ``start``) when the optional engine is absent or unreachable;
    the message says what is missing and how to get it. ``openenv providers ps``/``gc`` report it
    in one line per provider and still succeed: no engine means nothing of this provider runs.
    """


@dataclass
class LaunchSpec:
    """What to start. Providers ignore fields that do not apply to them (and say so in docs)."""

    #: Env name (as registered), or for container providers an image name.
    env: str
    image: str | None = None
    #: Sessions the server holds at once. ``None`` (the default) leaves it to the server, as
    #: ``openenv serve`` without ``--max-sessions`` does: many for an env with
    #: ``SUPPORTS_CONCURRENT_SESSIONS = True``, 1 for any other (docs/sessions.md).
    max_sessions: int | None = None
    #: Environment variables for the env server; values may be secrets: never logged or put in argv.
    env_vars: dict[str, str] = field(default_factory=dict)
    #: Optional bearer token the server will require.
    token: str | None = None
    startup_timeout_s: float = 60.0
    mode: str = "simulation"
    #: Provider-specific options (``cpus``, ``memory``, ``network``, ``replicas``…).
    options: dict[str, Any] = field(default_factory=dict)

    def max_sessions_args(self) -> list[str]:
        """``openenv serve`` arguments for ``max_sessions``: ``["--max-sessions", "N"]``, or none
        when it is ``None`` (the server's default applies)."""
        return [] if self.max_sessions is None else ["--max-sessions", str(int(self.max_sessions))]


@dataclass
class HandleInfo:
    """A resource a provider started, as seen by ``ps``/``gc``."""

    provider: str
    id: str
    owner: str
    base_url: str | None = None
    status: str = "unknown"
    env: str | None = None


class ProviderHandle(ABC):
    """A running env server started by a provider.

    Construct it once the server's address is known, with keyword arguments; empty values are
    refused (a handle always says which provider started what, and where it listens)::

        super().__init__(provider=self_provider.name, id=server_id, base_url="http://127.0.0.1:8000")
    """

    provider: str
    id: str
    base_url: str

    def __init__(self, *, provider: str, id: str, base_url: str) -> None:
        for key, value in (("provider", provider), ("id", id), ("base_url", base_url)):
            if not isinstance(value, str) or not value:
                from openenv.errors import RuleViolation

                raise RuleViolation(
                    f"{type(self).__name__}: a ProviderHandle needs a non-empty {key}= (got "
                    f"{value!r}). Build the handle once the server's address is known and pass "
                    "provider=, id= and base_url= to ProviderHandle.__init__."
                )
        self.provider, self.id, self.base_url = provider, id, base_url

    @abstractmethod
    def wait_ready(self, timeout_s: float) -> None:
        """Block until ``/health`` answers and one protocol round-trip succeeds.

        Called by the provider's ``start`` (not by users of the handle); calling it again on a
        ready server returns at once.

        Raises ``TimeoutError`` (with the log tail) if not ready in time, or ``RuntimeError``
        at once if the server process/container exited.
        """

    @abstractmethod
    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the server: graceful first, forced after ``timeout_s``; always removes it.

        Idempotent: a second call, or a call after the server died, is a no-op.
        """

    @abstractmethod
    def is_running(self) -> bool:
        """Whether the server is still up."""

    def logs(self, tail: int = 50) -> str:
        """The last ``tail`` lines of the server's output, if the provider keeps them."""
        return ""

    def __enter__(self) -> ProviderHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Provider(ABC):
    """Starts env servers somewhere (a subprocess, a container, a cloud sandbox)."""

    #: Registry name, e.g. ``"local"``.
    name: ClassVar[str] = ""
    #: What the provider needs beyond ``cls()`` on this machine to start an env (a cluster,
    #: credentials, an image), and where its own tests meet that need; empty when ``cls()`` can start
    #: ``echo`` here. The installed-plugin contract run skips a provider that declares it.
    requires: ClassVar[str] = ""

    @abstractmethod
    def start(self, spec: LaunchSpec) -> ProviderHandle:
        """Start a server for ``spec`` and return a handle that is already ready.

        Readiness is the provider's job: ``start`` calls the handle's ``wait_ready`` (within
        ``spec.startup_timeout_s``) before returning, so callers use ``handle.base_url`` at once and
        never call ``wait_ready`` themselves. Every failure path cleans up what was started before
        raising (``TimeoutError``, or ``RuntimeError`` when the server died during start-up).
        Raise ``EngineUnavailable`` when the provider's engine is absent.
        """

    @abstractmethod
    def ps(self, *, all_owners: bool = False) -> list[HandleInfo]:
        """What this provider started for this owner (every owner with ``all_owners=True``)."""

    @abstractmethod
    def gc(self) -> list[HandleInfo]:
        """Remove resources whose owner process is gone; return what was removed."""


# -- rubrics --------------------------------------------------------------------------------------

#: The one rubric contract is ``openenv.rubric.Rubric`` (sync/async, per step/per episode, declared
#: range, components); it is re-exported here so ``openenv.interfaces`` names every plugin kind.
Rubric = _KernelRubric
