"""The ``Environment`` base class and the rules every environment obeys.

Signatures match upstream OpenEnv (``reset(seed=None, episode_id=None, **kwargs)``,
``step(action, timeout_s=None, **kwargs)``, a ``state`` property, ``close()``) so env code written
for upstream runs here. Capabilities are *declared* as class attributes; the session manager reads
them and never builds a throwaway env to discover them (docs/protocol.md §11 B18).

An env's types (``action_type``, ``observation_type``, ``state_type``) come, first match wins, from
an explicit class attribute, the generic parameters (``Environment[MyAction, MyObs, MyState]``) or
the annotations of the class's own ``step`` (action parameter, return), ``reset`` (return) and
``state`` property (return). The action type is required: reading ``action_type`` of an env that
declares none raises ``RuleViolation`` naming the fix, so building a server for it fails at
start-up instead of serving a bare ``Action`` schema that refuses every real action.
"""

from __future__ import annotations

import functools
import inspect
import sys
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, get_args, get_origin

from pydantic import BaseModel

from openenv.errors import RuleViolation
from openenv.types import Action, EnvironmentMetadata, Observation, State

if TYPE_CHECKING:
    from openenv.tasks import TaskSource

__all__ = [
    "CONTROL_NAMES",
    "EnvFactory",
    "EnvType",
    "Environment",
    "check_factory",
    "declared_action_type",
    "env_class_of",
    "env_traits",
    "infer_types",
]

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)

#: Names that belong to the control protocol; tools and action types may not take them.
CONTROL_NAMES = frozenset({"reset", "step", "state", "close"})

EnvFactory = Callable[[], "Environment[Any, Any, Any]"]

_TYPE_ATTRS = ("action_type", "observation_type", "state_type")
#: Per class: why its annotations could not be read when it was created (retried on first read).
_PENDING_ATTR = "__openenv_pending_types__"


class EnvType:
    """Class-level slot of ``action_type`` / ``observation_type`` / ``state_type`` on ``Environment``
    (and of ``action_type`` on a class whose annotations could not be resolved yet).

    Python finds it only when no class between the env and the slot declares the attribute.
    It then retries the annotations that could not be resolved when the class was created (a
    forward reference to a type defined later in the module), and otherwise answers the default:
    ``Observation`` / ``State``, or, for the action type, a ``RuleViolation`` naming the fix.
    """

    def __init__(self, default: type[BaseModel] | None) -> None:
        self.default = default
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> type[BaseModel]:
        cls = owner if owner is not None else type(obj)
        if cls is Environment:
            return self.default or Action
        if _retry_pending(cls):
            value = getattr(cls, self.name)
            if isinstance(value, type):
                return value
        if self.default is not None:
            return self.default
        raise RuleViolation(_undeclared_message(cls))


