"""The one upstream call every dialect ends in: an OpenAI Chat Completions request to the inference
server, asking for token ids and logprobs, with what came back captured as a ``Turn``.

Fields the agent did not ask for (``prompt_token_ids``, ``token_ids``, logprobs it did not request)
are removed from what it receives, so the gateway is invisible to it.

The client is an ``aiohttp.ClientSession`` with keep-alive: per call it costs about a third of the
CPU that ``httpx.AsyncClient`` did (measured in ``bench.gateway``'s setting), which is most of the
gateway's added latency. Bodies are read and written as bytes with ``orjson``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from openenv_gateway.errors import GatewayError
from openenv_gateway.trace import TraceError, Turn

__all__ = ["StreamBroken", "UpstreamClient", "capture_chunk", "capture_completion", "loads", "upstream_body"]

#: Called with a finished turn (success or failure) so the episode records it.
Record = Callable[[Turn], None]


class StreamBroken(GatewayError):
    """The upstream failed after the stream to the agent had started (sent as an error event)."""


def loads(data: bytes) -> Any:
    """JSON from bytes: ``orjson`` (fast), else the standard library for what orjson refuses and it
    reads (``NaN``, integers over 64 bits), so no body is read differently than before."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def upstream_body(body: dict[str, Any], model: str | None) -> tuple[dict[str, Any], bool]:
    """The request to send upstream and whether the agent itself asked for logprobs."""
    up = dict(body)
    wants_logprobs = bool(body.get("logprobs"))
    up["return_token_ids"] = True  # vLLM: prompt_token_ids + choices[].token_ids
    up["logprobs"] = True
    if model:
        up["model"] = model
    return up, wants_logprobs


def _strip(payload: dict[str, Any], wants_logprobs: bool) -> dict[str, Any]:
    payload.pop("prompt_token_ids", None)
    for choice in payload.get("choices") or []:
        choice.pop("token_ids", None)
        choice.pop("prompt_token_ids", None)
        if not wants_logprobs and "logprobs" in choice:
            choice["logprobs"] = None
    return payload


def capture_completion(turn: Turn, payload: dict[str, Any]) -> None:
    """Fill ``turn`` from a non-streamed chat completion (engine ids, or ``ids_source="missing"``)."""
    choice = (payload.get("choices") or [{}])[0]
    prompt_ids, completion_ids = payload.get("prompt_token_ids"), choice.get("token_ids")
    content = ((choice.get("logprobs") or {}).get("content")) or []
    turn.logprobs = [float(e.get("logprob", 0.0)) for e in content]
    message = choice.get("message") or {}
    turn.text = message.get("content") or ""
    turn.tool_calls = list(message.get("tool_calls") or [])
    turn.finish_reason = choice.get("finish_reason")
    _set_ids(turn, prompt_ids, completion_ids)


def _set_ids(turn: Turn, prompt_ids: Any, completion_ids: Any) -> None:
    if isinstance(prompt_ids, list) and isinstance(completion_ids, list):
        turn.prompt_ids, turn.completion_ids = [int(i) for i in prompt_ids], [int(i) for i in completion_ids]
        if turn.logprobs and len(turn.logprobs) != len(turn.completion_ids):
            turn.error = TraceError("logprobs_mismatch", f"the engine returned {len(turn.logprobs)} logprobs for "
                                    f"{len(turn.completion_ids)} completion tokens", turn.dialect)
        return
    # Never re-tokenised: a sample built from our own tokenisation would not be what the model saw.
    turn.ids_source = "missing"
    turn.error = TraceError("ids_missing", "the inference server returned no token ids for this call (it ignored "
                            "return_token_ids): serve the model with vLLM >= 0.10.2 or another engine that returns "
                            "prompt_token_ids and choices[].token_ids; this turn cannot become a training sample",
                            turn.dialect)


