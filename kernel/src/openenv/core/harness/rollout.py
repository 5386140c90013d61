"""Upstream's trainer-side rollout types and the two pieces that do work: ``StepEnvSessionAdapter``
and ``MCPHarnessAdapter`` (see the package docstring)."""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypedDict, TypeVar, runtime_checkable

from openenv.core.llm_client import LLMResponse

if TYPE_CHECKING:
    from openenv.core.harness.training import TrainingTrace

__all__ = ["RESERVED_TOOL_NAMES", "HarnessAdapter", "HarnessRolloutResult", "HarnessRunLimits", "LoopOwningSession",
           "MCPHarnessAdapter", "Message", "ModelStep", "ModelStepResult", "ResourceSession", "ResourceSessionFactory",
           "RolloutEvent", "StepEnvSessionAdapter", "ToolResult", "ToolTraceEntry", "TraceEntry", "TrainableSession",
           "VerifyResult", "build_harness_rollout_func", "env_reward_of"]

Message = dict[str, Any]
#: Names a session's tools may not take: the orchestration verbs.
RESERVED_TOOL_NAMES = frozenset({"reset", "step", "state", "close"})


@dataclass
class ToolResult:
    data: Any = None
    done: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass
class VerifyResult:
    """The end of a rollout: the env's own reward (never one made up here), done, metrics, artifacts."""

    env_reward: float | None = None
    done: bool = False
    metrics: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, Any] = field(default_factory=dict)


@dataclass
class RolloutEvent:
    type: str
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolTraceEntry:
    tool_name: str
    arguments: dict[str, Any]
    result: ToolResult


@dataclass
class ModelStepResult:
    """One sampled model turn: the parsed answer plus its token ids and logprobs."""

    response: LLMResponse
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)


@dataclass
class HarnessRolloutResult:
    messages: list[Message] = field(default_factory=list)
    tool_trace: list[ToolTraceEntry] = field(default_factory=list)
    events: list[RolloutEvent] = field(default_factory=list)
    done: bool = False
    metrics: dict[str, Any] = field(default_factory=dict)
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)


@dataclass
class HarnessRunLimits:
    max_turns: int = 10
    max_tool_calls_per_turn: int | None = None
    max_total_tool_calls: int | None = None
    sampling: dict[str, Any] = field(default_factory=dict)


class ModelStep(Protocol):
    def __call__(self, messages: list[Message], tools: list[Any], sampling: dict[str, Any]) -> ModelStepResult: ...


class TraceEntry(TypedDict, total=False):
    """One captured model call (every key optional; ``reward`` is None when unscored, never 0.0)."""

    request: dict[str, Any]
    response: dict[str, Any]
    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    completion_tokens: list[str]
    per_token_logps: list[float]
    loss_mask: list[int]
    reward: float | None
    metadata: dict[str, Any]


@runtime_checkable
class LoopOwningSession(Protocol):
    def wait_for_completion(self, timeout_s: float | None = ...) -> int: ...

    def fetch_proxy_trace(self) -> list[TraceEntry]: ...


@runtime_checkable
class TrainableSession(Protocol):
    def wait_for_completion(self, timeout_s: float | None = ...) -> int: ...

    def fetch_training_trace(self) -> TrainingTrace: ...


class ResourceSession(ABC):
    """One rollout's view of an env: initial messages, tools, tool calls, verification, close."""

    @abstractmethod
    def initial_messages(self) -> list[Message]: ...

    @abstractmethod
    def list_tools(self) -> list[Any]: ...

    @abstractmethod
    def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult: ...

    @abstractmethod
    def verify(self, transcript: list[Message], final_state: Any | None = None) -> VerifyResult: ...

    @abstractmethod
    def close(self) -> None: ...


SessionT = TypeVar("SessionT", bound=ResourceSession)


class ResourceSessionFactory(ABC, Generic[SessionT]):
    @abstractmethod
    def create(self, task: Any, seed: int | None = None, episode_id: str | None = None) -> SessionT: ...


class HarnessAdapter(ABC):
    @abstractmethod
    def run_white_box(self, model_step: ModelStep, session: ResourceSession,
                      limits: HarnessRunLimits | None = None) -> HarnessRolloutResult: ...

    @abstractmethod
    def run_black_box(self, session: ResourceSession,
                      limits: HarnessRunLimits | None = None) -> HarnessRolloutResult: ...


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    return json.dumps(value, default=str, sort_keys=True)


def _as_data(state: Any) -> Any:
    return state.model_dump() if hasattr(state, "model_dump") else state


