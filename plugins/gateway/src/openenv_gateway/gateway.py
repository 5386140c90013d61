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

The three model-call routes are served as plain ASGI (``openenv_gateway.asgi``) ahead of the Starlette
app that serves the rest: they are the per-call cost an agent pays, and the framework's request,
response, routing and middleware objects were most of it.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from openenv_gateway import anthropic, responses
from openenv_gateway.asgi import ClientGone, call_headers, dumps, read_body, send_error, send_json, send_stream
from openenv_gateway.errors import Dialect, GatewayError, error_response, stream_error_event
from openenv_gateway.mcptools import MCP_PATH, EpisodeToolsMCP
from openenv_gateway.serving import ThreadServer
from openenv_gateway.trace import EpisodeTrace, TraceError, Turn, link_turn
from openenv_gateway.upstream import StreamBroken, UpstreamClient, loads

#: The model-call routes (``POST`` only; any other method goes to Starlette, which answers 405).
_CALLS: dict[str, Dialect] = {"/v1/chat/completions": "chat", "/v1/responses": "responses",
                              "/v1/messages": "anthropic"}

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
        self.routes = Starlette(routes=[
            *(Route(path, self._wrong_method, methods=["POST"]) for path in _CALLS),  # 405 for other methods
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/v1/openenv/trace", self._own_trace, methods=["GET"]),
            Route("/v1/openenv/tools", self._tools, methods=["POST"]),
            Route(MCP_PATH, self._tools_mcp, methods=["GET", "POST", "DELETE"]),
        ], lifespan=self._lifespan)

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The gateway's ASGI app: the model calls served directly, everything else by ``self.routes``."""
        if scope["type"] == "http" and scope["method"] == "POST":
            dialect = _CALLS.get(scope["path"])
            if dialect is not None:
                try:
                    await self._handle(scope, receive, send, dialect)
                except ClientGone:
                    pass  # the agent hung up before its request arrived: no one to answer
                return
        await self.routes(scope, receive, send)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Any) -> AsyncIterator[None]:
        async with self._tools_mcp.lifespan(app):
            try:
                yield
            finally:
                # its connections belong to this loop: a restarted gateway makes a new client
                upstream, self._upstream = self._upstream, None
                if upstream is not None:
                    await upstream.aclose()

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
        self._upstream = None  # (closed by the server's lifespan; here in case it could not run)

    def __enter__(self) -> CaptureGateway:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- request plumbing ---------------------------------------------------------------------------

    def _client(self) -> UpstreamClient:
        # Built on the serving loop's thread: an aiohttp.ClientSession belongs to the loop that uses it.
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
        return self._episode_of(key)

    def _episode_of(self, key: str) -> _Episode:
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
        return _parse(await read_body(request.receive, request.headers.get("content-length"),
                                      self.limits.max_body_bytes))

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

    async def _handle(self, scope: Scope, receive: Receive, send: Send, dialect: Dialect) -> None:
        key, declared = call_headers(scope)
        try:
            episode = self._episode_of(key)
        except GatewayError as exc:
            return await send_error(send, dialect, exc)
        try:
            body = _parse(await read_body(receive, declared, self.limits.max_body_bytes))
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
            return await send_error(send, dialect, exc)
        model = str(body.get("model") or self.model or "")
        stream = bool(body.get("stream"))
        turn = Turn(index=-1, dialect=dialect, stream=stream)
        record = self._recorder(episode)
        upstream = self._client()
        if not stream:
            try:
                completion = await upstream.complete(turn, chat, record)
            except GatewayError as exc:
                return await send_error(send, dialect, exc)
            finally:
                self._release(episode)
            if dialect == "anthropic":
                completion = anthropic.from_chat(completion, model)
            elif dialect == "responses":
                completion = responses.from_chat(completion, model)
            return await send_json(send, dumps(completion))
        if dialect != "chat":
            chat = {**chat, "stream_options": {"include_usage": True}}
        try:
            chunks = await upstream.stream(turn, chat, record)
        except GatewayError as exc:
            self._release(episode)
            return await send_error(send, dialect, exc)
        await send_stream(send, receive, self._relay(episode, dialect, chunks, model))

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

    async def _wrong_method(self, request: Request) -> Response:  # pragma: no cover - app() serves POST
        raise AssertionError("a model call's POST is served by CaptureGateway.app")

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


def _parse(data: bytes) -> dict[str, Any]:
    try:
        body = loads(data)
    except ValueError as exc:
        raise GatewayError(400, "invalid_json", f"the request body is not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise GatewayError(400, "invalid_request", "the request body must be a JSON object")
    return body
