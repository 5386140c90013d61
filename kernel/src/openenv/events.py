"""Typed lifecycle events, passed to the observer hooks of ``openenv.hookspecs``.

Each event is a frozen dataclass: observers read fields (``event.env``, ``event.session_id``)
instead of keys of an untyped dict, and a field the kernel renames fails type checking in the
observer instead of silently reading ``None``.

Observers run **on the server's event loop**, between requests: an observer must return quickly
and never block (no network calls, no sleeps). Hand slow work to a thread or queue of your own.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = [
    "otel_trace",
    "EVENT_TYPES",
    "LifecycleEvent",
    "OperationTimed",
    "ServerEvent",
    "ServerStarted",
    "ServerStopped",
    "SessionClosed",
    "SessionEvent",
    "SessionOpened",
    "SessionRefused",
    "event_for",
]


@dataclass(frozen=True)
class LifecycleEvent:
    """Base of every lifecycle event."""


@dataclass(frozen=True)
class ServerEvent(LifecycleEvent):
    """Fields shared by ``ServerStarted`` and ``ServerStopped``."""

    #: Name of the env served (as registered, or the factory's name).
    env: str
    host: str
    port: int
    #: ``"simulation"`` or ``"production"``.
    mode: str
    #: Names of the transports serving it, in mount order.
    transports: tuple[str, ...] = ()


@dataclass(frozen=True)
class ServerStarted(ServerEvent):
    """A server started serving (after every transport's ``startup``)."""


@dataclass(frozen=True)
class ServerStopped(ServerEvent):
    """A server stopped (after its sessions were closed and its transports shut down)."""


@dataclass(frozen=True)
class SessionEvent(LifecycleEvent):
    """Fields shared by ``SessionOpened`` and ``SessionClosed``."""

    session_id: str
    env: str
    #: Transport that opened the session (``"ws"``, ``"rest"``, ``"mcp"``…), if known.
    transport: str | None
    #: Sessions open on the server after this event.
    active_sessions: int


@dataclass(frozen=True)
class SessionOpened(SessionEvent):
    """A session was created and its env instance built."""


@dataclass(frozen=True)
class SessionClosed(SessionEvent):
    """A session ended and its env was closed."""

    #: Why it ended: ``"client"``, ``"idle timeout"``, ``"server shutdown"``…
    reason: str = "closed"
    #: Steps taken in the session's last episode.
    steps: int = 0


@dataclass(frozen=True)
class SessionRefused(LifecycleEvent):
    """A session was refused because the server is full (``CAPACITY_REACHED``)."""

    env: str
    transport: str | None
    active_sessions: int


@dataclass(frozen=True)
class OperationTimed(LifecycleEvent):
    """A ``reset`` or ``step`` of a session ran (or failed): how long it took, and its error code.

    Not a pluggy hook: it fires on every step, so only the direct observers of one server's
    session manager get it (``SessionManager.observe``), and only while one is registered."""

    env: str
    session_id: str
    #: ``"reset"``, ``"step"``, or ``"validate"`` (an action refused before any step ran;
    #: ``session_id`` is then empty and ``seconds`` 0).
    operation: str
    seconds: float
    #: The error's wire code (``VALIDATION_ERROR``, ``EXECUTION_ERROR``…), ``None`` on success.
    error_code: str | None = None
    #: Time the server's rubric took on this step, when the step was scored.
    rubric_seconds: float | None = None


#: The event type each lifecycle hook receives.
EVENT_TYPES: dict[str, type[LifecycleEvent]] = {
    "openenv_server_started": ServerStarted,
    "openenv_server_stopped": ServerStopped,
    "openenv_session_opened": SessionOpened,
    "openenv_session_closed": SessionClosed,
}


def event_for(hook: str, data: LifecycleEvent | dict[str, Any]) -> LifecycleEvent:
    """The event ``hook`` receives, built from ``data``.

    ``data`` may be the event itself, an event of the sibling type (the ``ServerStarted`` of a
    server being stopped becomes its ``ServerStopped``) or, for callers of the untyped API, a dict
    of its fields. Unknown hooks and missing fields raise ``TypeError``.
    """
    try:
        cls = EVENT_TYPES[hook]
    except KeyError:
        raise TypeError(f"{hook!r} is not a lifecycle hook: expected one of "
                        f"{', '.join(EVENT_TYPES)}") from None
    if isinstance(data, cls):
        return data
    names = {f.name for f in fields(cls)}
    if isinstance(data, LifecycleEvent):
        values = {f.name: getattr(data, f.name) for f in fields(data) if f.name in names}
    elif isinstance(data, dict):
        values = dict(data)
        leftover = set(values) - names
        if leftover:
            raise TypeError(f"{cls.__name__} has no field(s) {', '.join(sorted(leftover))}")
    else:
        raise TypeError(f"{hook} needs a {cls.__name__}, got {type(data).__name__}")
    if "transports" in values:
        values["transports"] = tuple(values["transports"])
    return cls(**values)


def otel_trace() -> Any:
    """The ``opentelemetry.trace`` module when spans are wanted (its API installed and
    ``OPENENV_OTEL`` not ``0``/``false``/``no``/``off``), else ``None``. The one switch for every
    span OpenEnv makes: the pool's launches, the metrics plugin's sessions and steps."""
    import os

    if os.environ.get("OPENENV_OTEL", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace
