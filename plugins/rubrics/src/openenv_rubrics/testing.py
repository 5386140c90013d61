"""A local OpenAI-compatible chat-completions server, for tests and benchmarks of the LLM judge.

It is a real HTTP server (stdlib, one thread per connection) bound to 127.0.0.1 on a free port
that answers ``/v1/chat/completions`` as JSON, or as server-sent events when the request asks
for ``"stream": true`` (as agent frameworks' clients do);
``reply`` decides each answer from the request body and the request's number, so a test can
script good answers, garbage, "8/10", slow answers and 5xx. It records every request body and the
highest number of requests in flight at once.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeChatServer", "Reply", "judge_reply"]


@dataclass
class Reply:
    """One scripted answer: HTTP ``status``, the assistant ``content`` (or a raw ``body``), a delay."""

    content: str | None = None
    status: int = 200
    delay: float = 0.0
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


def judge_reply(score: float, rationale: str = "scripted") -> Reply:
    """A well-formed judge answer."""
    return Reply(json.dumps({"score": score, "rationale": rationale}))


def _completion(model: str, content: str) -> str:
    return json.dumps({
        "id": "chatcmpl-local", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    })


def _stream(model: str, content: str) -> str:
    """The same answer as server-sent events (``"stream": true``): the content, the finish, ``[DONE]``."""
    base = {"id": "chatcmpl-local", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    chunks = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}},
    ]
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"


class FakeChatServer:
    """``with FakeChatServer(reply) as server: LLMJudge(base_url=server.url, model="m")``."""

    def __init__(self, reply: Callable[[dict[str, Any], int], Reply] | None = None) -> None:
        self.reply = reply or (lambda body, n: judge_reply(1.0))
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None, "start the server first"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length)
        with self._lock:
            n = len(self.requests)
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"_unparseable": raw.decode(errors="replace")}
            self.requests.append(body)
            self.headers.append({k.lower(): v for k, v in handler.headers.items()})
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if handler.path != "/v1/chat/completions":
                reply = Reply(status=404, body=json.dumps({"error": {"message": f"no route {handler.path}"}}))
            else:
                reply = self.reply(body, n)
            if reply.delay:
                time.sleep(reply.delay)
            streamed = reply.body is None and reply.status == 200 and body.get("stream") is True
            if streamed:
                payload = _stream(str(body.get("model", "")), reply.content or "")
            else:
                payload = reply.body if reply.body is not None else (
                    _completion(str(body.get("model", "")), reply.content or "") if reply.status == 200
                    else json.dumps({"error": {"message": f"scripted HTTP {reply.status}"}}))
            data = payload.encode()
            handler.send_response(reply.status)
            handler.send_header("content-type", "text/event-stream" if streamed else "application/json")
            handler.send_header("content-length", str(len(data)))
            for key, value in reply.headers.items():
                handler.send_header(key, value)
            handler.end_headers()
            handler.wfile.write(data)
        finally:
            with self._lock:
                self.in_flight -= 1

    def start(self) -> FakeChatServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # headers and body go out in two writes: without this, Nagle + delayed ACK add ~40 ms
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                owner._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that gave up (timeout test) closes its socket mid-answer

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-chat-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m openenv_rubrics.testing [--delay S]``: serve well-formed judgements (score 1.0)
    after ``delay`` seconds; prints the base URL, serves until standard input closes."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m openenv_rubrics.testing")
    parser.add_argument("--delay", type=float, default=0.0, help="Seconds before each answer.")
    args = parser.parse_args(argv)
    with FakeChatServer(lambda body, n: Reply(json.dumps({"score": 1.0, "rationale": "ok"}), delay=args.delay)) as srv:
        print(srv.url, flush=True)
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
