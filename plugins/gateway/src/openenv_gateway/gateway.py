"""``CaptureGateway``: the LLM endpoint an agent talks to as if it were its provider.

Routes (every one needs a live episode's key, as ``Authorization: Bearer <key>`` or ``x-api-key``):

* ``POST /v1/chat/completions`` — OpenAI Chat Completions, forwarded as is (plus the id/logprob asks);
* ``POST /v1/responses`` — OpenAI Responses, translated to chat completions and back;
* ``POST /v1/messages`` — Anthropic Messages, translated to chat completions and back;
* ``GET /v1/models`` — the model name the agent should use;
* ``GET /v1/openenv/trace`` — this key's own trace so far (never another episode's);
* ``POST /v1/openenv/tools`` — the episode's env tools (``open_episode(tools=...)``) as JSON-RPC 2.0;
* ``/v1/openenv/mcp`` — the same tools as an MCP server (Streamable HTTP, the ``mcp`` SDK's server:
  ``openenv_gateway.mcptools``), for agents that take one.

Every model call becomes a ``Turn`` of the key's episode (see ``openenv_gateway.trace``). Bodies
are bounded, calls per episode are bounded (a flood gets the provider's 429 while the other
episodes go on), upstream calls have timeouts, and every failure is answered in the provider's own
error shape and recorded in the trace.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from openenv_gateway import anthropic, responses
from openenv_gateway.errors import Dialect, GatewayError, error_response, stream_error_event
from openenv_gateway.mcptools import MCP_PATH, EpisodeToolsMCP
from openenv_gateway.serving import ThreadServer
from openenv_gateway.trace import EpisodeTrace, TraceError, Turn, link_turn
from openenv_gateway.upstream import StreamBroken, UpstreamClient

__all__ = ["CaptureGateway", "GatewayLimits", "ToolHandler"]


@dataclass(frozen=True)
class GatewayLimits:
    """Bounds that keep one agent from taking the gateway (or its episode's record) down."""

    max_body_bytes: int = 8 * 1024 * 1024  # images travel inline as base64: room for a few
    max_concurrent_per_episode: int = 4
    upstream_timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    max_turns_per_episode: int = 10_000


#: An episode's tools: answers one JSON-RPC 2.0 request (MCP's ``tools/list`` / ``tools/call``), never raises.
ToolHandler = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class _Episode:
    key: str
    trace: EpisodeTrace
    live: bool = True
    inflight: int = 0
    max_turns: int | None = None  # this episode's own cap on model calls (below the gateway's limit)
    tools: ToolHandler | None = None  # the env's tools for the agent: a JSON-RPC request -> its response
    tool_busy: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class CaptureGateway:
    """The gateway: ``start()`` it, ``open_episode()`` per rollout, give the agent the key and URL,
    ``close_episode()`` to get the trace. ``model`` (if set) replaces the model name agents send."""

    def __init__(self, upstream_url: str, *, model: str | None = None, upstream_api_key: str | None = None,
                 limits: GatewayLimits | None = None) -> None:
        self.upstream_url, self.model, self.upstream_api_key = upstream_url, model, upstream_api_key
        self.limits = limits or GatewayLimits()
        self._episodes: dict[str, _Episode] = {}
        self._lock = threading.Lock()
        self._upstream: UpstreamClient | None = None
        self._serving: ThreadServer | None = None
        self.base_url = ""
        self._tools_mcp = EpisodeToolsMCP(self._episode, self._refusal,
                                          max_body_bytes=self.limits.max_body_bytes)
        self.app = Starlette(routes=[
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/responses", self._responses, methods=["POST"]),
            Route("/v1/messages", self._messages, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/v1/openenv/trace", self._own_trace, methods=["GET"]),
            Route("/v1/openenv/tools", self._tools, methods=["POST"]),
            Route(MCP_PATH, self._tools_mcp, methods=["GET", "POST", "DELETE"]),
        ], lifespan=self._tools_mcp.lifespan)

    # -- episodes -------------------------------------------------------------------------------

    def open_episode(self, episode_id: str, meta: dict[str, Any] | None = None, *,
                     max_turns: int | None = None, tools: ToolHandler | None = None) -> str:
        """A fresh key for ``episode_id``: the only credential that reads or writes its trace.
        ``max_turns``: the model calls this episode may make (more are refused with a 429 ``turn_limit``).
        ``tools``: what answers the agent's ``POST /v1/openenv/tools`` (JSON-RPC 2.0) under this key."""
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be at least 1 (or None for the gateway's limit), got {max_turns}")
        key = "oek-" + secrets.token_urlsafe(24)
        with self._lock:
            self._episodes[key] = _Episode(key, EpisodeTrace(episode_id, dict(meta or {})), max_turns=max_turns,
                                           tools=tools)
        return key

    def close_episode(self, key: str) -> EpisodeTrace:
        """End the episode of ``key`` (its key stops working) and return its trace."""
        with self._lock:
            episode = self._episodes.pop(key, None)
        if episode is None:
            raise KeyError("no live episode has this key (it was never opened, or was already closed)")
        with episode.lock:
            episode.live = False
            return episode.trace

    def trace(self, key: str) -> EpisodeTrace:
        """The live trace of ``key``'s episode (the same object ``close_episode`` will return)."""
        with self._lock:
            episode = self._episodes.get(key)
        if episode is None:
            raise KeyError("no live episode has this key")
        return episode.trace

    @staticmethod
    def _refusal(exc: Exception) -> Response:
        if isinstance(exc, GatewayError):
            return error_response("chat", exc)
        raise exc

    # -- serving ----------------------------------------------------------------------------------

    def start(self) -> str:
        """Serve on 127.0.0.1 (a free port) in a background thread; returns the base URL (no ``/v1``)."""
        self._serving = ThreadServer(self.app, lifespan="on")  # "on": the MCP tools route's session manager
        self.base_url = self._serving.start()
        return self.base_url

    def stop(self) -> None:
        if self._serving is not None:
            self._serving.stop()
            self._serving = None
        # its connections belonged to the stopped server's loop: a restarted gateway makes a new one
        self._upstream = None

    def __enter__(self) -> CaptureGateway:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- request plumbing ---------------------------------------------------------------------------

    def _client(self) -> UpstreamClient:
        # Built on the serving loop's thread: an httpx.AsyncClient belongs to the loop that uses it.
        if self._upstream is None:
            self._upstream = UpstreamClient(self.upstream_url, model=self.model, api_key=self.upstream_api_key,
                                            timeout_s=self.limits.upstream_timeout_s,
                                            connect_timeout_s=self.limits.connect_timeout_s)
        return self._upstream

    def _episode(self, request: Request) -> _Episode:
        key = request.headers.get("x-api-key", "")
        auth = request.headers.get("authorization", "")
        if not key and auth.lower().startswith("bearer "):
            key = auth[7:].strip()
        with self._lock:
            episode = self._episodes.get(key) if key else None
        if episode is None or not episode.live:
            raise GatewayError(401, "invalid_api_key", "this key belongs to no live episode: use the key that "
                               "open_episode() returned (OPENAI_API_KEY / ANTHROPIC_API_KEY), while the episode runs")
        return episode

    def _refuse(self, episode: _Episode, dialect: Dialect, exc: GatewayError) -> None:
        with episode.lock:
            if episode.live and len(episode.trace.errors) < self.limits.max_turns_per_episode:
                episode.trace.errors.append(TraceError(exc.code, exc.message, dialect, exc.status))

    async def _body(self, request: Request) -> dict[str, Any]:
        declared = request.headers.get("content-length")
        limit = self.limits.max_body_bytes
        too_big = GatewayError(413, "request_too_large", f"the request body is over the gateway's limit of {limit} "
                               "bytes: send smaller images or fewer messages")
        if declared and declared.isdigit() and int(declared) > limit:
            raise too_big
        data = bytearray()
        async for part in request.stream():
            data += part
            if len(data) > limit:
                raise too_big
        try:
            body = json.loads(data)
        except ValueError as exc:
            raise GatewayError(400, "invalid_json", f"the request body is not valid JSON ({exc})") from None
        if not isinstance(body, dict):
            raise GatewayError(400, "invalid_request", "the request body must be a JSON object")
        return body

    def _acquire(self, episode: _Episode) -> None:
        with episode.lock:
            if episode.inflight >= self.limits.max_concurrent_per_episode:
                raise GatewayError(429, "too_many_concurrent_requests", f"this episode already has "
                                   f"{episode.inflight} model calls in flight (limit "
                                   f"{self.limits.max_concurrent_per_episode}): wait for one to finish")
            cap = min(self.limits.max_turns_per_episode, episode.max_turns or self.limits.max_turns_per_episode)
            if len(episode.trace.turns) + episode.inflight >= cap:
                raise GatewayError(429, "turn_limit", f"this episode reached its limit of {cap} model calls")
            episode.inflight += 1

    def _release(self, episode: _Episode) -> None:
        with episode.lock:
            episode.inflight -= 1

    def _recorder(self, episode: _Episode) -> Any:
        def record(turn: Turn) -> None:
            with episode.lock:
                if episode.live:  # a call that outlived its episode cannot write into the closed trace
                    link_turn(episode.trace, turn)
        return record

    async def _handle(self, request: Request, dialect: Dialect) -> Response:
        try:
            episode = self._episode(request)
        except GatewayError as exc:
            return error_response(dialect, exc)
        try:
            body = await self._body(request)
            if dialect == "anthropic":
                chat = anthropic.to_chat(body)
            elif dialect == "responses":
                chat = responses.to_chat(body)
            else:
                chat = body
                if not isinstance(chat.get("messages"), list) or not chat["messages"]:
                    raise GatewayError(400, "invalid_request", "messages must be a non-empty list of "
                                       "{role, content} objects", "messages")
            self._acquire(episode)
        except GatewayError as exc:
            self._refuse(episode, dialect, exc)
            return error_response(dialect, exc)
        model = str(body.get("model") or self.model or "")
        stream = bool(body.get("stream"))
        turn = Turn(index=-1, dialect=dialect, stream=stream)
        record = self._recorder(episode)
        upstream = self._client()
        if not stream:
            try:
                completion = await upstream.complete(turn, chat, record)
            except GatewayError as exc:
                return error_response(dialect, exc)
            finally:
                self._release(episode)
            if dialect == "anthropic":
                return JSONResponse(anthropic.from_chat(completion, model))
            if dialect == "responses":
                return JSONResponse(responses.from_chat(completion, model))
            return JSONResponse(completion)
        if dialect != "chat":
            chat = {**chat, "stream_options": {"include_usage": True}}
        try:
            chunks = await upstream.stream(turn, chat, record)
        except GatewayError as exc:
            self._release(episode)
            return error_response(dialect, exc)
        return StreamingResponse(self._relay(episode, dialect, chunks, model), media_type="text/event-stream")

    async def _relay(self, episode: _Episode, dialect: Dialect, chunks: AsyncIterator[dict[str, Any]],
                     model: str) -> AsyncIterator[bytes]:
        try:
            if dialect == "anthropic":
                async for event in anthropic.stream_events(chunks, model):
                    yield event
            elif dialect == "responses":
                async for event in responses.stream_events(chunks, model):
                    yield event
            else:
                async for chunk in chunks:
                    yield b"data: " + orjson.dumps(chunk) + b"\n\n"
                yield b"data: [DONE]\n\n"
        except StreamBroken as exc:
            # Headers are sent: the provider's in-stream error is the only way left to tell the agent.
            yield stream_error_event(dialect, exc.status, exc.code, exc.message)
        finally:
            self._release(episode)

    async def _chat(self, request: Request) -> Response:
        return await self._handle(request, "chat")

    async def _responses(self, request: Request) -> Response:
        return await self._handle(request, "responses")

    async def _messages(self, request: Request) -> Response:
        return await self._handle(request, "anthropic")

    async def _models(self, request: Request) -> Response:
        try:
            self._episode(request)
        except GatewayError as exc:
            return error_response("chat", exc)
        name = self.model or "openenv-gateway"
        return JSONResponse({"object": "list", "data": [{"id": name, "object": "model", "owned_by": "openenv"}]})

    async def _own_trace(self, request: Request) -> Response:
        try:
            episode = self._episode(request)
        except GatewayError as exc:
            return error_response("chat", exc)
        with episode.lock:
            return JSONResponse(episode.trace.to_dict())

    async def _tools(self, request: Request) -> Response:
        """The episode's tools as JSON-RPC 2.0 (MCP's ``tools/list`` and ``tools/call`` methods), one call
        at a time per episode (an env session is not built for concurrent steps)."""
        try:
            episode = self._episode(request)
            if episode.tools is None:
                raise GatewayError(404, "no_tools", "this episode has no tools: the harness opened it without "
                                   "any (CommandHarness.run(tools=...), e.g. a CLIHarnessAdapter session's bridge)")
            body = await self._body(request)
            with episode.lock:
                if episode.tool_busy:
                    raise GatewayError(429, "tool_call_in_flight", "this episode already has a tool call in "
                                       "flight: wait for its answer before sending the next")
                episode.tool_busy = True
        except GatewayError as exc:
            return error_response("chat", exc)
        handler = episode.tools
        try:
            reply = await anyio.to_thread.run_sync(handler, body)
        finally:
            with episode.lock:
                episode.tool_busy = False
        return JSONResponse(reply)
