"""Anthropic Messages (``POST /v1/messages``) in front of a Chat Completions engine.

Requests become chat completions (system → a system message; text, image, ``tool_use`` and
``tool_result`` blocks → content parts, assistant ``tool_calls`` and ``tool`` messages; tools'
``input_schema`` → ``parameters``), answers become Messages (``text`` / ``tool_use`` blocks,
``stop_reason``), and a stream becomes Anthropic's event sequence (``message_start``,
``content_block_start/delta/stop``, ``message_delta``, ``message_stop``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from openenv_gateway.errors import GatewayError

__all__ = ["from_chat", "stream_events", "to_chat"]

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", None: "end_turn"}


def _bad(message: str, param: str | None = None) -> GatewayError:
    return GatewayError(400, "invalid_request", message, param)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _image_part(block: dict[str, Any]) -> dict[str, Any]:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    else:
        url = str(source.get("url", ""))
    return {"type": "image_url", "image_url": {"url": url}}


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions request for an Anthropic Messages request (``GatewayError`` 400 if malformed)."""
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise _bad("max_tokens is required and must be a positive integer", "max_tokens")
    messages_in = body.get("messages")
    if not isinstance(messages_in, list) or not messages_in:
        raise _bad("messages must be a non-empty list of {role, content}", "messages")
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        out.append({"role": "system", "content": _text_of(system)})
    for i, message in enumerate(messages_in):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise _bad(f"messages[{i}].role must be 'user' or 'assistant'", "messages")
        content = message.get("content")
        if isinstance(content, str):
            out.append({"role": message["role"], "content": content})
            continue
        if not isinstance(content, list):
            raise _bad(f"messages[{i}].content must be a string or a list of blocks", "messages")
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                parts.append({"type": "text", "text": str(block.get("text", ""))})
            elif kind == "image":
                parts.append(_image_part(block))
            elif kind == "tool_use":
                calls.append({"id": str(block.get("id", "")), "type": "function",
                              "function": {"name": str(block.get("name", "")),
                                           "arguments": json.dumps(block.get("input", {}))}})
            elif kind == "tool_result":
                out.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id", "")),
                            "content": _text_of(block.get("content", ""))})
            else:
                raise _bad(f"messages[{i}] has a content block of unknown type {kind!r} (expected text, image, "
                           "tool_use or tool_result)", "messages")
        if message["role"] == "assistant":
            text = "".join(p.get("text", "") for p in parts if p["type"] == "text")
            entry: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
        elif parts:
            # text-only content stays a string: chat templates render strings, not part lists
            only_text = all(p["type"] == "text" for p in parts)
            out.append({"role": "user", "content": "".join(p["text"] for p in parts) if only_text else parts})
    chat: dict[str, Any] = {"model": body.get("model", ""), "messages": out, "max_tokens": max_tokens}
    for key in ("temperature", "top_p"):
        if key in body:
            chat[key] = body[key]
    if body.get("stop_sequences"):
        chat["stop"] = body["stop_sequences"]
    tools = body.get("tools")
    if tools:
        chat["tools"] = [{"type": "function", "function": {"name": t.get("name", ""),
                                                           "description": t.get("description", ""),
                                                           "parameters": t.get("input_schema", {})}}
                         for t in tools if isinstance(t, dict)]
    return chat


def _usage(completion: dict[str, Any]) -> dict[str, int]:
    usage = completion.get("usage") or {}
    return {"input_tokens": int(usage.get("prompt_tokens", 0)), "output_tokens": int(usage.get("completion_tokens", 0))}


def from_chat(completion: dict[str, Any], model: str) -> dict[str, Any]:
    """An Anthropic ``message`` object for a chat completion."""
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        try:
            arguments = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            arguments = {"_raw": fn.get("arguments")}
        content.append({"type": "tool_use", "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:20]}",
                        "name": fn.get("name", ""), "input": arguments})
    return {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": _STOP.get(choice.get("finish_reason"), "end_turn"),
            "stop_sequence": None, "usage": _usage(completion)}


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: ".encode() + json.dumps({"type": name, **data}).encode() + b"\n\n"


async def stream_events(chunks: AsyncIterator[dict[str, Any]], model: str) -> AsyncIterator[bytes]:
    """Anthropic's stream events for a stream of chat-completion chunks (text and tool calls)."""
    message: dict[str, Any] = {"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message", "role": "assistant",
                               "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 0, "output_tokens": 0}}
    yield _event("message_start", {"message": message})
    block = -1
    text_open = False
    tool_blocks: dict[int, int] = {}
    finish: str | None = None
    output_tokens = 0
    async for chunk in chunks:
        if chunk.get("usage"):
            output_tokens = int(chunk["usage"].get("completion_tokens", output_tokens))
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                if not text_open:
                    block += 1
                    text_open = True
                    yield _event("content_block_start", {"index": block, "content_block": {"type": "text", "text": ""}})
                yield _event("content_block_delta", {"index": block,
                                                     "delta": {"type": "text_delta", "text": delta["content"]}})
            for call in delta.get("tool_calls") or []:
                i = int(call.get("index", 0))
                fn = call.get("function") or {}
                if i not in tool_blocks:
                    if text_open:
                        yield _event("content_block_stop", {"index": block})
                        text_open = False
                    elif tool_blocks:
                        yield _event("content_block_stop", {"index": block})
                    block += 1
                    tool_blocks[i] = block
                    yield _event("content_block_start", {"index": block, "content_block": {
                        "type": "tool_use", "id": call.get("id") or f"toolu_{uuid.uuid4().hex[:20]}",
                        "name": fn.get("name", ""), "input": {}}})
                if fn.get("arguments"):
                    yield _event("content_block_delta", {"index": tool_blocks[i], "delta": {
                        "type": "input_json_delta", "partial_json": fn["arguments"]}})
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
    if text_open or tool_blocks:
        yield _event("content_block_stop", {"index": block})
    yield _event("message_delta", {"delta": {"stop_reason": _STOP.get(finish, "end_turn"), "stop_sequence": None},
                                   "usage": {"output_tokens": output_tokens}})
    yield _event("message_stop", {})
