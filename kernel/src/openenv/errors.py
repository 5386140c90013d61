"""Exceptions shared by the server, the client and the plugin system.

Every error that can cross the wire has a stable ``code`` (the OpenEnv 0.10 codes, docs/protocol.md §3.6) and a
``data`` dict with the server's details. ``str(error)`` keeps upstream's format
``Server error: <message> (code: <code>)`` so code that string-matches upstream errors still works,
while callers that want detail read ``.code``, ``.data`` or the subclass-specific attributes.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

__all__ = [
    "CapacityError",
    "ConfigError",
    "ExecutionError",
    "FactoryError",
    "ModeError",
    "ResetRequiredError",
    "OpenEnvError",
    "PluginError",
    "ProtocolError",
    "RuleViolation",
    "RubricFailure",
    "SessionError",
    "SessionLostError",
    "StepTimeoutError",
    "UnknownNameError",
    "ValidationError",
    "did_you_mean",
    "error_from_wire",
]


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """Return ``" Did you mean 'x'?"`` for the closest candidate, or ``""`` when none is close."""
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" Did you mean '{matches[0]}'?" if matches else ""


class RuleViolation(TypeError):
    """An architecture rule was broken while building something (an env, a server, a plugin).

    Raised at construction or start-up, never later; the message explains the rule and the fix.
    """


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the setting and the accepted values."""


class UnknownNameError(LookupError):
    """A name (env, provider, transport, rubric) was not found; the message suggests the closest one."""

    def __init__(self, kind: str, name: str, known: Iterable[str], hint: str = "") -> None:
        known = sorted(known)
        self.kind, self.name, self.known = kind, name, known
        listing = ", ".join(known) if known else "none installed"
        msg = f"Unknown {kind} '{name}'.{did_you_mean(name, known)} Installed {kind}s: {listing}."
        if hint:
            msg += f" {hint}"
        super().__init__(msg)

    def __str__(self) -> str:  # LookupError would otherwise repr() the message
        return str(self.args[0])


class PluginError(RuntimeError):
    """A plugin failed to load or misbehaved; raised only in strict mode (tests, CI)."""


class OpenEnvError(RuntimeError):
    """Base of every error reported by an OpenEnv server (or raised by the client about one).

    ``code`` is the wire error code, ``data`` the full error object the server sent (message
    included). Subclasses add typed accessors.
    """

    default_code = "EXECUTION_ERROR"

    def __init__(self, message: str, *, code: str | None = None, data: dict[str, Any] | None = None):
        self.message = message
        self.code = code or self.default_code
        self.data: dict[str, Any] = dict(data) if data else {}
        self.data.setdefault("message", message)
        self.data.setdefault("code", self.code)
        super().__init__(message)

    def __str__(self) -> str:
        return f"Server error: {self.message} (code: {self.code})"

    def to_wire(self) -> dict[str, Any]:
        """The ``data`` of an error frame: ``{"message", "code", ...extra}``."""
        return self.data


class CapacityError(OpenEnvError):
    """The server has no free session slot. ``active_sessions`` / ``max_sessions`` say how full it is."""

    default_code = "CAPACITY_REACHED"

    @property
    def active_sessions(self) -> int | None:
        return self.data.get("active_sessions")

    @property
    def max_sessions(self) -> int | None:
        return self.data.get("max_sessions")


class FactoryError(OpenEnvError):
    """The environment factory raised while building a session's env."""

    default_code = "FACTORY_ERROR"

    @property
    def factory_name(self) -> str | None:
        return self.data.get("factory_name")


class SessionError(OpenEnvError):
    """The session could not be created, attached or used (unknown id, already attached, …)."""

    default_code = "SESSION_ERROR"


class ValidationError(OpenEnvError):
    """A frame or an action failed validation. ``errors`` lists Pydantic-style error objects."""

    default_code = "VALIDATION_ERROR"

    @property
    def errors(self) -> list[dict[str, Any]]:
        return list(self.data.get("errors", []))


class ExecutionError(OpenEnvError):
    """The environment raised in reset/step/state, or its output could not be serialised."""

    default_code = "EXECUTION_ERROR"


class ProtocolError(OpenEnvError):
    """The peer broke the protocol (bad JSON, unknown message type, an unexpected reply)."""

    default_code = "PROTOCOL_ERROR"


class ModeError(OpenEnvError):
    """The operation is not available in the server's mode (strict production mode)."""

    default_code = "MODE_ERROR"


class StepTimeoutError(OpenEnvError, TimeoutError):
    """A reply did not arrive in time. On the client the session is then lost (see SessionLostError)."""

    default_code = "TIMEOUT"


class SessionLostError(OpenEnvError, ConnectionError):
    """The connection to the session dropped; its episode is gone.

    The client never reconnects silently (a new connection is a new env): call ``reset()`` to start
    a new episode on a new session, or ``reconnect()`` explicitly.
    """

    default_code = "SESSION_LOST"


class ResetRequiredError(ExecutionError):
    """``step`` ran before the session's first ``reset`` and the env failed: call ``reset`` first.

    Wire code ``RESET_REQUIRED``; the session stays usable (reset it, then step).
    """

    default_code = "RESET_REQUIRED"


class RubricFailure(OpenEnvError):
    """The server's rubric could not score a step (it raised, timed out or left its declared range).

    Wire code ``RUBRIC_ERROR``; ``data["rubric"]`` names the rubric, ``data["reason"]`` says why. The
    session survives: the env's step ran, only its reward is missing, so step again or reset.
    """

    default_code = "RUBRIC_ERROR"

    @property
    def rubric(self) -> str | None:
        value = self.data.get("rubric")
        return None if value is None else str(value)


_BY_CODE: dict[str, type[OpenEnvError]] = {
    "CAPACITY_REACHED": CapacityError,
    "FACTORY_ERROR": FactoryError,
    "SESSION_ERROR": SessionError,
    "VALIDATION_ERROR": ValidationError,
    "EXECUTION_ERROR": ExecutionError,
    "INVALID_JSON": ProtocolError,
    "UNKNOWN_TYPE": ProtocolError,
    "PROTOCOL_ERROR": ProtocolError,
    "SESSION_LOST": SessionLostError,
    "MODE_ERROR": ModeError,
    "TIMEOUT": StepTimeoutError,
    "RUBRIC_ERROR": RubricFailure,
    "RESET_REQUIRED": ResetRequiredError,
}


def error_from_wire(data: Any) -> OpenEnvError:
    """Build the typed exception for an error frame's ``data`` (keeps every field the server sent)."""
    if not isinstance(data, dict):
        return ProtocolError(f"Malformed error frame: {data!r}", code="PROTOCOL_ERROR")
    code = str(data.get("code") or "EXECUTION_ERROR")
    message = str(data.get("message", ""))
    cls = _BY_CODE.get(code, OpenEnvError)
    return cls(message, code=code, data=data)
