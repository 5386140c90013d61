"""A scripted OpenAI-compatible upstream with a byte-level "tokenizer", for tests that need no model.

Its ids are real in the sense that matters to the gateway: the prompt is rendered as ChatML text
and tokenised as its UTF-8 bytes (``<|im_end|>`` is id 256, ``<|im_start|>`` 257), and an answer's
ids are the bytes of its text plus 256, so re-rendering a conversation reproduces earlier ids
exactly. The model name picks a behaviour:

* any name: answer ``"ok <number of messages>"``; ``tool``: call the first tool (its required string
  arguments set to ``"ok"``, else ``{"n": <number of messages>}``) unless the last message is a
  tool result, which it answers with text;
* ``no-ids``: answer without ``prompt_token_ids``/``token_ids`` (an engine without vLLM's extension);
* ``fail``: a 500; ``reject``: a 400 with an OpenAI error body; ``unauthorized``: a 401 (a wrong
  upstream key);
* ``break-stream``: a stream that stops after two chunks without ``[DONE]`` (the connection drops);
* ``slow``: answer after ``slow_s`` seconds (a flood test keeps calls in flight).

It is also the fast upstream of the benchmark's latency row (no model compute to drown the overhead).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["IM_END", "IM_START", "build_scripted_app", "main", "render_ids"]

IM_END, IM_START = 256, 257


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return str(content or "")


def render_ids(messages: list[dict[str, Any]]) -> list[int]:
    """ChatML as bytes: ``<|im_start|>role\\ncontent[tool calls]<|im_end|>\\n`` …, then the assistant prompt."""
    ids: list[int] = []
    for m in messages:
        body = _text(m.get("content"))
        for call in m.get("tool_calls") or []:
            body += json.dumps({"name": call["function"]["name"], "arguments": call["function"]["arguments"]})
        ids += [IM_START, *f"{m.get('role', 'user')}\n{body}".encode(), IM_END, *b"\n"]
    return ids + [IM_START, *b"assistant\n"]


def build_scripted_app(slow_s: float = 1.0) -> Starlette:
    async def chat(request: Request) -> Response:
        body = json.loads(await request.body())
        model = str(body.get("model", ""))
        if model == "fail":
            return JSONResponse({"error": {"message": "engine crashed", "type": "InternalServerError",
                                           "code": 500}}, status_code=500)
        if model == "reject":
            return JSONResponse({"error": {"message": "max_tokens is too large", "type": "BadRequestError",
                                           "param": "max_tokens", "code": 400}}, status_code=400)
        if model == "unauthorized":
            return JSONResponse({"error": {"message": "invalid api key", "type": "AuthenticationError",
                                           "code": 401}}, status_code=401)
        if model == "slow":
            await asyncio.sleep(slow_s)
        messages = body["messages"]
        prompt = render_ids(messages)
        calls: list[dict[str, Any]] = []
        text = f"ok {len(messages)}"
        if model == "tool" and body.get("tools") and messages[-1].get("role") != "tool":
            function = body["tools"][0]["function"]
            schema = function.get("parameters") or {}
            args: dict[str, Any] = {p: "ok" for p in schema.get("required", [])
                                    if (schema.get("properties") or {}).get(p, {}).get("type") == "string"}
            args = args or {"n": len(messages)}
            calls = [{"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                      "function": {"name": function["name"], "arguments": json.dumps(args)}}]
            text = ""
        completion = [*text.encode(), *(json.dumps({"name": calls[0]["function"]["name"],
                                                    "arguments": calls[0]["function"]["arguments"]}).encode()
                                        if calls else b""), IM_END]
        ids = model != "no-ids" and bool(body.get("return_token_ids"))
        logprobs = [-0.5] * len(completion)
        finish = "tool_calls" if calls else "stop"
        usage = {"prompt_tokens": len(prompt), "completion_tokens": len(completion),
                 "total_tokens": len(prompt) + len(completion)}
        cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
        if body.get("stream"):
            return StreamingResponse(_stream(cid, model, prompt, completion, text, calls, finish, ids, usage,
                                             bool(body.get("logprobs"))), media_type="text/event-stream")
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = calls
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [{"token": chr(i) if i < 256 else "<|im_end|>", "logprob": lp,
                                               "bytes": None, "top_logprobs": []}
                                              for i, lp in zip(completion, logprobs, strict=True)]}
        payload: dict[str, Any] = {"id": cid, "object": "chat.completion", "created": int(time.time()),
                                   "model": model, "choices": [choice], "usage": usage}
        if ids:
            payload["prompt_token_ids"], choice["token_ids"] = prompt, completion
        return JSONResponse(payload)

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


async def _stream(cid: str, model: str, prompt: list[int], completion: list[int], text: str,
                  calls: list[dict[str, Any]], finish: str, ids: bool, usage: dict[str, int],
                  logprobs: bool) -> AsyncIterator[bytes]:
    def chunk(choice: dict[str, Any], **top: Any) -> bytes:
        payload = {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model,
                   "choices": [{"index": 0, "logprobs": None, "finish_reason": None, **choice}], **top}
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    yield chunk({"delta": {"role": "assistant", "content": ""}}, **({"prompt_token_ids": prompt} if ids else {}))
    # one chunk per completion token (the text's bytes; a tool call's arguments as one delta)
    pieces: list[tuple[dict[str, Any], list[int]]] = []
    if calls:
        pieces.append(({"tool_calls": [{"index": 0, "id": calls[0]["id"], "type": "function",
                                        "function": calls[0]["function"]}]}, completion[:-1]))
    else:
        pieces += [({"content": chr(b)}, [b]) for b in completion[:-1]]
    pieces.append(({"content": ""}, [IM_END]))
    for n, (delta, toks) in enumerate(pieces):
        if model == "break-stream" and n == 2:
            raise ConnectionAbortedError("scripted upstream drops the connection mid-stream")
        extra: dict[str, Any] = {}
        if ids:
            extra["token_ids"] = toks
        if logprobs:
            extra["logprobs"] = {"content": [{"token": "", "logprob": -0.5, "bytes": None, "top_logprobs": []}
                                             for _ in toks]}
        yield chunk({"delta": delta, **extra})
    yield chunk({"delta": {}, "finish_reason": finish})
    yield b"data: " + json.dumps({"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model,
                                  "choices": [], "usage": usage}).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def main(argv: list[str] | None = None) -> None:
    """Serve the scripted upstream on 127.0.0.1 in this process; print ``READY <base url>``."""
    import argparse
    import socket

    import uvicorn

    parser = argparse.ArgumentParser(description="The gateway's scripted OpenAI-compatible upstream.")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(1024)
    print(f"READY http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(build_scripted_app(), log_level="warning", lifespan="off")).run(sockets=[sock])


if __name__ == "__main__":
    main()
