"""Policies for ``collect``: how each action is chosen.

A policy is built once per run by ``make_policy(spec, info)`` and asked ``await policy.act(obs, ctx)``
for every step; ``ctx`` (``EpisodeContext``) carries the episode's number, seed, task row, a seeded
RNG and the steps so far. Built-ins: ``random`` and ``first`` (among ``legal_actions`` when the
observation lists them, else sampled from the action's JSON schema), ``module:callable`` (any
function ``f(observation, ctx) -> action``, sync or async, or a class whose instances have ``act``),
and ``llm`` (``openenv_rollouts.llm.LLMPolicy``).
"""

from __future__ import annotations

import importlib
import inspect
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from openenv.cli.run_cmd import SCHEMA_POLICIES  # one list of names for `run` and `collect`
from openenv.errors import ConfigError
from openenv_rollouts.envinfo import EnvInfo

__all__ = ["BUILTIN_POLICIES", "CallablePolicy", "Decision", "EpisodeContext", "Policy", "PolicyError", "SchemaPolicy",
           "make_policy"]

BUILTIN_POLICIES = (*SCHEMA_POLICIES, "llm")


class PolicyError(Exception):
    """The policy raised, or gave something that is not an action (recorded in the episode)."""


@dataclass
class Decision:
    """An action with what the policy wants kept beside it in the step's record.

    A policy may return ``Decision(action, info)`` instead of the bare action; ``collect`` steps
    with ``action`` and writes ``info`` as the step's ``llm`` field (the ``llm`` policy puts its
    token usage, token ids and logprobs there)."""

    action: Any
    info: dict[str, Any] | None = None


@dataclass
class EpisodeContext:
    """What a policy may know about the episode it plays."""

    episode: int
    seed: int | None
    task: dict[str, Any] | None
    info: EnvInfo
    rng: random.Random
    task_id: str | None = None  # the server-side task the episode plays (``--split``, ``openenv eval``)
    group_id: str | None = None  # its group (``--group-size``): every member plays the same episode
    t: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)  # {"observation", "action", "reward"}
    state: dict[str, Any] = field(default_factory=dict)  # per-episode scratch space of the policy


class Policy(Protocol):
    name: str

    async def act(self, observation: Any, ctx: EpisodeContext) -> Any: ...


class SchemaPolicy:
    """``random`` / ``first`` / ``cycle`` (as ``openenv run``'s): a legal action when listed, else a value
    sampled from the schema."""

    def __init__(self, name: str, info: EnvInfo) -> None:
        from openenv.cli.run_cmd import Policy as RunPolicy

        self.name = name
        self._info = info
        schema = info.action_schema  # a copy per access: taken once, not per episode
        self._make = lambda seed: RunPolicy(name, schema, seed)
        self._tools = [t["name"] for t in info.tools]
        # `first` draws nothing at random: one chooser serves every episode (no RNG built per episode)
        self._shared = self._make(None) if name == "first" else None

    async def act(self, observation: Any, ctx: EpisodeContext) -> Any:
        return self.act_now(observation, ctx)

    def act_now(self, observation: Any, ctx: EpisodeContext) -> Any:
        """``act`` without the coroutine: ``collect`` calls this directly when a policy has it."""
        chooser = self._shared or ctx.state.get("chooser")
        if chooser is None:
            chooser = ctx.state["chooser"] = self._make(ctx.rng.randrange(2**31))
        if self._tools and self._info.mcp:
            return self._tool_call(ctx)
        return chooser.act(observation)

    def checkpoint(self, ctx: EpisodeContext) -> dict[str, Any] | None:
        """The policy's per-episode state as JSON (``collect``'s checkpoints): its chooser's draws."""
        from openenv.snapshots import rng_state

        chooser = ctx.state.get("chooser")
        return None if chooser is None else {"rng": rng_state(chooser.rng), "index": chooser.index}

    def resume(self, ctx: EpisodeContext, data: dict[str, Any]) -> None:
        """Continue from ``checkpoint``'s data: the same draws the episode would have made."""
        from openenv.snapshots import set_rng_state

        if self._shared is not None:
            return
        chooser = ctx.state["chooser"] = self._make(0)
        set_rng_state(chooser.rng, data["rng"])
        chooser.index = int(data["index"])

    def _tool_call(self, ctx: EpisodeContext) -> dict[str, Any]:
        from openenv.cli.run_cmd import ActionSampler

        pick: Callable[[list[Any]], Any] = (
            (lambda xs: xs[0]) if self.name == "first" else
            (lambda xs: xs[ctx.t % len(xs)]) if self.name == "cycle" else ctx.rng.choice)
        tool = next(t for t in self._info.tools if t["name"] == pick(self._tools))
        arguments = ActionSampler(dict(tool.get("input_schema") or {}), pick).sample()
        return {"type": "call_tool", "tool_name": tool["name"], "arguments": arguments}


class CallablePolicy:
    """A user's ``module:callable``: ``f(observation, ctx)`` (sync or async) returns the action."""

    def __init__(self, ref: str, target: Any) -> None:
        self.name = ref
        if inspect.isclass(target):
            target = target()
        act = getattr(target, "act", target)
        if not callable(act):
            raise ConfigError(f"policy '{ref}' is not callable; give a function f(observation, ctx) "
                              "or a class with an act(observation, ctx) method.")
        self._act = act

    async def act(self, observation: Any, ctx: EpisodeContext) -> Any:
        value = self._act(observation, ctx)
        if inspect.isawaitable(value):
            value = await value
        return value


def _load_ref(ref: str) -> Any:
    module_name, _, attr = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"policy '{ref}': cannot import module '{module_name}': {exc}") from exc
    target: Any = module
    for part in attr.split("."):
        if not hasattr(target, part):
            names = [n for n in dir(module) if not n.startswith("_")]
            from openenv.errors import did_you_mean

            raise ConfigError(f"policy '{ref}': module '{module_name}' has no attribute '{part}'."
                              f"{did_you_mean(part, names)}")
        target = getattr(target, part)
    return target


def make_policy(spec: str, info: EnvInfo, **llm_options: Any) -> Policy:
    """``random`` | ``first`` | ``cycle`` | ``llm`` (with ``llm_options``) | ``module:callable``."""
    if spec in SCHEMA_POLICIES:
        return SchemaPolicy(spec, info)
    if spec == "llm":
        from openenv_rollouts.llm import LLMPolicy

        return LLMPolicy(info, **llm_options)
    if ":" in spec:
        return CallablePolicy(spec, _load_ref(spec))
    from openenv.errors import did_you_mean

    raise ConfigError(f"unknown policy '{spec}'.{did_you_mean(spec, list(BUILTIN_POLICIES))} "
                      f"Use {', '.join(BUILTIN_POLICIES)} or a 'module:callable'.")
