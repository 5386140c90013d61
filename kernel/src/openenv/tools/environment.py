"""``ToolEnvironment``: the env base whose actions are tool calls (plus, optionally, its own)."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from openenv.env import CONTROL_NAMES, Environment
from openenv.errors import RuleViolation
from openenv.tools.decorator import DEFAULT_TOOL_TIMEOUT_S, TOOL_ATTR
from openenv.tools.errors import ToolCallError
from openenv.tools.registry import ToolRegistry
from openenv.tools.schema import ToolSpec
from openenv.tools.wire import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    ToolAction,
    ToolError,
    ToolErrorType,
)
from openenv.types import Action, Observation, State

__all__ = ["ToolEnvironment"]


# -- the environment base ------------------------------------------------------------------------


ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)


class ToolEnvironment(Environment[ActT, ObsT, StateT], Generic[ActT, ObsT, StateT]):
    """An environment whose actions are tool calls (plus, optionally, actions of its own).

    * Tools: methods marked ``@tool`` (collected per instance, bound to it) and functions added
      with ``add_tool`` at run time. The listing and every call are filtered by ``self.mode``.
    * ``step`` handles ``ListToolsAction`` and ``CallToolAction``; any other action goes to
      ``step_other`` (declare its type with ``other_action_type``, or parametrise
      ``ToolEnvironment[MyAction, MyObservation, MyState]``).
    * Rewards: ``reward_for_tool_call`` decides reward and done of every tool call, on every
      path (``/ws`` steps, HTTP steps and JSON-RPC ``tools/call`` all run through ``step``).
    * Episode bookkeeping: the default ``reset``/``state`` keep a ``State`` whose ``step_count``
      counts every step; override them (and ``step_other``) for a richer env.

    Sync by default (the session manager runs ``step`` on the session's worker; sync tool bodies
    run on a tool worker thread under their deadline). An ``async`` tool, or an override of
    ``step_other_async`` or ``reset_async``, makes the env async: ``step_async`` then awaits tool
    calls on the event loop. With ``THREAD_AFFINITY`` or ``BLOCKING = False`` sync tool bodies run
    inline on the env's thread, without a deadline (the session's ``step_timeout_s`` still applies).
    """

    action_type: ClassVar[type[Action]] = ToolAction
    observation_type: ClassVar[type[Observation]] = CallToolObservation
    #: What the default ``reset`` returns (``GET /schema`` → ``reset_observation``).
    reset_observation_type: ClassVar[type[Observation]] = Observation
    #: Non-tool actions this env accepts (validated when the object's ``type`` is not an MCP one).
    other_action_type: ClassVar[type[Action] | None] = None
    #: Deadline of tool calls that set none themselves.
    tool_timeout_s: ClassVar[float | None] = DEFAULT_TOOL_TIMEOUT_S

    __tool_methods__: ClassVar[tuple[str, ...]] = ()
    __async_tools__: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # ``ToolEnvironment[Any, ...]``: typing.Any is a class on Python 3.11, so the kernel's type
        # inference may have stored it; forget such non-model entries (the base's types apply).
        for attr, base in (("action_type", Action), ("observation_type", Observation), ("state_type", State)):
            value = cls.__dict__.get(attr)
            if value is not None and not (isinstance(value, type) and issubclass(value, base)):
                delattr(cls, attr)
        # A generic parameter (ToolEnvironment[MyAction, ...]) names the env's own action type.
        inferred = cls.__dict__.get("action_type")
        if inferred is not None and not issubclass(inferred, ToolAction):
            if issubclass(inferred, ListToolsAction | CallToolAction) or inferred is Action:
                cls.action_type = ToolAction.accepting(cls.other_action_type)
            else:
                cls.other_action_type = inferred
                cls.action_type = ToolAction.accepting(inferred)
        elif "other_action_type" in cls.__dict__:
            cls.action_type = ToolAction.accepting(cls.other_action_type)
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            for attr, value in klass.__dict__.items():
                func = value.__func__ if isinstance(value, staticmethod | classmethod) else value
                options = getattr(func, TOOL_ATTR, None)
                if options is None:
                    if attr in names:  # overridden by a non-tool attribute
                        names.remove(attr)
                    continue
                if attr in CONTROL_NAMES:
                    raise RuleViolation(f"{cls.__qualname__}.{attr}: reset, step, state and close "
                                        "cannot be tools; rename the method.")
                if attr not in names:
                    names.append(attr)
        cls.__tool_methods__ = tuple(names)
        # An async tool makes the env async: the session manager then awaits step_async on the loop.
        cls.__async_tools__ = any(inspect.iscoroutinefunction(getattr(cls, n)) for n in names)

    def __init__(self) -> None:
        super().__init__()
        self._episode = State(episode_id=str(uuid.uuid4()), step_count=0)

    # -- tools ----------------------------------------------------------------------------------

    @property
    def tool_registry(self) -> ToolRegistry:
        """This instance's registry (built on first use from the ``@tool`` methods)."""
        registry: ToolRegistry | None = self.__dict__.get("_tool_registry")
        if registry is None:
            # Thread-affine envs keep tool bodies on their own thread; non-blocking envs declared
            # their work cheap. Both run sync tool bodies inline, without a deadline.
            inline = bool(self.THREAD_AFFINITY) or not self.BLOCKING
            registry = ToolRegistry(default_timeout_s=self.tool_timeout_s, inline_sync=inline)
            for attr in type(self).__tool_methods__:
                registry.add(getattr(self, attr))
            self.__dict__["_tool_registry"] = registry
        return registry

    def add_tool(self, fn: Callable[..., Any], **options: Any) -> ToolSpec:
        """Register a tool at run time (same options as ``@tool``; reserved names are refused)."""
        return self.tool_registry.add(fn, **options)

    def remove_tool(self, name: str, mode: str | None = None) -> None:
        """Remove a tool variant added earlier."""
        self.tool_registry.remove(name, mode)

    def list_tools(self) -> list[ToolSpec]:
        """The tools visible in this env's mode."""
        return self.tool_registry.visible(self.mode)

    # -- hooks for subclasses -------------------------------------------------------------------

    def reward_for_tool_call(
        self, tool_name: str, arguments: dict[str, Any], result: Any, error: ToolError | None
    ) -> tuple[float | None, bool]:
        """Reward and done after a tool call (``result`` is the tool's raw return value, ``None``
        on error). Default: no reward, not done."""
        return None, False

    def step_other(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """Handle an action that is not a tool action. Override it with ``other_action_type``."""
        raise NotImplementedError(
            f"{type(self).__qualname__} accepts only list_tools and call_tool actions; to accept "
            f"{type(action).__name__}, set other_action_type and implement step_other."
        )

    async def step_other_async(self, action: Action, timeout_s: float | None = None,
                               **kwargs: Any) -> Observation:
        """Async twin of ``step_other``; overriding it makes the env async."""
        return self.step_other(action, timeout_s=timeout_s, **kwargs)

    @classmethod
    def is_async(cls) -> bool:
        return (cls.__async_tools__ or cls.step_other_async is not ToolEnvironment.step_other_async
                or cls.reset_async is not Environment.reset_async
                or cls.step_async is not ToolEnvironment.step_async)

    # -- the protocol ---------------------------------------------------------------------------

    def reset(self, seed: int | None = None, episode_id: str | None = None,  # type: ignore[override]
              **kwargs: Any) -> Observation:
        """Start a new episode (new ``episode_id`` unless given, ``step_count`` 0)."""
        self._episode = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return Observation(done=False, reward=0.0)

    @property
    def state(self) -> State:  # type: ignore[override]
        episode = self.__dict__.get("_episode")
        if episode is None:
            episode = self.__dict__["_episode"] = State(episode_id=str(uuid.uuid4()), step_count=0)
        return episode  # type: ignore[no-any-return]

    def _count_step(self) -> None:
        episode = self.__dict__.get("_episode")
        if episode is None:  # a subclass that skipped super().__init__()
            episode = self.__dict__["_episode"] = State(episode_id=str(uuid.uuid4()), step_count=0)
        episode.step_count += 1

    def step(self, action: Action, timeout_s: float | None = None,  # type: ignore[override]
             **kwargs: Any) -> Observation:
        self._count_step()
        if isinstance(action, ListToolsAction):
            return self._list_observation()
        if isinstance(action, CallToolAction):
            try:
                spec, value = self.tool_registry.call(action.tool_name, action.arguments, mode=self.mode,
                                                      timeout_s=timeout_s)
            except ToolCallError as exc:
                return self._call_observation(action, None, None, exc)
            return self._call_observation(action, spec, value, None)
        return self.step_other(action, timeout_s=timeout_s, **kwargs)

    async def step_async(self, action: Action, timeout_s: float | None = None,  # type: ignore[override]
                         **kwargs: Any) -> Observation:
        self._count_step()
        if isinstance(action, ListToolsAction):
            return self._list_observation()
        if isinstance(action, CallToolAction):
            try:
                spec, value = await self.tool_registry.call_async(
                    action.tool_name, action.arguments, mode=self.mode, timeout_s=timeout_s)
            except ToolCallError as exc:
                return self._call_observation(action, None, None, exc)
            return self._call_observation(action, spec, value, None)
        return await self.step_other_async(action, timeout_s=timeout_s, **kwargs)

    def close(self) -> None:
        registry: ToolRegistry | None = self.__dict__.get("_tool_registry")
        if registry is not None:
            registry.close()

    # -- helpers --------------------------------------------------------------------------------

    def _list_observation(self) -> ListToolsObservation:
        try:
            tools = [spec.step_entry() for spec in self.list_tools()]
        except Exception as exc:  # a broken runtime tool must not break the session
            return ListToolsObservation(tools=[], metadata={"error": str(exc), "error_type": "list_tools_failed"})
        return ListToolsObservation(tools=tools)

    def _call_observation(self, action: CallToolAction, spec: ToolSpec | None, value: Any,
                          failure: ToolCallError | None) -> CallToolObservation:
        error = failure.to_tool_error() if failure is not None else None
        result = None
        if spec is not None:
            try:
                result = spec.serialize(value).to_wire()
            except Exception as exc:
                error = ToolError(error_type=ToolErrorType.EXECUTION_ERROR,
                                  message=f"Tool '{action.tool_name}' returned a value that cannot be "
                                  f"serialized to JSON: {exc}")
                value = None
        reward, done = self.reward_for_tool_call(action.tool_name, action.arguments,
                                                 value if error is None else None, error)
        return CallToolObservation(tool_name=action.tool_name, result=result, error=error,
                                   reward=reward, done=done)
