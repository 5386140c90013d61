"""The model-call routes served as plain ASGI (``openenv_gateway.asgi``): what Starlette used to do for
them still happens — an agent hanging up mid-stream is noticed and recorded, other methods get a 405,
a body sent in chunks is bounded like a declared one — against real sockets and a real upstream."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from openenv.testing import wait_until
from openenv_gateway import CaptureGateway, GatewayLimits
from openenv_gateway.serving import ThreadServer

_CHUNKS = 60  # the slow upstream's stream: one token every _PAUSE_S, 6 s in all (bounded)
_PAUSE_S = 0.1


async def _slow_stream(scope: Any, receive: Any, send: Any) -> None:
    """An upstream that streams a long answer slowly, so an agent can hang up in the middle of it."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    first = {"choices": [{"index": 0, "delta": {"role": "assistant"}}], "prompt_token_ids": [1, 2, 3]}
    await send({"type": "http.response.body", "body": b"data: " + json.dumps(first).encode() + b"\n\n",
                "more_body": True})
    for i in range(_CHUNKS):
        chunk = {"choices": [{"index": 0, "delta": {"content": "a"}, "token_ids": [10 + i],
                              "logprobs": {"content": [{"token": "a", "logprob": -0.5}]}}]}
        await send({"type": "http.response.body", "body": b"data: " + json.dumps(chunk).encode() + b"\n\n",
                    "more_body": True})
        await asyncio.sleep(_PAUSE_S)
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


@pytest.fixture
def slow_gateway() -> Iterator[CaptureGateway]:
    upstream = ThreadServer(_slow_stream)
    gw = CaptureGateway(upstream.start(), limits=GatewayLimits(max_body_bytes=4096, max_concurrent_per_episode=1,
                                                               upstream_timeout_s=10))
    gw.start()
    yield gw
    gw.stop()
    upstream.stop()


def test_an_agent_hanging_up_mid_stream_is_recorded_and_frees_its_slot(slow_gateway: CaptureGateway) -> None:
    key = slow_gateway.open_episode("quitter")
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
    with httpx.stream("POST", slow_gateway.base_url + "/v1/chat/completions", json=body, timeout=20,
                      headers={"Authorization": f"Bearer {key}"}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        lines = r.iter_lines()
        assert next(line for line in lines if line.startswith("data: ")).startswith("data: {")
    # the upstream still had seconds of answer to send: the gateway noticed the agent leave, not the end
    turns = wait_until(lambda: slow_gateway.trace(key).turns, timeout_s=8)
    assert turns and turns[0].error is not None and turns[0].error.code == "agent_disconnected"
    assert turns[0].prompt_ids == [1, 2, 3] and len(turns[0].completion_ids) < _CHUNKS
    # its one in-flight slot (max_concurrent_per_episode=1) is free again: the next call is served
    with httpx.stream("POST", slow_gateway.base_url + "/v1/chat/completions", json=body, timeout=20,
                      headers={"Authorization": f"Bearer {key}"}) as again:
        assert again.status_code == 200
    assert len(wait_until(lambda: len(slow_gateway.trace(key).turns) == 2 and slow_gateway.trace(key).turns,
                          timeout_s=8) or []) == 2


def test_model_routes_keep_their_method_and_body_limits(slow_gateway: CaptureGateway) -> None:
    key = slow_gateway.open_episode("limits")
    headers = {"Authorization": f"Bearer {key}"}
    for path in ("/v1/chat/completions", "/v1/responses", "/v1/messages"):
        wrong = httpx.get(slow_gateway.base_url + path, headers=headers)
        assert wrong.status_code == 405 and wrong.headers["allow"] == "POST", path
    assert httpx.post(slow_gateway.base_url + "/v1/nothing", headers=headers).status_code == 404

    def chunked(size: int) -> Iterator[bytes]:  # no content-length: the limit is checked as the body arrives
        prefix = b'{"model": "m", "messages": [{"role": "user", "content": "'
        yield prefix
        for _ in range(size // 512):
            yield b"x" * 512
        yield b'"}]}'

    big = httpx.post(slow_gateway.base_url + "/v1/chat/completions", content=chunked(8192), headers=headers)
    assert big.status_code == 413 and big.json()["error"]["code"] == "request_too_large"
    wrong_key = httpx.post(slow_gateway.base_url + "/v1/messages", content=b"{}", headers={"x-api-key": "nope"})
    assert wrong_key.status_code == 401 and wrong_key.json()["error"]["type"] == "authentication_error"
    assert [e.code for e in slow_gateway.close_episode(key).errors] == ["request_too_large"]
