"""A real OpenAI-compatible inference server for tests: a tiny transformers model, no download.

It speaks the parts of vLLM's OpenAI server that a capture gateway relies on, as vLLM documents them:

* ``POST /v1/chat/completions`` (streaming and not): ``return_token_ids: true`` adds the top-level
  ``prompt_token_ids`` and each choice's ``token_ids`` (in a stream: ``prompt_token_ids`` on the first
  chunk, each chunk's choice carries the ids of the tokens it adds); ``logprobs`` / ``top_logprobs``
  give ``choices[].logprobs.content[]`` entries of ``{token, logprob, bytes, top_logprobs}``.
* ``POST /v1/completions`` (not streaming): ``prompt`` as text or token ids, ``logprobs: k`` in the
  legacy shape, ``prompt_token_ids``/``token_ids`` on the choice with ``return_token_ids``.
* ``GET /v1/models``, ``GET /health``.

Sampling is greedy (``temperature: 0``, the default here) or seeded (``seed``); ``max_tokens`` is
capped by ``--max-tokens-cap``. The stop token ``<|im_end|>`` ends a completion and, as in vLLM, is
part of ``token_ids`` and of the logprobs but not of the text. ``--no-token-ids`` makes it an engine
that cannot return ids (it ignores ``return_token_ids``), and ``--token-delay-s`` slows each sampled
token so a test can kill the server mid-stream.

Run it: ``python -m openenv_gateway.testing.model_server --port 0`` prints ``READY http://127.0.0.1:PORT``.
Needs ``openenvkit-gateway[testmodel]`` (torch, transformers, tokenizers).
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["MODEL_NAME", "Engine", "Sampled", "build_app", "main"]

MODEL_NAME = "openenv-tiny"
_TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)


@dataclass
class Sampled:
    """One sampled token: its id, its logprob under the model, the top-k alternatives."""

    token_id: int
    logprob: float
    top: list[tuple[int, float]] = field(default_factory=list)


class Engine:
    """Greedy/seeded decoding with a KV cache, one request at a time (a lock: the model is shared)."""

    def __init__(self, tokenizer: Any, model: Any, *, max_tokens_cap: int = 64, token_delay_s: float = 0.0) -> None:
        self.tokenizer, self.model = tokenizer, model
        self.max_tokens_cap, self.token_delay_s = max_tokens_cap, token_delay_s
        self.eos_id: int = tokenizer.eos_token_id
        self._lock = threading.Lock()

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=True,
                                                 tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # newer transformers return a BatchEncoding
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    def token_text(self, token_id: int) -> str:
        return str(self.tokenizer.decode([token_id]))

    def text(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=True))

    def generate(self, prompt_ids: list[int], *, max_tokens: int, temperature: float, seed: int | None,
                 top_k: int) -> Iterator[Sampled]:
        """Yield sampled tokens until the stop token (yielded too) or ``max_tokens``."""
        import torch

        with self._lock, torch.no_grad():
            generator = torch.Generator().manual_seed(seed if seed is not None else 0)
            past: Any = None
            step_ids = prompt_ids
            for _ in range(max_tokens):
                out = self.model(input_ids=torch.tensor([step_ids]), past_key_values=past, use_cache=True)
                past = out.past_key_values
                logits = out.logits[0, -1].float()
                logprobs = torch.log_softmax(logits, dim=-1)
                if temperature <= 0:
                    token = int(torch.argmax(logits))
                else:
                    probs = torch.softmax(logits / temperature, dim=-1)
                    token = int(torch.multinomial(probs, 1, generator=generator))
                top: list[tuple[int, float]] = []
                if top_k > 0:
                    values, indices = torch.topk(logprobs, top_k)
                    top = [(int(i), float(v)) for i, v in zip(indices, values, strict=True)]
                if self.token_delay_s:
                    time.sleep(self.token_delay_s)
                yield Sampled(token, float(logprobs[token]), top)
                if token == self.eos_id:
                    return
                step_ids = [token]


def _error(status: int, message: str, param: str | None = None) -> JSONResponse:
    kind = {400: "BadRequestError", 404: "NotFoundError"}.get(status, "InternalServerError")
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": status}},
                        status_code=status)


class _BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def _sampling(body: dict[str, Any], engine: Engine) -> tuple[int, float, int | None]:
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is None:
        max_tokens = engine.max_tokens_cap
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise _BadRequest(f"max_tokens must be a positive integer, got {max_tokens!r}", "max_tokens")
    temperature = body.get("temperature", 0.0)
    if temperature is None:
        temperature = 0.0
    if not isinstance(temperature, int | float) or temperature < 0:
        raise _BadRequest(f"temperature must be a number >= 0, got {temperature!r}", "temperature")
    seed = body.get("seed")
    if seed is not None and not isinstance(seed, int):
        raise _BadRequest(f"seed must be an integer, got {seed!r}", "seed")
    if body.get("n", 1) != 1:
        raise _BadRequest("this test server samples one choice per request: send n=1", "n")
    return min(max_tokens, engine.max_tokens_cap), float(temperature), seed


def _top_k(body: dict[str, Any]) -> tuple[bool, int]:
    want = bool(body.get("logprobs"))
    k = body.get("top_logprobs") or 0
    if not isinstance(k, int) or not 0 <= k <= 20:
        raise _BadRequest(f"top_logprobs must be an integer from 0 to 20, got {k!r}", "top_logprobs")
    return want, k


def _content_messages(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise _BadRequest("messages must be a non-empty list of {role, content} objects", "messages")
    rendered: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise _BadRequest(f"messages[{i}] must be an object with a role", "messages")
        content = message.get("content")
        if isinstance(content, list):  # content parts: the tiny model reads the text parts only
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        rendered.append({**message, "content": content if content is not None else ""})
    return rendered


def _logprob_entry(engine: Engine, token_id: int, logprob: float) -> dict[str, Any]:
    text = engine.token_text(token_id)
    return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}


def _chat_logprobs(engine: Engine, steps: list[Sampled]) -> dict[str, Any]:
    return {"content": [{**_logprob_entry(engine, s.token_id, s.logprob),
                         "top_logprobs": [_logprob_entry(engine, i, lp) for i, lp in s.top]} for s in steps]}


def _tool_calls(raw_text: str) -> list[dict[str, Any]]:
    calls = []
    for match in _TOOL_CALL.finditer(raw_text):
        try:
            call = json.loads(match.group(1))
            calls.append({"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                          "function": {"name": str(call["name"]), "arguments": json.dumps(call.get("arguments", {}))}})
        except (ValueError, KeyError, TypeError):
            continue  # not a well-formed call: it stays in the text, as a tool parser leaves it
    return calls


def build_app(engine: Engine, *, token_ids: bool = True) -> Starlette:
    """The server's routes over ``engine``; ``token_ids=False`` ignores ``return_token_ids``."""

    async def models(_: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "owned_by": "openenv"}]})

    async def health(_: Request) -> Response:
        return Response(status_code=200)

    async def _body(request: Request) -> dict[str, Any]:
        try:
            body = json.loads(await request.body())
        except ValueError as exc:
            raise _BadRequest(f"the body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise _BadRequest("the body must be a JSON object")
        return body

    async def chat(request: Request) -> Response:
        try:
            body = await _body(request)
            messages = _content_messages(body.get("messages"))
            max_tokens, temperature, seed = _sampling(body, engine)
            want_logprobs, k = _top_k(body)
            prompt_ids = engine.render(messages, body.get("tools"))
        except _BadRequest as exc:
            return _error(400, str(exc), exc.param)
        except Exception as exc:  # a template that cannot render these messages
            return _error(400, f"cannot render the messages with the chat template: {exc}", "messages")
        return_ids = token_ids and bool(body.get("return_token_ids"))
        cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        steps_iter = engine.generate(prompt_ids, max_tokens=max_tokens, temperature=temperature, seed=seed, top_k=k)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(_chat_stream(engine, steps_iter, cid, created, prompt_ids, return_ids,
                                                  want_logprobs, include_usage, max_tokens),
                                     media_type="text/event-stream")
        import anyio

        steps = await anyio.to_thread.run_sync(lambda: list(steps_iter))
        ids = [s.token_id for s in steps]
        raw = str(engine.tokenizer.decode(ids, skip_special_tokens=False))
        calls = _tool_calls(raw) if body.get("tools") else []
        text = engine.text(ids)
        if calls:
            text = _TOOL_CALL.sub("", engine.text(ids)).strip()
        finish = "tool_calls" if calls else ("stop" if ids and ids[-1] == engine.eos_id else "length")
        message: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
        if calls:
            message["tool_calls"] = calls
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish,
                                  "logprobs": _chat_logprobs(engine, steps) if want_logprobs else None}
        payload: dict[str, Any] = {"id": cid, "object": "chat.completion", "created": created, "model": MODEL_NAME,
                                   "choices": [choice],
                                   "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(ids),
                                             "total_tokens": len(prompt_ids) + len(ids)}}
        if return_ids:
            payload["prompt_token_ids"] = prompt_ids
            choice["token_ids"] = ids
        return JSONResponse(payload)

    async def completions(request: Request) -> Response:
        try:
            body = await _body(request)
            if body.get("stream"):
                raise _BadRequest("this test server does not stream /v1/completions: use /v1/chat/completions "
                                  "for streaming", "stream")
            max_tokens, temperature, seed = _sampling(body, engine)
            prompt = body.get("prompt")
            if isinstance(prompt, str):
                prompt_ids = [int(i) for i in engine.tokenizer(prompt)["input_ids"]]
            elif isinstance(prompt, list) and prompt and all(isinstance(i, int) for i in prompt):
                prompt_ids = list(prompt)
            else:
                raise _BadRequest("prompt must be a string or a non-empty list of token ids", "prompt")
            k = body.get("logprobs")
            if k is not None and (not isinstance(k, int) or not 0 <= k <= 20):
                raise _BadRequest(f"logprobs must be an integer from 0 to 20, got {k!r}", "logprobs")
        except _BadRequest as exc:
            return _error(400, str(exc), exc.param)
        import anyio

        steps = await anyio.to_thread.run_sync(lambda: list(engine.generate(
            prompt_ids, max_tokens=max_tokens, temperature=temperature, seed=seed, top_k=k or 0)))
        ids = [s.token_id for s in steps]
        choice: dict[str, Any] = {"index": 0, "text": engine.text(ids),
                                  "finish_reason": "stop" if ids and ids[-1] == engine.eos_id else "length",
                                  "logprobs": None}
        if k is not None:
            choice["logprobs"] = {"tokens": [engine.token_text(i) for i in ids],
                                  "token_logprobs": [s.logprob for s in steps],
                                  "top_logprobs": [{engine.token_text(i): lp for i, lp in s.top} for s in steps],
                                  "text_offset": []}
        if token_ids and body.get("return_token_ids"):
            choice["prompt_token_ids"], choice["token_ids"] = prompt_ids, ids
        return JSONResponse({"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion",
                             "created": int(time.time()), "model": MODEL_NAME, "choices": [choice],
                             "usage": {"prompt_tokens": len(prompt_ids), "completion_tokens": len(ids),
                                       "total_tokens": len(prompt_ids) + len(ids)}})

    return Starlette(routes=[Route("/v1/models", models), Route("/health", health),
                             Route("/v1/chat/completions", chat, methods=["POST"]),
                             Route("/v1/completions", completions, methods=["POST"])])