class Environment(Generic[ActT, ObsT, StateT]):
    """Base class of every environment.

    Subclass it, declare your types (parametrise it, ``Environment[MyAction, MyObs, State]``;
    annotate ``step(self, action: MyAction, ...) -> MyObs``; or set ``action_type`` /
    ``observation_type`` / ``state_type``), and implement ``reset``, ``step`` and the ``state``
    property. For an asynchronous env implement ``reset_async`` / ``step_async``
    instead: they are awaited on the server's event loop with no thread hop.

    Declared capabilities (class attributes):

    * ``SUPPORTS_CONCURRENT_SESSIONS`` – instances are independent, so one server may hold many
      sessions. Without it the server refuses ``max_sessions > 1`` at start-up.
    * ``THREAD_AFFINITY`` – a sync env that must be created, stepped and closed on one thread
      (e.g. it owns a simulator handle). Each session then gets a dedicated thread.
    * ``REQUIRES_SINGLE_THREAD_EXECUTOR`` – every session of this env runs on one shared thread.
    * ``tasks`` – the env's tasks and splits (a ``TaskSource`` from ``openenv.tasks``).
    * ``SUPPORTS_SNAPSHOT`` – a live episode can be saved and continued (fork, restore after a
      crash): the env implements ``snapshot()`` (its episode as JSON data) and ``restore(data)``
      (continue from it, returning the current observation). See ``openenv.snapshots``.
    * ``BLOCKING`` – sync ``reset``/``step`` may block (I/O, subprocesses); they run off the event
      loop. Set it to ``False`` for cheap pure-Python steps to run them inline (fastest). The risk:
      inline code runs on the one event loop serving every session, so a ``False`` env that blocks
      (``time.sleep``, blocking I/O, a long computation) freezes the whole server, no step timeout
      can interrupt it, and a crash in it is not tied to a session (only a loop-stall log line
      names it). Leave it ``True`` unless every step is short and cannot block.
    """

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = False
    THREAD_AFFINITY: ClassVar[bool] = False
    REQUIRES_SINGLE_THREAD_EXECUTOR: ClassVar[bool] = False
    BLOCKING: ClassVar[bool] = True
    SUPPORTS_SNAPSHOT: ClassVar[bool] = False
    #: The env's tasks and splits (``openenv.tasks``: ``TaskFile``, ``SeedTasks``, ``InlineTasks``).
    #: An env that declares tasks takes ``task: Task | None = None`` in ``reset``; the server resolves
    #: ``reset(task_id=..., split=..., group_id=...)`` through it and passes the chosen ``Task``.
    tasks: ClassVar[TaskSource | None] = None

    if TYPE_CHECKING:
        action_type: ClassVar[type[Action]]
        observation_type: ClassVar[type[Observation]]
        state_type: ClassVar[type[State]]
    else:
        # Declared types (see the module docstring); what a subclass declares none of resolves here.
        action_type = EnvType(None)
        observation_type = EnvType(Observation)
        state_type = EnvType(State)

    #: Whether ``step``'s action annotation declares the action type (tool envs fix theirs).
    _infer_action_from_step: ClassVar[bool] = True

    #: Server mode this instance runs in ("simulation" or "production"); set by the session manager.
    mode: str = "simulation"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        infer_types(cls)
        for name in ("reset", "step", "close"):
            attr = cls.__dict__.get(name)
            if attr is not None and not callable(attr):
                raise RuleViolation(
                    f"{cls.__qualname__}.{name} must be a method: '{name}' is a control method of "
                    f"every environment. Rename the attribute (e.g. '{name}_value')."
                )
        if cls.__dict__.get("SUPPORTS_SNAPSHOT") is True:
            missing = [m for m in ("snapshot", "restore") if getattr(cls, m) is getattr(Environment, m)]
            if missing:
                raise RuleViolation(
                    f"{cls.__qualname__} declares SUPPORTS_SNAPSHOT = True but does not implement "
                    f"{' and '.join(missing)}: a snapshot must be continued exactly. Implement "
                    "`snapshot(self) -> dict` (the episode as JSON data) and `restore(self, data) -> "
                    "Observation`, or drop the declaration.")
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

    def snapshot(self) -> dict[str, Any]:
        """The live episode as JSON data (``SUPPORTS_SNAPSHOT``): everything ``restore`` needs to
        continue it exactly as this instance would, random generator state included
        (``openenv.snapshots.rng_state``). Called only after a ``reset``."""
        raise NotImplementedError(f"{type(self).__qualname__} does not support snapshots")

    def restore(self, data: dict[str, Any]) -> ObsT:
        """Continue the episode that ``snapshot`` returned ``data`` for (on this or a fresh
        instance, after a ``reset`` or not) and return its current observation. Validate ``data``:
        it comes from a client (sealed by the server, but the seal may be unkeyed)."""
        raise NotImplementedError(f"{type(self).__qualname__} does not support snapshots")

    def get_metadata(self) -> EnvironmentMetadata:
        """Metadata served at ``GET /metadata``; override to describe your env."""
        name = type(self).__name__
        return EnvironmentMetadata(name=name, description=f"{name} environment", version="1.0.0")

    # -- helpers used by the kernel -------------------------------------------------------------

    @classmethod
    def is_async(cls) -> bool:
        """True when the env overrides the async protocol methods (awaited on the event loop)."""
        return cls.step_async is not Environment.step_async or cls.reset_async is not Environment.reset_async


