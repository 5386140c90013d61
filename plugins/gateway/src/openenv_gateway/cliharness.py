"""Upstream's black-box adapter, ``openenv.core.harness.CLIHarnessAdapter``, with its constructor and methods.

Upstream (0.10) defines ``CLIHarnessAdapter(runner)``: ``run_black_box(session, limits)`` wraps the
session in a ``SessionMCPBridge`` (the session's tools as in-process MCP JSON-RPC) and returns
``runner(bridge, session, limits)``, a ``HarnessRolloutResult``; ``run_white_box`` is refused. The
kernel maps both names here lazily (it never imports this plugin on its own), so upstream code that
does ``from openenv.core.harness import CLIHarnessAdapter`` gets this class when
openenvkit-gateway is installed.

What upstream leaves to the caller, the runner that actually runs a CLI agent, is ``CommandRunner``:
the agent program under ``CommandHarness``, its model calls captured by the gateway. One call:

1. the prompt is the session's ``initial_messages()`` (their text, system and user);
2. the agent runs with the gateway's URL and a fresh episode key, at most ``limits.max_turns``
   model calls (the gateway refuses more: 429 ``turn_limit``), within the harness's deadline; the
   bridge answers its own JSON-RPC requests (``tools/list``, ``tools/call``) at
   ``OPENENV_TOOLS_URL`` (the gateway's ``/v1/openenv/tools``, with the episode's key);
3. if ``answer_tool`` is set, its answer (``answer_file`` in its working directory, else its
   stdout) goes to the env through the bridge as ``tools/call answer_tool {answer_argument:
   answer, **tool_extra}``; ``session.verify(transcript, final_state)`` gives the verdict, and the
   reward is the env's (``env_reward_of``: the last tool result's, else verify's);
4. the result carries the capture as upstream's fields: ``prompt_ids`` / ``completion_ids`` /
   ``logprobs`` of the episode's last training sample (the engine's ids; empty when no call
   carried them), the tool call in ``tool_trace``, one ``model_call`` event per captured turn,
   and ``metrics`` (reward, model calls, branches, drift, the agent's exit, any error).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from openenv.core.harness import (
    RESERVED_TOOL_NAMES,
    HarnessAdapter,
    HarnessRolloutResult,
    HarnessRunLimits,
    Message,
    ModelStep,
    ResourceSession,
    RolloutEvent,
    ToolResult,
    ToolTraceEntry,
    env_reward_of,
)
from openenv_gateway.harness import AgentRun, CommandHarness, Verdict

__all__ = ["CLIHarnessAdapter", "CommandRunner", "Runner", "SessionMCPBridge"]

#: JSON-RPC 2.0 error codes the bridge answers with.
INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32600, -32601, -32602, -32603


def _tool_field(tool: Any, name: str, default: Any = None) -> Any:
    if isinstance(tool, dict):
        return tool.get(name, tool.get("input_schema" if name == "inputSchema" else name, default))
    return getattr(tool, "input_schema" if name == "inputSchema" else name, default)


class SessionMCPBridge:
    """A session's tools as MCP JSON-RPC 2.0 (``tools/list``, ``tools/call``), in process (upstream's name).

    ``call_tool`` is the typed path (a ``ToolResult``; ``KeyError`` for an unknown or reserved tool);
    ``handle_request`` answers a JSON-RPC request dict and never raises: bad requests get the JSON-RPC
    error that says what was wrong, and every call made is kept in ``tool_trace``.
    """

    def __init__(self, session: ResourceSession) -> None:
        self.session = session
        self.tool_trace: list[ToolTraceEntry] = []
        # one call at a time: an agent killed mid-call leaves its call running while the runner submits
        self._lock = threading.Lock()

    def list_tools(self) -> list[dict[str, Any]]:
        return [{"name": _tool_field(t, "name"), "description": _tool_field(t, "description", "") or "",
                 "inputSchema": _tool_field(t, "inputSchema", {}) or {"type": "object"}}
                for t in self.session.list_tools()]

    def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        if name in RESERVED_TOOL_NAMES:
            raise KeyError(f"reserved orchestration tool: {name} (the harness resets and steps the env itself)")
        known = [t["name"] for t in self.list_tools()]
        if name not in known:
            raise KeyError(f"unknown tool {name!r}; this session's tools: {', '.join(known) or '(none)'}")
        with self._lock:
            result = self.session.call_tool(name, dict(arguments))
            self.tool_trace.append(ToolTraceEntry(name, dict(arguments), result))
        return result

    def handle_request(self, request: dict[str, Any]) -> dict[str, Any]:
        request_id = request.get("id") if isinstance(request, dict) else None

        def error(code: int, message: str) -> dict[str, Any]:
            return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}

        if not isinstance(request, dict) or request.get("jsonrpc") != "2.0":
            return error(INVALID_REQUEST, 'not a JSON-RPC 2.0 request: send {"jsonrpc": "2.0", "id": ..., '
                                          '"method": "tools/list" | "tools/call", "params": {...}}')
        method, params = request.get("method"), request.get("params") or {}
        if method == "tools/list":
            return {"jsonrpc": "2.0", "id": request_id, "result": {"tools": self.list_tools()}}
        if method != "tools/call":
            return error(METHOD_NOT_FOUND, f"unknown method {method!r}: this bridge answers tools/list and tools/call")
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            return error(INVALID_PARAMS, "tools/call needs params.name (the tool) and params.arguments (an object)")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            return error(INVALID_PARAMS, f"params.arguments must be an object, got {type(arguments).__name__}")
        try:
            result = self.call_tool(params["name"], arguments)
        except KeyError as exc:
            code = INVALID_PARAMS if params["name"] in RESERVED_TOOL_NAMES else METHOD_NOT_FOUND
            return error(code, str(exc.args[0]) if exc.args else "unknown tool")
        except ValueError as exc:
            return error(INVALID_PARAMS, str(exc))
        except Exception as exc:  # the env failed: the agent is told, the caller keeps going
            return error(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
        return {"jsonrpc": "2.0", "id": request_id, "result": {"data": result.data, "done": result.done,
                                                               "metadata": dict(result.metadata),
                                                               "error": result.error}}


#: Upstream's runner signature.
Runner = Callable[[SessionMCPBridge, ResourceSession, HarnessRunLimits], HarnessRolloutResult]


class CLIHarnessAdapter(HarnessAdapter):
    """Upstream's black-box adapter: ``CLIHarnessAdapter(runner)``; ``run_black_box`` returns
    ``runner(SessionMCPBridge(session), session, limits)``. ``CommandRunner`` is a runner that runs an
    agent program through the capture gateway."""

    def __init__(self, runner: Runner) -> None:
        if not callable(runner):
            raise TypeError(f"CLIHarnessAdapter(runner) takes a callable (bridge, session, limits) -> "
                            f"HarnessRolloutResult, got {type(runner).__name__}; to run an agent program use "
                            "openenv_gateway.cliharness.CommandRunner(CommandHarness(gateway, [...]), ...)")
        self._runner = runner

    def run_white_box(self, model_step: ModelStep, session: ResourceSession,
                      limits: HarnessRunLimits | None = None) -> HarnessRolloutResult:
        raise NotImplementedError("CLIHarnessAdapter runs black-box agents only (run_black_box); for a loop whose "
                                  "model calls the trainer makes, use MCPHarnessAdapter.run_white_box")

    def run_black_box(self, session: ResourceSession, limits: HarnessRunLimits | None = None) -> HarnessRolloutResult:
        return self._runner(SessionMCPBridge(session), session, limits or HarnessRunLimits())


def _text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


class CommandRunner:
    """A runner for ``CLIHarnessAdapter``: ``harness``'s agent program on the session, through the gateway.

    ``answer_tool`` (with ``answer_argument`` and ``tool_extra``) is the session tool that takes the
    agent's answer (``answer_file`` in its working directory, else its stdout); ``None`` sends nothing
    (the agent calls the tools itself at ``OPENENV_TOOLS_URL``, or ``session.verify`` judges).
    ``task_id``/``group_id`` label the samples.
    """

    def __init__(self, harness: CommandHarness, *, answer_tool: str | None = None, answer_argument: str = "code",
                 answer_file: str | None = "solution.py", tool_extra: dict[str, Any] | None = None,
                 task_id: str | None = None, group_id: str | None = None) -> None:
        self.harness, self.answer_tool, self.answer_argument = harness, answer_tool, answer_argument
        self.answer_file, self.tool_extra = answer_file, dict(tool_extra or {})
        self.task_id, self.group_id = task_id, group_id
        self._count = 0

    def _answer(self, run: AgentRun) -> str:
        path = run.workdir / self.answer_file if self.answer_file else None
        return path.read_text(errors="replace") if path is not None and path.is_file() else run.stdout

    def __call__(self, bridge: SessionMCPBridge, session: ResourceSession,
                 limits: HarnessRunLimits) -> HarnessRolloutResult:
        initial = list(session.initial_messages())
        prompt = "\n\n".join(t for t in (_text(m) for m in initial if m.get("role") in ("system", "user")) if t)
        box: dict[str, Any] = {}

        def judge(run: AgentRun) -> Verdict:
            done = False
            if self.answer_tool is not None:
                reply = bridge.handle_request({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                    "name": self.answer_tool, "arguments": {self.answer_argument: self._answer(run),
                                                            **self.tool_extra}}})
                if "error" in reply:  # the harness records it as the env's error
                    raise RuntimeError(f"tools/call {self.answer_tool}: {reply['error']['message']}")
                done = bool(reply["result"]["done"])
            partial = HarnessRolloutResult(messages=list(initial), tool_trace=list(bridge.tool_trace), done=done)
            final_state = {"done": done, "agent": {"exit_code": run.exit_code, "timed_out": run.timed_out},
                           "tool_trace": [{"tool_name": e.tool_name, "arguments": dict(e.arguments),
                                           "result": {"data": e.result.data, "done": e.result.done,
                                                      "metadata": dict(e.result.metadata), "error": e.result.error}}
                                          for e in bridge.tool_trace]}
            verify = session.verify(list(initial), final_state)
            box["verify"] = verify
            return Verdict(reward=env_reward_of(partial, verify), done=done or verify.done,
                           info={"metrics": dict(verify.metrics)})

        self._count += 1
        episode = self.harness.run(episode_id=f"cli-{id(self):x}-{self._count}", prompt=prompt, verdict=judge,
                                   task_id=self.task_id, group_id=self.group_id, max_model_calls=limits.max_turns,
                                   tools=bridge.handle_request)
        trace = episode.trace
        out = HarnessRolloutResult(messages=list(initial), tool_trace=list(bridge.tool_trace),
                                   done=bool(episode.verdict and episode.verdict.done))
        for turn in trace.turns:
            if turn.error is None:
                out.messages.append({"role": "assistant", "content": turn.text})
            out.events.append(RolloutEvent("model_call", {"turn": turn.index, "branch": turn.branch,
                                                          "ids_source": turn.ids_source,
                                                          "error": turn.error.code if turn.error else None}))
        if episode.samples:
            sample = episode.samples[-1]  # as the TRL adapter: the last branch, split at its first prompt
            cut = len(trace.turns[sample.turns[0]].prompt_ids)
            out.prompt_ids, out.completion_ids = sample.input_ids[:cut], sample.input_ids[cut:]
            out.logprobs = sample.logprobs[cut:]
        run = episode.run
        out.metrics.update({"env_reward": episode.reward, "model_calls": len(trace.turns),
                            "branches": len(trace.branches), "drift_total": trace.drift_total,
                            "samples": len(episode.samples), "error": episode.error,
                            "exit_code": run.exit_code if run else None, "timed_out": bool(run and run.timed_out),
                            "duration_s": episode.duration_s,
                            **({"verify": dict(box["verify"].metrics)} if "verify" in box else {})})
        out.metrics["turns"] = len(trace.turns)
        out.metrics["tool_calls"] = len(out.tool_trace)
        if episode.error is not None:
            out.events.append(RolloutEvent("error", dict(episode.error)))
        return out

