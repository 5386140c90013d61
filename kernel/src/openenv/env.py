"""The ``Environment`` base class and the rules every environment obeys.

Signatures match upstream OpenEnv (``reset(seed=None, episode_id=None, **kwargs)``,
``step(action, timeout_s=None, **kwargs)``, a ``state`` property, ``close()``) so env code written
for upstream runs here. Capabilities are *declared* as class attributes; the session manager reads
them and never builds a throwaway env to discover them (docs/protocol.md §11 B18).
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar, get_args, get_origin

from pydantic import BaseModel

from openenv.errors import RuleViolation
from openenv.types import Action, EnvironmentMetadata, Observation, State

__all__ = [
    "CONTROL_NAMES",
    "Environment",
    "EnvFactory",
    "check_factory",
    "env_traits",
]

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)

#: Names that belong to the control protocol; tools and action types may not take them.
CONTROL_NAMES = frozenset({"reset", "step", "state", "close"})

EnvFactory = Callable[[], "Environment[Any, Any, Any]"]


class Environment(Generic[ActT, ObsT, StateT]):
    """Base class of every environment.

    Subclass it, parametrise it with your types (``Environment[MyAction, MyObs, State]``, or set
    ``action_type`` / ``observation_type`` / ``state_type``), and implement ``reset``, ``step`` and
    the ``state`` property. For an asynchronous env implement ``reset_async`` / ``step_async``
    instead: they are awaited on the server's event loop with no thread hop.

    Declared capabilities (class attributes):

    * ``SUPPORTS_CONCURRENT_SESSIONS`` – instances are independent, so one server may hold many
      sessions. Without it the server refuses ``max_sessions > 1`` at start-up.
    * ``THREAD_AFFINITY`` – a sync env that must be created, stepped and closed on one thread
      (e.g. it owns a simulator handle). Each session then gets a dedicated thread.
    * ``REQUIRES_SINGLE_THREAD_EXECUTOR`` – every session of this env runs on one shared thread.
    * ``BLOCKING`` – sync ``reset``/``step`` may block (I/O, subprocesses); they run off the event
      loop. Set it to ``False`` for cheap pure-Python steps to run them inline (fastest).
    """

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = False
    THREAD_AFFINITY: ClassVar[bool] = False
    REQUIRES_SINGLE_THREAD_EXECUTOR: ClassVar[bool] = False
    BLOCKING: ClassVar[bool] = True

    action_type: ClassVar[type[Action]] = Action
    observation_type: ClassVar[type[Observation]] = Observation
    state_type: ClassVar[type[State]] = State

    #: Server mode this instance runs in ("simulation" or "production"); set by the session manager.
    mode: str = "simulation"

    def __init__(self, transform: Any = None, rubric: Any = None) -> None:
        self.transform = transform
        self.rubric = rubric

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _infer_types(cls)
        for name in ("reset", "step", "close"):
            attr = cls.__dict__.get(name)
            if attr is not None and not callable(attr):
                raise RuleViolation(
                    f"{cls.__qualname__}.{name} must be a method: '{name}' is a control method of "
                    f"every environment. Rename the attribute (e.g. '{name}_value')."
                )
        state_attr = cls.__dict__.get("state")
        if state_attr is not None and inspect.isfunction(state_attr):
            raise RuleViolation(
                f"{cls.__qualname__}.state must be a property, not a method: clients read "
                "`env.state`. Decorate it with @property."
            )

    # -- the protocol ---------------------------------------------------------------------------

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ObsT:
        """Start a new episode and return its first observation."""
        raise NotImplementedError(f"{type(self).__qualname__} implements neither reset nor reset_async")

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> ObsT:
        """Async reset; by default calls ``reset``. Override for a truly async env."""
        return self.reset(seed=seed, episode_id=episode_id, **kwargs)

    def step(self, action: ActT, timeout_s: float | None = None, **kwargs: Any) -> ObsT:
        """Apply an action and return the next observation."""
        raise NotImplementedError(f"{type(self).__qualname__} implements neither step nor step_async")

    async def step_async(self, action: ActT, timeout_s: float | None = None, **kwargs: Any) -> ObsT:
        """Async step; by default calls ``step``. Override for a truly async env."""
        return self.step(action, timeout_s=timeout_s, **kwargs)

    @property
    def state(self) -> StateT:
        """The current state (at least ``episode_id`` and ``step_count``)."""
        raise NotImplementedError(f"{type(self).__qualname__} does not implement the state property")

    def close(self) -> None:
        """Release resources. Called once, on the thread the env was created on."""

    async def close_async(self) -> None:
        """Async close; by default calls ``close``."""
        self.close()

    def get_metadata(self) -> EnvironmentMetadata:
        """Metadata served at ``GET /metadata``; override to describe your env."""
        name = type(self).__name__
        return EnvironmentMetadata(name=name, description=f"{name} environment", version="1.0.0")

    # -- helpers used by the kernel -------------------------------------------------------------

    @classmethod
    def is_async(cls) -> bool:
        """True when the env overrides the async protocol methods (awaited on the event loop)."""
        return cls.step_async is not Environment.step_async or cls.reset_async is not Environment.reset_async


def _infer_types(cls: type) -> None:
    """Fill action/observation/state types from ``Environment[A, O, S]`` generic parameters."""
    for base in getattr(cls, "__orig_bases__", ()):
        origin = get_origin(base)
        if origin is None or not (isinstance(origin, type) and issubclass(origin, Environment)):
            continue
        args = get_args(base)
        for attr, arg in zip(("action_type", "observation_type", "state_type"), args, strict=False):
            # Only concrete pydantic models count: ``Any`` is a class on Python 3.11+, and a
            # TypeVar left unbound must keep the base type.
            if isinstance(arg, type) and issubclass(arg, BaseModel) and attr not in cls.__dict__:
                setattr(cls, attr, arg)
        return


def env_traits(target: Any) -> dict[str, Any]:
    """Declared traits of an env class (or of a factory annotated with its return type)."""
    cls = env_class_of(target)
    if cls is None:
        return {
            "SUPPORTS_CONCURRENT_SESSIONS": getattr(target, "SUPPORTS_CONCURRENT_SESSIONS", False),
            "THREAD_AFFINITY": getattr(target, "THREAD_AFFINITY", False),
            "REQUIRES_SINGLE_THREAD_EXECUTOR": getattr(target, "REQUIRES_SINGLE_THREAD_EXECUTOR", False),
            "BLOCKING": getattr(target, "BLOCKING", True),
        }
    return {
        "SUPPORTS_CONCURRENT_SESSIONS": bool(getattr(cls, "SUPPORTS_CONCURRENT_SESSIONS", False)),
        "THREAD_AFFINITY": bool(getattr(cls, "THREAD_AFFINITY", False)),
        "REQUIRES_SINGLE_THREAD_EXECUTOR": bool(getattr(cls, "REQUIRES_SINGLE_THREAD_EXECUTOR", False)),
        "BLOCKING": bool(getattr(cls, "BLOCKING", True)),
    }


def env_class_of(target: Any) -> type | None:
    """The env class behind a class or a factory (from its return annotation), if knowable."""
    while isinstance(target, functools.partial):
        target = target.func
    if isinstance(target, type):
        return target
    try:
        hints = typing.get_type_hints(target)
    except Exception:
        hints = getattr(target, "__annotations__", {}) or {}
    ret = hints.get("return")
    return ret if isinstance(ret, type) else None


def check_factory(target: Any, *, max_sessions: int, name: str | None = None) -> EnvFactory:
    """Validate an env class or factory for serving ``max_sessions`` sessions; return the factory.

    Rules (each raises ``RuleViolation`` naming the fix):
    * an env *instance* is refused: sessions need a fresh env each, so pass the class or a factory;
    * ``max_sessions > 1`` needs ``SUPPORTS_CONCURRENT_SESSIONS = True`` on the env class;
    * ``max_sessions`` must be at least 1.
    """
    label = name or getattr(target, "__name__", None) or type(target).__name__
    if isinstance(target, Environment) or (not callable(target)):
        raise RuleViolation(
            f"env must be a callable (class or factory function), got {type(target)!r}. Pass the "
            f"environment class (e.g. `{type(target).__name__}`) or a function returning a new "
            "instance, not an instance: every session needs its own env."
        )
    if max_sessions < 1:
        raise RuleViolation(f"max_sessions must be at least 1, got {max_sessions}.")
    traits = env_traits(target)
    if max_sessions > 1 and not traits["SUPPORTS_CONCURRENT_SESSIONS"]:
        raise RuleViolation(
            f"Environment '{label}' is not marked as SUPPORTS_CONCURRENT_SESSIONS. Cannot run with "
            f"max_concurrent_envs={max_sessions}. Either serve it with max_sessions=1, or, if "
            "instances share no global state, set `SUPPORTS_CONCURRENT_SESSIONS = True` on the "
            "class (for a factory function, annotate its return type with the env class or set the "
            "attribute on the function)."
        )
    return target  # type: ignore[no-any-return]