def infer_types(cls: type) -> None:
    """Set the declared types of a new env class from its generic parameters, then its annotations.

    An attribute the class body sets itself always wins; a generic parameter wins over an
    annotation. Names are resolved in the module and in the namespace the class is defined in (a
    class defined in a function may name that function's local types). Annotations that cannot be
    resolved yet (a forward reference to a type defined later) are retried when the action type is
    first read; until then the class does not silently inherit its base's action type.
    """
    own = cls.__dict__
    for base in getattr(cls, "__orig_bases__", ()):
        origin = get_origin(base)
        if origin is None or not (isinstance(origin, type) and issubclass(origin, Environment)):
            continue
        for attr, arg in zip(_TYPE_ATTRS, get_args(base), strict=False):
            # Only concrete pydantic models count: ``Any`` is a class on Python 3.11+, and a
            # TypeVar left unbound must keep the base type.
            if isinstance(arg, type) and issubclass(arg, BaseModel) and attr not in own:
                setattr(cls, attr, arg)
        break
    try:
        found = _annotated_types(cls, _defining_namespace())
    except Exception as exc:  # NameError for a type defined after the class, mostly
        setattr(cls, _PENDING_ATTR, f"{type(exc).__name__}: {exc}")
        if "action_type" not in own:
            slot = EnvType(None)
            slot.name = "action_type"
            cls.action_type = slot  # type: ignore[attr-defined]
        return
    _apply(cls, found)