async def _sse_data(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The payload of each ``data:`` line of an SSE body, as bytes (no text decoding: orjson reads bytes)."""
    buffer = b""
    async for part in response.content.iter_any():
        buffer += part
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.startswith(b"data:"):
                yield line[5:].strip()
    if buffer.startswith(b"data:"):
        yield buffer[5:].strip()


#: How long the rest of a stream's body (after ``[DONE]``: the end of the chunked encoding) may take
#: to arrive before the connection is given up instead of kept for the next call.
_DRAIN_S = 0.25


async def _drain(rest: AsyncIterator[bytes]) -> None:
    """Read what follows ``[DONE]`` so the connection goes back to the pool: a response closed
    unread costs a new TCP connection (and its set-up) on the next call. Bounded: an upstream that
    keeps the stream open after ``[DONE]`` loses the connection, never the agent's time."""
    try:
        async with asyncio.timeout(_DRAIN_S):
            async for _ in rest:
                pass
    except (TimeoutError, aiohttp.ClientError):
        pass


class _StreamState:
    def __init__(self) -> None:
        self.prompt_ids: list[int] | None = None
        self.completion_ids: list[int] | None = None
        self.text: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.logprobs: list[float] = []


def capture_chunk(state: _StreamState, chunk: dict[str, Any]) -> None:
    if isinstance(chunk.get("prompt_token_ids"), list):
        state.prompt_ids = chunk["prompt_token_ids"]
    for choice in chunk.get("choices") or []:
        if isinstance(choice.get("token_ids"), list):
            state.completion_ids = (state.completion_ids or []) + choice["token_ids"]
        for entry in ((choice.get("logprobs") or {}).get("content")) or []:
            state.logprobs.append(float(entry.get("logprob", 0.0)))
        delta = choice.get("delta") or {}
        if delta.get("content"):
            state.text.append(delta["content"])
        for call in delta.get("tool_calls") or []:
            slot = state.tool_calls.setdefault(int(call.get("index", 0)), {
                "id": "", "type": "function", "function": {"name": "", "arguments": ""}})
            if call.get("id"):
                slot["id"] = call["id"]
            fn = call.get("function") or {}
            slot["function"]["name"] += fn.get("name") or ""
            slot["function"]["arguments"] += fn.get("arguments") or ""
        if choice.get("finish_reason"):
            state.finish = choice["finish_reason"]


class UpstreamClient:
    """Chat-completion calls to the inference server, each captured into a ``Turn`` given to ``record``.

    Made (and ``aclose``-d) on the serving loop: an ``aiohttp.ClientSession`` belongs to the loop that
    made it. ``timeout_s`` bounds each wait for the server (its answer's headers, and each read of the
    body after them), ``connect_timeout_s`` the connection's set-up.
    """

    def __init__(self, base_url: str, *, model: str | None, api_key: str | None, timeout_s: float,
                 connect_timeout_s: float) -> None:
        self.url = base_url.rstrip("/") + "/v1/chat/completions"
        self.model = model
        self._headers = {"content-type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout_s = timeout_s
        # HTTP(S)_PROXY / NO_PROXY are read once, as httpx (the previous client) read them at its start
        self._proxy: URL | None = None
        self._proxy_auth: aiohttp.BasicAuth | None = None
        try:
            self._proxy, self._proxy_auth = get_env_proxy_for_url(URL(self.url))
        except LookupError:
            pass
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=256, keepalive_timeout=15.0),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout_s, sock_read=timeout_s))

    async def aclose(self) -> None:
        await self._session.close()

    @staticmethod
    def _failure(turn: Turn, record: Record, status: int, code: str, message: str) -> GatewayError:
        turn.error = TraceError(code, message, turn.dialect, status)
        record(turn)
        return GatewayError(status, code, message)

    async def _send(self, body: dict[str, Any]) -> aiohttp.ClientResponse:
        # The whole exchange up to the answer's headers is bounded too (a server that never reads
        # the request body would otherwise hold the call: sock_read only bounds reads).
        async with asyncio.timeout(self._timeout_s):
            return await self._session.post(self.url, data=orjson.dumps(body), headers=self._headers,
                                            proxy=self._proxy, proxy_auth=self._proxy_auth)

    async def _refused(self, turn: Turn, record: Record, response: aiohttp.ClientResponse) -> GatewayError:
        try:
            raw = await response.read()
        except (TimeoutError, aiohttp.ClientError):
            raw = b""
        finally:
            response.release()
        try:
            detail = json.loads(raw)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            detail = raw[:500].decode(errors="replace")
        # The agent's own mistakes (4xx) keep their status; an engine failure is a 502 to the agent, and
        # so is the engine refusing the gateway's credentials (401/403 would tell the agent its own
        # episode key is wrong, which it is not).
        status = response.status if 400 <= response.status < 500 else 502
        if status in (401, 403):
            status = 502
            detail = f"the inference server refused the gateway's upstream_api_key ({detail})"
        return self._failure(turn, record, status, "upstream_error",
                             f"the inference server answered {response.status}: {detail}")

    async def _open(self, turn: Turn, body: dict[str, Any], record: Record,
                    *, stream: bool) -> tuple[aiohttp.ClientResponse, bool, float]:
        """Send the call upstream; a transport failure or a non-200 answer raises ``GatewayError``."""
        up, wants_logprobs = upstream_body(body, self.model)
        up["stream"] = stream
        started = time.perf_counter()
        try:
            response = await self._send(up)
        except TimeoutError:  # aiohttp's connect and read timeouts are TimeoutErrors too
            raise self._failure(turn, record, 504, "upstream_timeout", "the inference server did not answer in "
                                "time") from None
        except aiohttp.ClientError as exc:
            raise self._failure(turn, record, 502, "upstream_unreachable",
                                f"cannot reach the inference server: {type(exc).__name__}: {exc}") from None
        if response.status != 200:
            raise await self._refused(turn, record, response)
        return response, wants_logprobs, started

    async def complete(self, turn: Turn, body: dict[str, Any], record: Record) -> dict[str, Any]:
        """A non-streamed call; returns the completion as the agent should see it."""
        response, wants_logprobs, started = await self._open(turn, body, record, stream=False)
        try:
            raw = await response.read()
        except (TimeoutError, aiohttp.ClientError) as exc:
            response.close()
            raise self._failure(turn, record, 502, "upstream_disconnected",
                                f"the inference server's answer broke off: {type(exc).__name__}: {exc}") from None
        response.release()
        try:
            payload = loads(raw)
            capture_completion(turn, payload)
        except (ValueError, AttributeError, TypeError, IndexError) as exc:
            raise self._failure(turn, record, 502, "upstream_bad_response",
                                f"the inference server sent a body that is not a chat completion: {exc}") from None
        turn.latency_s = time.perf_counter() - started
        record(turn)
        return _strip(payload, wants_logprobs)

    async def stream(self, turn: Turn, body: dict[str, Any], record: Record) -> AsyncIterator[dict[str, Any]]:
        """Open a streamed call (errors before the first chunk raise ``GatewayError``); iterate its chunks.

        A failure after that raises ``StreamBroken`` from the iterator; either way ``record`` gets the turn.
        """
        response, wants_logprobs, started = await self._open(turn, body, record, stream=True)
        return self._chunks(turn, response, wants_logprobs, record, started)

    async def _chunks(self, turn: Turn, response: aiohttp.ClientResponse, wants_logprobs: bool, record: Record,
                      started: float) -> AsyncIterator[dict[str, Any]]:
        state = _StreamState()
        done = False
        clean = False  # the body was read to its end: the connection may serve the next call
        lines = _sse_data(response)
        try:
            async for data in lines:
                if data == b"[DONE]":
                    done = True
                    break
                chunk = orjson.loads(data)
                if isinstance(chunk, dict) and chunk.get("error"):
                    message = str((chunk["error"] or {}).get("message", chunk["error"]))
                    raise self._broken(turn, state, record, "upstream_error",
                                       f"the inference server reported an error mid-stream: {message}")
                capture_chunk(state, chunk)
                yield _strip(chunk, wants_logprobs)
            if done:
                await _drain(lines)
            clean = response.content.at_eof()
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:  # orjson.JSONDecodeError is a ValueError
            raise self._broken(turn, state, record, "upstream_disconnected",
                               f"the inference server's stream broke: {type(exc).__name__}: {exc}") from None
        except (GeneratorExit, asyncio.CancelledError):
            # The agent hung up mid-stream: the turn is still recorded, with why it is incomplete.
            self._finish(turn, state)
            turn.error = TraceError("agent_disconnected", "the agent closed the stream before it ended",
                                    turn.dialect, 499)
            record(turn)
            raise
        finally:
            if clean:
                response.release()
            else:
                response.close()
        if not done:
            raise self._broken(turn, state, record, "upstream_disconnected",
                               "the inference server closed the stream before [DONE]")
        turn.latency_s = time.perf_counter() - started
        self._finish(turn, state)
        record(turn)

    @staticmethod
    def _finish(turn: Turn, state: _StreamState) -> None:
        turn.text = "".join(state.text)
        turn.tool_calls = [state.tool_calls[i] for i in sorted(state.tool_calls)]
        turn.finish_reason = state.finish
        turn.logprobs = state.logprobs
        completion = state.completion_ids
        if completion is None and state.prompt_ids is not None:
            completion = []  # the engine sent its prompt ids and no token yet (a stream cut short)
        _set_ids(turn, state.prompt_ids, completion)

    def _broken(self, turn: Turn, state: _StreamState, record: Record, code: str, message: str) -> StreamBroken:
        self._finish(turn, state)
        turn.error = TraceError(code, message, turn.dialect, 502)
        record(turn)
        return StreamBroken(502, code, message)
