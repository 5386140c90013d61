"""Exceptions shared by the server, the client and the plugin system.

Every error that can cross the wire has a stable ``code`` (the OpenEnv 0.10 codes, docs/protocol.md §3.6) and a
``data`` dict with the server's details. ``str(error)`` starts with upstream's
``Server error: <message> (code: <code>)``, so code that string-matches upstream errors still works,
and goes on with the details a reader needs to fix the call: one line per failing field (where, why,
the value sent) and one per other detail the server sent, each bounded in length. Callers that want
the structured form read ``.code``, ``.data`` or the subclass-specific attributes.
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
    "SnapshotError",
    "SessionLostError",
    "StepTimeoutError",
    "UnknownNameError",
    "ValidationError",
    "detail_lines",
    "did_you_mean",
    "error_from_wire",
    "int_option",
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


#: Words users type for a transport that spelling cannot lead to (``http`` is nowhere near ``rest``).
_ALIASES: dict[str, dict[str, str]] = {
    "transport": {"http": "rest", "https": "rest", "websocket": "ws", "websockets": "ws", "wss": "ws",
                  "browser": "web", "html": "web"},
}


class UnknownNameError(LookupError):
    """A name (env, provider, transport, rubric) was not found; the message suggests the closest one
    (by spelling, or by meaning for a few well-known words: ``--transport http`` suggests ``rest``)."""

    def __init__(self, kind: str, name: str, known: Iterable[str], hint: str = "") -> None:
        known = sorted(known)
        self.kind, self.name, self.known = kind, name, known
        listing = ", ".join(known) if known else "none installed"
        alias = _ALIASES.get(kind, {}).get(name.lower())
        suggestion = f" Did you mean '{alias}'?" if alias in known else did_you_mean(name, known)
        msg = f"Unknown {kind} '{name}'.{suggestion} Installed {kind}s: {listing}."
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
        return self.with_details(f"Server error: {self.message} (code: {self.code})")

    def with_details(self, head: str) -> str:
        """``head`` and then one ``  - `` line per detail of ``data`` that ``head`` does not say
        (subclasses with their own first line, e.g. a failed tool call, end their ``__str__`` here)."""
        return "\n".join([head, *(f"  - {line}" for line in detail_lines(self.data, head))])

    def to_wire(self) -> dict[str, Any]:
        """The ``data`` of an error frame: ``{"message", "code", ...extra}``."""
        return self.data


#: How much of one value, one line and all detail lines ``str(error)`` shows (a traceback stays readable
#: even when the server echoes a megabyte of input back).
_VALUE_CHARS = 80
_LINE_CHARS = 240
_MAX_LINES = 12


def _short(value: Any, *, quote: bool = True) -> str:
    """``value`` in at most ``_VALUE_CHARS`` characters (repr, or the plain text when not ``quote``)."""
    text = value if isinstance(value, str) and not quote else repr(value)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def _field_line(err: Any) -> str:
    """One Pydantic-style error object as ``loc: msg [type=…, input=…]``."""
    if not isinstance(err, dict):
        return _short(err)
    loc = err.get("loc")
    where = ".".join(str(p) for p in loc) if isinstance(loc, (list, tuple)) and loc else "(whole action)"
    facts = []
    if err.get("type"):
        facts.append(f"type={err['type']}")
    if "input" in err:
        facts.append(f"input={_short(err['input'])}")
    tail = f" [{', '.join(facts)}]" if facts else ""
    return f"{where}: {err.get('msg', 'invalid')}{tail}"


def detail_lines(data: dict[str, Any], message: str) -> list[str]:
    """The details of an error's ``data`` as short lines: each entry of ``errors`` (field, reason,
    value), then every other field the server sent that the message does not already say."""
    lines: list[str] = []
    errors = data.get("errors")
    items = errors if isinstance(errors, list) else []
    lines.extend(_field_line(err) for err in items)
    for key, value in data.items():
        if key in ("message", "code", "errors") or value is None or value == "" or value == [] or value == {}:
            continue
        if isinstance(value, (str, int, float)) and str(value) in message:
            continue  # the message already says it (capacity counts, the exception's detail)
        lines.append(f"{key}: {_short(value, quote=False)}")
    lines = [line if len(line) <= _LINE_CHARS else line[: _LINE_CHARS - 1] + "…" for line in lines]
    if len(lines) > _MAX_LINES:
        lines = [*lines[: _MAX_LINES - 1], f"… and {len(lines) - _MAX_LINES + 1} more (all of them in .data)"]
    return lines


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

    @classmethod
    def of(cls, message: str, *, kind: str, loc: str | list[str] | None = None, value: Any = None) -> ValidationError:
        """One Pydantic-style error: what an env raises for a bad action or reset option, e.g.
        ``ValidationError.of("column 9 is off the board", kind="bad_column", loc="column", value=9)``."""
        where = [loc] if isinstance(loc, str) else list(loc or [])
        return cls(message, data={"errors": [{"type": kind, "loc": where, "msg": message, "input": value}]})

    @property
    def errors(self) -> list[dict[str, Any]]:
        return list(self.data.get("errors", []))


def int_option(options: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    """``options[name]`` (else ``default``) as an integer from ``low`` to ``high``; anything else (a
    bool, a float, a string, out of range) is refused as ``ValidationError.of(..., kind="bad_<name>")``.
    What envs use for their integer reset options, e.g. ``int_option(kwargs, "max_steps", 50, 1, 10_000)``."""
    value = options.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValidationError.of(f"{name} must be an integer from {low} to {high}, got {value!r}",
                                 kind=f"bad_{name}", loc=name, value=value)
    return value


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


class SnapshotError(OpenEnvError):
    """A snapshot could not be taken or was refused for restore. ``reason`` says which rule:
    ``unsupported`` (the env declares no ``SUPPORTS_SNAPSHOT``), ``not_started`` (no ``reset`` yet),
    ``malformed``, ``other_env``, ``other_version``, ``tampered`` (the seal does not match),
    ``episode_rubric`` (the server's rubric scores whole episodes, whose history a snapshot lacks)."""

    default_code = "SNAPSHOT_ERROR"

    @property
    def reason(self) -> str | None:
        value = self.data.get("reason")
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
    "SNAPSHOT_ERROR": SnapshotError,
}


def error_from_wire(data: Any) -> OpenEnvError:
    """Build the typed exception for an error frame's ``data`` (keeps every field the server sent)."""
    if not isinstance(data, dict):
        return ProtocolError(f"Malformed error frame: {data!r}", code="PROTOCOL_ERROR")
    code = str(data.get("code") or "EXECUTION_ERROR")
    message = str(data.get("message", ""))
    cls = _BY_CODE.get(code, OpenEnvError)
    return cls(message, code=code, data=data)