def _defining_namespace() -> dict[str, Any] | None:
    """Local names of the frame whose ``class`` statement is running (past ``__init_subclass__``)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_name in ("__init_subclass__", "infer_types"):
        frame = frame.f_back  # type: ignore[assignment]
    return dict(frame.f_locals) if frame is not None else None


def _annotated_types(cls: type, localns: dict[str, Any] | None = None) -> dict[str, Any]:
    """The types named by the annotations of ``cls``'s own ``step``/``reset``/``state`` (strict
    subclasses of the base models only: an annotation with the base itself says nothing)."""
    own = cls.__dict__
    found: dict[str, Any] = {}

    def hints(fn: Any) -> dict[str, Any]:
        return typing.get_type_hints(fn, localns=localns)

    step = own.get("step") or own.get("step_async")
    if callable(step):
        step_hints = hints(step)
        params = [p for p in inspect.signature(step).parameters.values() if p.name != "self"]
        action = step_hints.get(params[0].name) if params else None
        if getattr(cls, "_infer_action_from_step", True) and _strict_model(action, Action):
            found["action_type"] = action
        if _strict_model(step_hints.get("return"), Observation):
            found["observation_type"] = step_hints["return"]
    reset = own.get("reset") or own.get("reset_async")
    if "observation_type" not in found and callable(reset):
        ret = hints(reset).get("return")
        if _strict_model(ret, Observation):
            found["observation_type"] = ret
    state = own.get("state")
    if isinstance(state, property) and state.fget is not None:
        ret = hints(state.fget).get("return")
        if _strict_model(ret, State):
            found["state_type"] = ret
    return found


def _apply(cls: type, found: dict[str, Any]) -> None:
    """Set what the annotations declared; drop a pending slot they did not fill (inherit instead)."""
    for attr in _TYPE_ATTRS:
        current = cls.__dict__.get(attr)
        if attr in found and (current is None or isinstance(current, EnvType)):
            setattr(cls, attr, found[attr])
        elif isinstance(current, EnvType):
            delattr(cls, attr)


def _strict_model(value: Any, base: type) -> bool:
    return isinstance(value, type) and issubclass(value, base) and value is not base


def _retry_pending(cls: type) -> bool:
    """Resolve annotations left pending on ``cls`` or its bases; True if any class was resolved."""
    resolved = False
    for klass in cls.__mro__:
        if _PENDING_ATTR in klass.__dict__:
            try:
                found = _annotated_types(klass)
            except Exception as exc:
                setattr(klass, _PENDING_ATTR, f"{type(exc).__name__}: {exc}")
                continue
            delattr(klass, _PENDING_ATTR)
            _apply(klass, found)
            resolved = True
    return resolved


def _undeclared_message(cls: type) -> str:
    name = cls.__qualname__
    lines = [
        f"Environment '{name}' declares no action type, so a server could only offer the bare "
        "`Action` schema, which refuses every real action. Declare it: "
        f"`class {cls.__name__}(Environment[MyAction, MyObservation, State])`, or annotate step's "
        "action parameter (`def step(self, action: MyAction, ...)`), or set `action_type = MyAction` "
        "on the class (or pass action_type= to create_app)."
    ]
    pending = next((k.__dict__[_PENDING_ATTR] for k in cls.__mro__ if _PENDING_ATTR in k.__dict__), None)
    if pending:
        lines.append(f"The annotations of {name} could not be resolved ({pending}): define the types "
                     "they name at module level, before they are used.")
    else:
        step = next((k.__dict__[m] for k in cls.__mro__ if k is not Environment
                     for m in ("step", "step_async") if callable(k.__dict__.get(m))), None)
        if step is not None:
            try:
                params = [p for p in inspect.signature(step).parameters.values() if p.name != "self"]
                hint = typing.get_type_hints(step).get(params[0].name) if params else None
            except Exception:
                hint = None
            if hint is Action:
                lines.append("step's action parameter is annotated with the base class `Action`, which "
                             "has no fields of its own: name your action class instead.")
    return " ".join(lines)

def env_traits(target: Any) -> dict[str, Any]:
    """Declared traits of an env class (or of a factory annotated with its return type)."""
    cls = env_class_of(target)
    if cls is None:
        return {
            "SUPPORTS_CONCURRENT_SESSIONS": getattr(target, "SUPPORTS_CONCURRENT_SESSIONS", False),
            "THREAD_AFFINITY": getattr(target, "THREAD_AFFINITY", False),
            "REQUIRES_SINGLE_THREAD_EXECUTOR": getattr(target, "REQUIRES_SINGLE_THREAD_EXECUTOR", False),
            "BLOCKING": getattr(target, "BLOCKING", True),
            "SUPPORTS_SNAPSHOT": bool(getattr(target, "SUPPORTS_SNAPSHOT", False)),
        }
    return {
        "SUPPORTS_CONCURRENT_SESSIONS": bool(getattr(cls, "SUPPORTS_CONCURRENT_SESSIONS", False)),
        "THREAD_AFFINITY": bool(getattr(cls, "THREAD_AFFINITY", False)),
        "REQUIRES_SINGLE_THREAD_EXECUTOR": bool(getattr(cls, "REQUIRES_SINGLE_THREAD_EXECUTOR", False)),
        "BLOCKING": bool(getattr(cls, "BLOCKING", True)),
        "SUPPORTS_SNAPSHOT": bool(getattr(cls, "SUPPORTS_SNAPSHOT", False)),
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


def declared_action_type(target: Any, explicit: type[Action] | None = None) -> type[Action]:
    """The action type a server for ``target`` (env class or factory) validates actions with.

    ``explicit`` (``create_app(action_type=...)``) wins. Otherwise the env class's declared type;
    a factory must name its env class in its return annotation, since the kernel never builds an
    env to find out. Raises ``RuleViolation`` naming the fix when the type is unknown, so a server
    never serves the bare ``Action`` schema that refuses every real action.
    """
    if explicit is not None:
        return explicit
    cls = env_class_of(target)
    if cls is None:
        label = getattr(target, "__qualname__", None) or type(target).__qualname__
        raise RuleViolation(
            f"The env factory '{label}' does not say which env it builds, so its action type is "
            f"unknown. Annotate its return type with the env class (`def {label}() -> MyEnv:`), or "
            "pass action_type=MyAction to create_app."
        )
    if not issubclass(cls, Environment):
        what = "an Action class" if issubclass(cls, Action) else (
            "an Observation class" if issubclass(cls, Observation) else f"the class {cls.__qualname__}")
        raise RuleViolation(
            f"'{cls.__module__}:{cls.__qualname__}' is {what}, not an Environment subclass, so it cannot "
            "be served. Point at your env class instead ('my_pkg.env:MyEnv', a subclass of "
            "openenv.Environment), or at a factory annotated `-> MyEnv`.")
    action = getattr(cls, "action_type", None)  # an undeclared Environment raises here, naming the fix
    if not (isinstance(action, type) and issubclass(action, Action)):
        raise RuleViolation(
            f"'{cls.__qualname__}' has no usable action_type ({action!r}): set it to your Action "
            "subclass, or pass action_type=MyAction to create_app."
        )
    return action


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
