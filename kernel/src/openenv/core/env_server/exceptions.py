"""``openenv.core.env_server.exceptions``: upstream's exception names, rooted in the kernel's.

Each class keeps upstream's constructor and attributes, and derives from the kernel exception the
server actually raises for that situation, so ``except SessionCapacityError`` and
``except openenv.errors.CapacityError`` catch the same thing.
"""

from __future__ import annotations

from openenv.errors import CapacityError, FactoryError, OpenEnvError, RuleViolation, SessionError

__all__ = [
    "ConcurrencyConfigurationError",
    "EnvironmentFactoryError",
    "OpenEnvError",
    "SessionCapacityError",
    "SessionCreationError",
    "SessionNotFoundError",
]


class ConcurrencyConfigurationError(RuleViolation):
    """``max_concurrent_envs > 1`` for an env that does not declare ``SUPPORTS_CONCURRENT_SESSIONS``.

    Raised by ``create_app`` at construction (a ``RuleViolation``, hence a ``TypeError``).
    """

    def __init__(self, environment_name: str, max_concurrent_envs: int, message: str | None = None) -> None:
        self.environment_name = environment_name
        self.max_concurrent_envs = max_concurrent_envs
        super().__init__(
            message
            or f"Environment '{environment_name}' is not marked as SUPPORTS_CONCURRENT_SESSIONS. Cannot run "
            f"with max_concurrent_envs={max_concurrent_envs}. Either set max_concurrent_envs=1, or, if "
            "instances share no global state, set `SUPPORTS_CONCURRENT_SESSIONS = True` on the class."
        )


class SessionCapacityError(CapacityError):
    """The server has no free session slot."""

    def __init__(self, active_sessions: int, max_sessions: int, message: str | None = None) -> None:
        super().__init__(
            message
            or f"Server at capacity: {active_sessions}/{max_sessions} sessions active. Cannot accept new "
            "connections.",
            data={"active_sessions": active_sessions, "max_sessions": max_sessions},
        )


class SessionNotFoundError(SessionError):
    """No session with this id."""

    def __init__(self, session_id: str, message: str | None = None) -> None:
        self.session_id = session_id
        super().__init__(message or f"Session '{session_id}' not found.")


class SessionCreationError(SessionError):
    """A session could not be created."""

    def __init__(self, reason: str, message: str | None = None) -> None:
        self.reason = reason
        super().__init__(message or f"Failed to create session: {reason}")


class EnvironmentFactoryError(FactoryError):
    """The env factory raised while building a session's env."""

    def __init__(self, factory_name: str, message: str | None = None) -> None:
        super().__init__(
            message or f"Environment factory '{factory_name}' failed to create instance.",
            data={"factory_name": factory_name},
        )