async def _chat_stream(engine: Engine, steps: Iterator[Sampled], cid: str, created: int, prompt_ids: list[int],
                       return_ids: bool, want_logprobs: bool, include_usage: bool,
                       max_tokens: int) -> AsyncIterator[bytes]:
    import anyio

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        top = {k: v for k, v in extra.items() if k == "prompt_token_ids"}
        choice.update({k: v for k, v in extra.items() if k != "prompt_token_ids"})
        payload = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL_NAME,
                   "choices": [choice], **top}
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    first: dict[str, Any] = {"prompt_token_ids": prompt_ids} if return_ids else {}
    yield chunk({"role": "assistant", "content": ""}, None, **first)
    count, last = 0, -1
    done = object()
    ids: list[int] = []
    sent = ""
    while True:
        step = await anyio.to_thread.run_sync(lambda: next(steps, done))
        if step is done:
            break
        assert isinstance(step, Sampled)
        count, last = count + 1, step.token_id
        ids.append(step.token_id)
        # Incremental detokenisation, as vLLM does: a token that ends inside a UTF-8 character sends no
        # text until the character is complete, so the streamed text equals the non-streamed text.
        full = engine.text(ids)
        text = ""
        if not full.endswith("\ufffd") or step.token_id == engine.eos_id:
            text, sent = full[len(sent):], full
        extra: dict[str, Any] = {}
        if want_logprobs:
            extra["logprobs"] = _chat_logprobs(engine, [step])
        if return_ids:
            extra["token_ids"] = [step.token_id]
        yield chunk({"content": text}, **extra)
    rest = engine.text(ids)[len(sent):]
    if rest:  # trailing bytes that never became a whole character: sent as the decoder renders them
        yield chunk({"content": rest})
    yield chunk({}, "stop" if last == engine.eos_id else "length")
    if include_usage:
        usage = {"prompt_tokens": len(prompt_ids), "completion_tokens": count,
                 "total_tokens": len(prompt_ids) + count}
        payload = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL_NAME,
                   "choices": [], "usage": usage}
        yield b"data: " + json.dumps(payload).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def main(argv: list[str] | None = None) -> None:
    """Build the tiny model and serve it on 127.0.0.1; print ``READY <base url>`` once listening."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--max-tokens-cap", type=int, default=64)
    parser.add_argument("--token-delay-s", type=float, default=0.0)
    parser.add_argument("--no-token-ids", action="store_true", help="behave as an engine without return_token_ids")
    args = parser.parse_args(argv)

    import uvicorn

    from openenv_gateway.testing.tinymodel import build_model, build_tokenizer

    tokenizer = build_tokenizer()
    engine = Engine(tokenizer, build_model(tokenizer, seed=args.seed), max_tokens_cap=args.max_tokens_cap,
                    token_delay_s=args.token_delay_s)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))  # loopback only: a test server is never reachable from outside
    sock.listen(128)  # listening before READY is printed: a client connecting at once is queued, not refused
    port = sock.getsockname()[1]
    config = uvicorn.Config(build_app(engine, token_ids=not args.no_token_ids), log_level="warning",
                            lifespan="off")
    server = uvicorn.Server(config)
    print(f"READY http://127.0.0.1:{port}", flush=True)
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