class StepEnvSessionAdapter(ResourceSession):
    """A reset/step/state client (async clients are made blocking with ``.sync()``) as a session:
    ``action_builder(tool, args)`` turns a tool call into the env's action. Resets on construction."""

    def __init__(self, client: Any, *, task: Any = None, seed: int | None = None, episode_id: str | None = None,
                 tool_specs: list[Any], action_builder: Callable[[str, dict[str, Any]], Any],
                 initial_messages_builder: Callable[[Any, Any], list[Message]],
                 tool_result_builder: Callable[[str, dict[str, Any], Any, Any], ToolResult] | None = None,
                 verify_builder: Callable[[list[Message], Any, Any, Any], VerifyResult] | None = None,
                 reset_kwargs: dict[str, Any] | None = None) -> None:
        self._client = client.sync() if callable(getattr(client, "sync", None)) else client
        self._task, self._tool_specs = task, list(tool_specs)
        self._action_builder, self._initial_builder = action_builder, initial_messages_builder
        self._tool_result_builder = tool_result_builder or self._default_tool_result
        self._verify_builder = verify_builder or self._default_verify
        self._closed = False
        self._tools = {getattr(t, "name", None) or t["name"]: t for t in self._tool_specs}
        clash = sorted(set(self._tools) & RESERVED_TOOL_NAMES)
        if clash:
            raise ValueError("Tool names are reserved for orchestration controls: " + ", ".join(clash))
        kwargs = dict(reset_kwargs or {})
        if seed is not None:
            kwargs.setdefault("seed", seed)
        if episode_id is not None:
            kwargs.setdefault("episode_id", episode_id)
        self._last_result: Any = None
        self._last_state: Any = None
        try:
            self._initial_result = self._client.reset(**kwargs)
            self._last_state = self._read_state()
        except Exception:
            self.close()
            raise

    def _read_state(self) -> Any:
        return self._client.state() if callable(getattr(self._client, "state", None)) else None

    def _default_tool_result(self, name: str, arguments: dict[str, Any], result: Any, state: Any) -> ToolResult:
        data = {"tool_name": name, "arguments": dict(arguments), "observation": result.observation,
                "reward": result.reward, "done": result.done}
        return ToolResult(data=data, done=bool(result.done), metadata={"reward": result.reward,
                                                                       "state": _as_data(state)})

    def _default_verify(self, transcript: list[Message], final_state: Any, last: Any, state: Any) -> VerifyResult:
        metrics: dict[str, Any] = {}
        count = getattr(state, "step_count", None)
        if count is None and isinstance(state, dict):
            count = state.get("step_count")
        if count is not None:
            metrics["step_count"] = count
        return VerifyResult(env_reward=None if last is None else last.reward,
                            done=bool(last is not None and last.done), metrics=metrics,
                            artifacts={"final_state": _as_data(state), "transcript_length": len(transcript)})

    def initial_messages(self) -> list[Message]:
        return list(self._initial_builder(self._initial_result, self._task))

    def list_tools(self) -> list[Any]:
        return list(self._tool_specs)

    def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if name in RESERVED_TOOL_NAMES:
            raise KeyError(f"Reserved orchestration tool: {name}")
        if name not in self._tools:
            raise KeyError(f"Unknown tool: {name}")
        result = self._client.step(self._action_builder(name, dict(arguments)))
        self._last_result, self._last_state = result, self._read_state()
        return self._tool_result_builder(name, dict(arguments), result, self._last_state)

    def verify(self, transcript: list[Message], final_state: Any | None = None) -> VerifyResult:
        return self._verify_builder(list(transcript), final_state, self._last_result, self._last_state)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if callable(getattr(self._client, "close", None)):
                self._client.close()


