"""The white-box tool-calling loop over the gateway: a ``ModelStep`` for ``MCPHarnessAdapter``.

The trainer drives the loop (``openenv.core.harness.MCPHarnessAdapter.run_white_box``); each model
step is a chat completion through the gateway under one episode's key, so white-box and black-box
rollouts are captured the same way, and the step's ids and logprobs are the gateway's capture of
that call (the engine's own), never a re-tokenisation.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from openenv.core.harness import ModelStep, ModelStepResult
from openenv.core.llm_client import LLMResponse, ToolCall
from openenv_gateway.gateway import CaptureGateway

__all__ = ["GatewayModelError", "gateway_model_step"]


class GatewayModelError(RuntimeError):
    """A model call through the gateway failed; the message is the provider-shaped error's."""


def _function_tool(tool: Any) -> dict[str, Any]:
    if isinstance(tool, dict) and tool.get("type") == "function":
        return tool
    get = tool.get if isinstance(tool, dict) else lambda k, d=None: getattr(tool, k, d)
    return {"type": "function", "function": {"name": get("name"), "description": get("description", "") or "",
                                             "parameters": get("input_schema", None) or {"type": "object"}}}


def gateway_model_step(gateway: CaptureGateway, key: str, *, model: str = "openenv",
                       timeout_s: float = 120.0) -> ModelStep:
    """A ``ModelStep`` that samples through ``gateway`` as the episode of ``key`` (one call at a time)."""
    client = httpx.Client(base_url=gateway.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout_s)

    def step(messages: list[dict[str, Any]], tools: list[Any], sampling: dict[str, Any]) -> ModelStepResult:
        body: dict[str, Any] = {"model": model, "messages": messages, **sampling}
        if tools:
            body["tools"] = [_function_tool(t) for t in tools]
        before = len(gateway.trace(key).turns)
        response = client.post("/v1/chat/completions", json=body)
        if response.status_code != 200:
            try:
                detail = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                detail = response.text[:500]
            raise GatewayModelError(f"the model call failed ({response.status_code}): {detail}")
        message = response.json()["choices"][0]["message"]
        calls = []
        for call in message.get("tool_calls") or []:
            try:
                args = json.loads(call["function"].get("arguments") or "{}")
            except ValueError:
                args = {"_raw": call["function"].get("arguments")}
            calls.append(ToolCall(id=call.get("id", ""), name=call["function"]["name"], args=args))
        turns = gateway.trace(key).turns
        turn = turns[before] if len(turns) > before else None
        if turn is None or turn.ids_source != "engine":
            raise GatewayModelError("the gateway captured no engine ids for this call (see the trace's error): a "
                                    "white-box step needs prompt and completion ids from the inference server")
        return ModelStepResult(LLMResponse(message.get("content") or "", calls), prompt_ids=list(turn.prompt_ids),
                               completion_ids=list(turn.completion_ids), logprobs=list(turn.logprobs))

    return step
