"""OpenAI Responses (``POST /v1/responses``) in front of a Chat Completions engine.

``input`` (a string, or message / ``function_call`` / ``function_call_output`` items with
``input_text`` / ``input_image`` / ``output_text`` parts) and ``instructions`` become chat messages;
function tools (flat ``{type, name, parameters}``) become chat tools; the answer becomes a
``response`` with ``message`` and ``function_call`` output items; a stream becomes the Responses
event sequence (``response.created`` … ``response.output_text.delta`` … ``response.completed``).
Stateless only: ``previous_response_id`` is refused (the gateway stores no conversations).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from openenv_gateway.errors import GatewayError

__all__ = ["from_chat", "stream_events", "to_chat"]


def _bad(message: str, param: str | None = None) -> GatewayError:
    return GatewayError(400, "invalid_request", message, param)


def _parts(content: Any, where: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(f"{where}.content must be a string or a list of parts", "input")
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "input_image":
            parts.append({"type": "image_url", "image_url": {"url": str(part.get("image_url", ""))}})
        else:
            raise _bad(f"{where} has a part of unsupported type {kind!r} (expected input_text, output_text or "
                       "input_image)", "input")
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions request for a Responses request (``GatewayError`` 400 if malformed)."""
    if body.get("previous_response_id"):
        raise _bad("previous_response_id is not supported: the gateway stores no conversations; send the whole "
                   "history in input (store=false)", "previous_response_id")
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": str(body["instructions"])})
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list) or not items:
        raise _bad("input must be a string or a non-empty list of items", "input")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _bad(f"input[{i}] must be an object", "input")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise _bad(f"input[{i}].role must be user, assistant, system or developer", "input")
            content = _parts(item.get("content", ""), f"input[{i}]")
            messages.append({"role": "system" if role == "developer" else role, "content": content})
        elif kind == "function_call":
            call = {"id": str(item.get("call_id", "")), "type": "function",
                    "function": {"name": str(item.get("name", "")), "arguments": str(item.get("arguments", "{}"))}}
            if messages and messages[-1]["role"] == "assistant":
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output", "")
            messages.append({"role": "tool", "tool_call_id": str(item.get("call_id", "")),
                             "content": output if isinstance(output, str) else json.dumps(output)})
        else:
            raise _bad(f"input[{i}] has unsupported type {kind!r} (expected message, function_call or "
                       "function_call_output)", "input")
    chat: dict[str, Any] = {"model": body.get("model", ""), "messages": messages}
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    for key in ("temperature", "top_p"):
        if key in body:
            chat[key] = body[key]
    tools = [t for t in body.get("tools") or [] if isinstance(t, dict)]
    if any(t.get("type") != "function" for t in tools):
        raise _bad("only function tools are supported through the gateway (built-in tools such as web_search run "
                   "at OpenAI, not at an inference server)", "tools")
    if tools:
        chat["tools"] = [{"type": "function", "function": {"name": t.get("name", ""),
                                                           "description": t.get("description", ""),
                                                           "parameters": t.get("parameters", {})}} for t in tools]
    return chat


def _usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    usage = usage or {}
    inp, out = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": inp + out}


def _response(rid: str, model: str, output: list[dict[str, Any]], status: str,
              usage: dict[str, Any] | None) -> dict[str, Any]:
    return {"id": rid, "object": "response", "created_at": int(time.time()), "status": status, "model": model,
            "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": _usage(usage) if usage is not None else None, "error": None, "incomplete_details": None}


def _message_item(text: str) -> dict[str, Any]:
    return {"type": "message", "id": f"msg_{uuid.uuid4().hex[:24]}", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _call_item(call: dict[str, Any]) -> dict[str, Any]:
    fn = call.get("function") or {}
    return {"type": "function_call", "id": f"fc_{uuid.uuid4().hex[:24]}", "status": "completed",
            "call_id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}", "name": fn.get("name", ""),
            "arguments": fn.get("arguments") or "{}"}


def from_chat(completion: dict[str, Any], model: str) -> dict[str, Any]:
    """A ``response`` object for a chat completion."""
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    output: list[dict[str, Any]] = []
    if message.get("content") or not message.get("tool_calls"):
        output.append(_message_item(message.get("content") or ""))
    output += [_call_item(c) for c in message.get("tool_calls") or []]
    return _response(f"resp_{uuid.uuid4().hex[:24]}", model, output, "completed", completion.get("usage") or {})


async def stream_events(chunks: AsyncIterator[dict[str, Any]], model: str) -> AsyncIterator[bytes]:
    """The Responses stream events for a stream of chat-completion chunks."""
    seq = 0

    def event(name: str, **data: Any) -> bytes:
        nonlocal seq
        seq += 1
        return f"event: {name}\ndata: ".encode() + json.dumps({"type": name, "sequence_number": seq,
                                                               **data}).encode() + b"\n\n"

    rid = f"resp_{uuid.uuid4().hex[:24]}"
    yield event("response.created", response=_response(rid, model, [], "in_progress", None))
    message = _message_item("")
    message["status"] = "in_progress"
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] = {}
    opened = False
    async for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                if not opened:
                    opened = True
                    yield event("response.output_item.added", output_index=0,
                                item={**message, "content": []})
                    yield event("response.content_part.added", item_id=message["id"], output_index=0,
                                content_index=0, part={"type": "output_text", "text": "", "annotations": []})
                text.append(delta["content"])
                yield event("response.output_text.delta", item_id=message["id"], output_index=0, content_index=0,
                            delta=delta["content"], logprobs=[])
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(int(call.get("index", 0)), {"id": "", "function": {"name": "",
                                                                                           "arguments": ""}})
                slot["id"] = call.get("id") or slot["id"]
                fn = call.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
    output: list[dict[str, Any]] = []
    if opened:
        final = _message_item("".join(text))
        final["id"] = message["id"]
        yield event("response.output_text.done", item_id=message["id"], output_index=0, content_index=0,
                    text="".join(text), logprobs=[])
        yield event("response.content_part.done", item_id=message["id"], output_index=0, content_index=0,
                    part=final["content"][0])
        yield event("response.output_item.done", output_index=0, item=final)
        output.append(final)
    for i in sorted(calls):
        item = _call_item(calls[i])
        index = len(output)
        yield event("response.output_item.added", output_index=index, item={**item, "arguments": ""})
        yield event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                    arguments=item["arguments"])
        yield event("response.output_item.done", output_index=index, item=item)
        output.append(item)
    yield event("response.completed", response=_response(rid, model, output, "completed", usage))