class MCPHarnessAdapter(HarnessAdapter):
    """The white-box loop: sample a turn; no tool calls ends it; else run each call (within the
    limits) and answer it with a ``tool`` message; a tool result with ``done`` ends the rollout."""

    def run_white_box(self, model_step: ModelStep, session: ResourceSession,
                      limits: HarnessRunLimits | None = None) -> HarnessRolloutResult:
        limits = limits or HarnessRunLimits()
        messages = list(session.initial_messages())
        tools = session.list_tools()
        out = HarnessRolloutResult(messages=list(messages))
        calls_made = 0
        for turn in range(limits.max_turns):
            step = model_step(messages, tools, dict(limits.sampling))
            messages.append(step.response.to_message_dict())
            out.prompt_ids += step.prompt_ids
            out.completion_ids += step.completion_ids
            out.logprobs += step.logprobs
            calls = step.response.tool_calls
            out.events.append(RolloutEvent("model_response", {
                "turn": turn, "content": step.response.content,
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": dict(c.args)} for c in calls]}))
            if not calls:
                out.done = True
                break
            if limits.max_tool_calls_per_turn is not None:
                calls = calls[:limits.max_tool_calls_per_turn]
            for call in calls:
                if limits.max_total_tool_calls is not None and calls_made >= limits.max_total_tool_calls:
                    out.metrics["truncated"] = True
                    out.messages = list(messages)
                    return out
                result = session.call_tool(call.name, dict(call.args))
                calls_made += 1
                out.tool_trace.append(ToolTraceEntry(call.name, dict(call.args), result))
                out.events.append(RolloutEvent("tool_call", {"tool_name": call.name, "arguments": dict(call.args),
                                                             "done": result.done}))
                messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                                 "content": _as_text(result.data)})
                if result.done:
                    out.done = True
                    break
            if out.done:
                break
        out.messages = list(messages)
        out.metrics.setdefault("turns", sum(e.type == "model_response" for e in out.events))
        out.metrics.setdefault("tool_calls", len(out.tool_trace))
        return out

    def run_black_box(self, session: ResourceSession, limits: HarnessRunLimits | None = None) -> HarnessRolloutResult:
        raise NotImplementedError("MCPHarnessAdapter is a white-box harness: the trainer samples the model "
                                  "(run_white_box).")


def _tool_reward(result: ToolResult) -> float | None:
    reward = result.metadata.get("reward")
    if reward is None and isinstance(result.data, dict):
        reward = result.data.get("reward")
    return None if reward is None else float(reward)


def env_reward_of(rollout: HarnessRolloutResult, verify: VerifyResult) -> float:
    """The env's reward for a rollout: its last tool result's reward, else ``verify.env_reward``.

    Never made up: a rollout with neither raises, and a verify reward that disagrees with the
    env's own tool result raises too (a verify step must forward the env's reward, not invent one).
    """
    from_trace = next((r for r in (_tool_reward(e.result) for e in reversed(rollout.tool_trace)) if r is not None),
                      None)
    from_verify = None if verify.env_reward is None else float(verify.env_reward)
    if from_trace is not None and from_verify is not None and not math.isclose(from_trace, from_verify,
                                                                                rel_tol=1e-9, abs_tol=1e-6):
        raise ValueError(f"verify.env_reward ({from_verify}) must forward the environment's reward from the "
                         f"rollout ({from_trace})")
    if from_trace is not None:
        return from_trace
    if from_verify is not None:
        return from_verify
    raise ValueError("the rollout produced no environment reward (no tool result carried one and verify() "
                     "returned env_reward=None)")


def build_harness_rollout_func(*, session_factory: ResourceSessionFactory[Any], harness_adapter: HarnessAdapter,
                               model_step_builder: Callable[[Any, ResourceSession], ModelStep],
                               limits: HarnessRunLimits | None = None,
                               reward_key: str = "env_reward") -> Callable[[list[Any], Any], dict[str, list[Any]]]:
    """Upstream's TRL ``rollout_func(prompts, trainer)`` over white-box harness rollouts.

    Per prompt: ``session_factory.create(task=prompt)``, ``model_step_builder(trainer, session)``,
    ``harness_adapter.run_white_box``, ``session.verify(transcript, final_state)``, the session
    closed. Returns ``prompt_ids``, ``completion_ids``, ``logprobs``, ``reward_key`` (the env's
    reward, ``env_reward_of``) and ``verify_metrics``. For black-box agent programs, whose model
    calls the trainer does not make, see ``openenv_gateway.trl.harness_rollout_func``.
    """

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], reward_key: [],
                                     "verify_metrics": []}
        for prompt in prompts:
            session = session_factory.create(task=prompt)
            try:
                rollout = harness_adapter.run_white_box(model_step_builder(trainer, session), session, limits)
                final_state = {
                    "done": rollout.done, "metrics": dict(rollout.metrics),
                    "events": [{"type": e.type, "payload": dict(e.payload)} for e in rollout.events],
                    "tool_trace": [{"tool_name": e.tool_name, "arguments": dict(e.arguments),
                                    "result": {"data": e.result.data, "done": e.result.done,
                                               "metadata": dict(e.result.metadata), "error": e.result.error}}
                                   for e in rollout.tool_trace]}
                verify = session.verify(rollout.messages, final_state)
                out["prompt_ids"].append(list(rollout.prompt_ids))
                out["completion_ids"].append(list(rollout.completion_ids))
                out["logprobs"].append(list(rollout.logprobs))
                out[reward_key].append(env_reward_of(rollout, verify))
                out["verify_metrics"].append(dict(verify.metrics))
            finally:
                session.close()
        return out

    return rollout_func
