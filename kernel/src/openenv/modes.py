"""Server modes and the one rule that says which session operations each mode allows.

``Mode`` is the only mode type in the project: the server config, the session manager, the CLI
and env instances (``Environment.mode``) all use it. It is a ``StrEnum``, so a mode compares equal
to its string (``Mode.PRODUCTION == "production"``) and serialises as one.

The policy (``ModePolicy``) lives with the session manager, which every transport calls, so the
same request gets the same answer on every transport:

* **simulation** (default): every operation is allowed.
* **production**: an episode is driven through a session the caller holds. The session-less
  ("one-shot") ``reset``/``step``/``state`` of upstream's stateless HTTP routes are refused, since
  upstream does not offer them in production. Tool calls (MCP) are always allowed.
* **production, strict** (``strict_production=True``): ``reset`` and ``step`` are refused on
  every session too; only tools and ``state`` remain (``docs/protocol.md`` §11 B4: off by default
  because upstream's MCP client resets and steps through its WebSocket in production).

A refused operation raises ``ModeError`` (wire code ``MODE_ERROR``) whose message names the mode,
the setting and the way out. This module imports nothing heavy: the CLI uses it for ``--mode``.
"""

from __future__ import annotations

import os
from enum import StrEnum

from openenv.errors import ConfigError, ModeError

__all__ = ["MODE_ENV_VAR", "Mode", "ModePolicy"]

#: Environment variable read when no mode is given (as upstream does).
MODE_ENV_VAR = "OPENENV_MODE"


class Mode(StrEnum):
    """Where a server runs: ``simulation`` (training, evaluation) or ``production`` (serving agents)."""

    SIMULATION = "simulation"
    PRODUCTION = "production"

    @classmethod
    def parse(cls, value: str | Mode | None) -> Mode:
        """``value``, else ``$OPENENV_MODE``, else simulation; case-insensitive.

        Anything else raises ``ConfigError`` naming the valid modes (and the variable, if the
        value came from it).
        """
        if isinstance(value, Mode):
            return value
        raw = value or os.environ.get(MODE_ENV_VAR) or cls.SIMULATION.value
        try:
            return cls(raw.lower())
        except ValueError:
            source = "" if value else f" (from {MODE_ENV_VAR})"
            choices = ", ".join(m.value for m in cls)
            raise ConfigError(f"Invalid mode: {raw!r}{source}. Use one of: {choices}.") from None


#: Operations the policy rules on (tool calls are never refused by mode).
_OPERATIONS = ("reset", "step", "state")


class ModePolicy:
    """Which session operations a server allows; computed once per server, consulted per session.

    ``refused(one_shot)`` is the set of operations a session may not run, so the per-step check in
    the session manager is one truthiness test on the session (``Session.refused``).
    """

    __slots__ = ("_refused_held", "_refused_one_shot", "mode", "strict")

    def __init__(self, mode: Mode | str | None = None, *, strict: bool = False) -> None:
        self.mode = Mode.parse(mode)
        self.strict = bool(strict)
        production = self.mode is Mode.PRODUCTION
        held: frozenset[str] = frozenset({"reset", "step"}) if production and self.strict else frozenset()
        self._refused_held = held
        self._refused_one_shot = frozenset(_OPERATIONS) if production else held

    def refused(self, *, one_shot: bool) -> frozenset[str]:
        """Operations refused on a session (``one_shot``: opened for one session-less request)."""
        return self._refused_one_shot if one_shot else self._refused_held

    def check(self, operation: str, *, one_shot: bool) -> None:
        """Raise ``ModeError`` if ``operation`` is refused; do nothing otherwise."""
        if operation in self.refused(one_shot=one_shot):
            raise self.error(operation, one_shot=one_shot)

    def error(self, operation: str, *, one_shot: bool) -> ModeError:
        """The ``ModeError`` for a refused ``operation`` (its message says what to do instead)."""
        if one_shot and not self.strict:
            message = (
                f"{operation} without a session is not available: the server runs in production "
                "mode. Open a session first (WebSocket /ws, or POST /sessions and send its id in "
                "the OpenEnv-Session-Id header), use the env's tools (MCP), or serve it in "
                "simulation mode."
            )
        else:
            message = (
                f"{operation} is not available: the server runs in production mode with "
                "strict_production enabled. Use the env's tools (MCP), or serve it in simulation "
                "mode or without strict_production to drive episodes with reset/step."
            )
        return ModeError(message, data={"mode": self.mode.value, "operation": operation,
                                        "strict_production": self.strict})
