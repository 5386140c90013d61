"""The gateway with the real ``openai`` and ``anthropic`` SDKs in front of the scripted upstream:
keys, the three dialects, capture and linking, and every kind of bad input or upstream failure."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest

from openenv_gateway import CaptureGateway
from openenv_gateway.testing.scripted import IM_END, render_ids

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")


def _oa(gw: CaptureGateway, key: str) -> Any:
    return openai.OpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0, timeout=20)


def _an(gw: CaptureGateway, key: str) -> Any:
    return anthropic.Anthropic(base_url=gw.base_url, api_key=key, max_retries=0, timeout=20)


def test_chat_turns_capture_engine_ids_and_link_by_prefix(gateway: CaptureGateway) -> None:
    key = gateway.open_episode("ep-1", {"task_id": "t1"})
    client = _oa(gateway, key)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    for _ in range(3):
        reply = client.chat.completions.create(model="m", messages=messages)
        assert not hasattr(reply, "prompt_token_ids") or reply.model_extra.get("prompt_token_ids") is None
        messages += [{"role": "assistant", "content": reply.choices[0].message.content},
                     {"role": "user", "content": "more"}]
    trace = gateway.close_episode(key)
    assert trace.meta == {"task_id": "t1"}
    assert [t.branch for t in trace.turns] == [0, 0, 0]
    first = trace.turns[0]
    assert first.prompt_ids == render_ids([{"role": "user", "content": "hi"}])
    assert first.completion_ids == [*b"ok 1", IM_END] and len(first.logprobs) == len(first.completion_ids)
    assert first.ids_source == "engine" and first.error is None


def test_streamed_chat_is_relayed_and_captured(gateway: CaptureGateway) -> None:
    key = gateway.open_episode("ep-s")
    stream = _oa(gateway, key).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                                       stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "ok 1"
    turn = gateway.close_episode(key).turns[0]
    assert turn.stream and turn.text == "ok 1" and turn.completion_ids == [*b"ok 1", IM_END]


def test_rewritten_history_becomes_a_new_branch_with_drift(gateway: CaptureGateway) -> None:
    key = gateway.open_episode("ep-2")
    client = _oa(gateway, key)
    first = [{"role": "user", "content": "hello there"}]
    reply = client.chat.completions.create(model="m", messages=first).choices[0].message.content
    client.chat.completions.create(model="m", messages=[*first, {"role": "assistant", "content": reply},
                                                        {"role": "user", "content": "next"}])
    # compaction: the agent replaces its history with a summary
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "summary: hi"}])
    trace = gateway.close_episode(key)
    assert [t.branch for t in trace.turns] == [0, 0, 1]
    drift = trace.branches[1].drift
    # the two prompts agree on "<|im_start|>user\n" (6 ids) and then differ ("hello" / "summary")
    assert drift is not None and drift.from_branch == 0 and drift.common_prefix == 6
    assert drift.tokens_dropped == len(trace.turns[1].full_ids) - 6


def test_tool_calls_round_trip_in_every_dialect(gateway: CaptureGateway) -> None:
    key = gateway.open_episode("ep-tools")
    tool = {"type": "function", "function": {"name": "run", "description": "run a command",
                                             "parameters": {"type": "object", "properties": {}}}}
    chat = _oa(gateway, key).chat.completions.create(model="tool", messages=[{"role": "user", "content": "go"}],
                                                     tools=[tool])
    assert chat.choices[0].message.tool_calls[0].function.name == "run"
    msg = _an(gateway, key).messages.create(model="tool", max_tokens=16, messages=[{"role": "user", "content": "go"}],
                                            tools=[{"name": "run", "description": "run", "input_schema": {
                                                "type": "object", "properties": {}}}])
    assert msg.stop_reason == "tool_use" and msg.content[0].type == "tool_use" and msg.content[0].name == "run"
    assert msg.content[0].input == {"n": 1}
    resp = _oa(gateway, key).responses.create(model="tool", input="go", tools=[
        {"type": "function", "name": "run", "parameters": {"type": "object", "properties": {}}}])
    calls = [o for o in resp.output if o.type == "function_call"]
    assert calls and calls[0].name == "run"
    trace = gateway.close_episode(key)
    assert [t.dialect for t in trace.turns] == ["chat", "anthropic", "responses"]
    assert all(t.tool_calls and t.tool_calls[0]["function"]["name"] == "run" for t in trace.turns)


def test_anthropic_messages_text_and_stream(gateway: CaptureGateway) -> None:
    key = gateway.open_episode("ep-a")
    client = _an(gateway, key)
    msg = client.messages.create(model="m", max_tokens=32, system="be brief",
                                 messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    assert msg.content[0].text == "ok 2" and msg.stop_reason == "end_turn"
    with client.messages.stream(model="m", max_tokens=32, messages=[{"role": "user", "content": "hi"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "ok 1" and final.stop_reason == "end_turn"
    trace = gateway.close_episode(key)
    assert trace.turns[0].prompt_ids == render_ids([{"role": "system", "content": "be brief"},
                                                    {"role": "user", "content": "hi"}])


def test_responses_text_and_stream(gateway: CaptureGateway) -> None:
    key = gateway.open_episode("ep-r")
    client = _oa(gateway, key)
    resp = client.responses.create(model="m", instructions="sys", input=[
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}])
    assert resp.output_text == "ok 2"
    events = list(client.responses.create(model="m", input="hi", stream=True))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "ok 1"
    assert events[-1].type == "response.completed" and events[-1].response.output_text == "ok 1"
    assert [t.dialect for t in gateway.close_episode(key).turns] == ["responses", "responses"]


def test_image_parts_are_passed_through_to_the_engine(gateway: CaptureGateway) -> None:
    key = gateway.open_episode("ep-img")
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    reply = _oa(gateway, key).chat.completions.create(model="m", messages=[
        {"role": "user", "content": [{"type": "text", "text": "what is it"}, image]}])
    assert reply.choices[0].message.content == "ok 1"
    msg = _an(gateway, key).messages.create(model="m", max_tokens=8, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "text", "text": "what is it"}]}])
    assert msg.content[0].text == "ok 1"


def test_keys_are_per_episode_and_refused_in_each_providers_shape(gateway: CaptureGateway) -> None:
    a, b = gateway.open_episode("A"), gateway.open_episode("B")
    _oa(gateway, a).chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
    with pytest.raises(openai.AuthenticationError) as oa_err:
        _oa(gateway, "oek-forged").chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert oa_err.value.body["code"] == "invalid_api_key"
    with pytest.raises(anthropic.AuthenticationError) as an_err:
        _an(gateway, "sk-ant-wrong").messages.create(model="m", max_tokens=8,
                                                     messages=[{"role": "user", "content": "x"}])
    assert an_err.value.body["error"]["type"] == "authentication_error"
    # each key reads only its own trace
    own = httpx.get(gateway.base_url + "/v1/openenv/trace", headers={"Authorization": f"Bearer {b}"}).json()
    assert own["episode_id"] == "B" and own["turns"] == []
    gateway.close_episode(a)
    with pytest.raises(openai.AuthenticationError):  # a closed episode's key is dead
        _oa(gateway, a).chat.completions.create(model="m", messages=[{"role": "user", "content": "late"}])
    assert gateway.close_episode(b).turns == []
    with pytest.raises(KeyError):
        gateway.close_episode(b)


def test_malformed_and_oversized_requests_get_structured_errors(gateway: CaptureGateway) -> None:
    key = gateway.open_episode("ep-bad")
    headers = {"Authorization": f"Bearer {key}", "content-type": "application/json"}
    url = gateway.base_url + "/v1/chat/completions"
    bad_json = httpx.post(url, content=b"{not json", headers=headers)
    assert bad_json.status_code == 400 and bad_json.json()["error"]["code"] == "invalid_json"
    no_messages = httpx.post(url, json={"model": "m"}, headers=headers)
    assert no_messages.status_code == 400 and no_messages.json()["error"]["param"] == "messages"
    huge = httpx.post(url, json={"model": "m", "messages": [{"role": "user", "content": "x" * 100_000}]},
                      headers=headers)
    assert huge.status_code == 413 and "limit" in huge.json()["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as err:
        _an(gateway, key).messages.create(model="m", max_tokens=8, messages=[
            {"role": "user", "content": [{"type": "video", "data": "?"}]}])
    assert "unknown type 'video'" in err.value.message
    trace = gateway.close_episode(key)
    assert [e.code for e in trace.errors] == ["invalid_json", "invalid_request", "request_too_large",
                                               "invalid_request"]
    assert trace.turns == []


def test_engine_without_ids_is_recorded_missing_not_retokenised(gateway: CaptureGateway) -> None:
    key = gateway.open_episode("ep-noids")
    reply = _oa(gateway, key).chat.completions.create(model="no-ids", messages=[{"role": "user", "content": "x"}])
    assert reply.choices[0].message.content == "ok 1"  # the agent is served as usual
    turn = gateway.close_episode(key).turns[0]
    assert turn.ids_source == "missing" and turn.prompt_ids == [] and turn.completion_ids == []
    assert turn.error is not None and turn.error.code == "ids_missing"


def test_upstream_errors_reach_the_agent_in_its_providers_shape(gateway: CaptureGateway) -> None:
    key = gateway.open_episode("ep-up")
    with pytest.raises(openai.APIStatusError) as failed:
        _oa(gateway, key).chat.completions.create(model="fail", messages=[{"role": "user", "content": "x"}])
    assert failed.value.status_code == 502 and "engine crashed" in failed.value.message
    with pytest.raises(anthropic.BadRequestError) as rejected:
        _an(gateway, key).messages.create(model="reject", max_tokens=8, messages=[{"role": "user", "content": "x"}])
    assert "max_tokens is too large" in rejected.value.message
    with pytest.raises(openai.APIStatusError) as refused:  # the engine refusing the gateway's own key
        _oa(gateway, key).chat.completions.create(model="unauthorized", messages=[{"role": "user", "content": "x"}])
    assert refused.value.status_code == 502 and "upstream_api_key" in refused.value.message
    with pytest.raises(openai.APIError) as broken:
        list(_oa(gateway, key).chat.completions.create(model="break-stream", stream=True,
                                                       messages=[{"role": "user", "content": "x"}]))
    assert "stream" in str(broken.value.message)
    an_stream = _an(gateway, key).messages.stream(model="break-stream", max_tokens=8,
                                                  messages=[{"role": "user", "content": "x"}])
    with pytest.raises(anthropic.APIStatusError), an_stream as stream:
        "".join(stream.text_stream)
    trace = gateway.close_episode(key)
    assert [t.error.code if t.error else None for t in trace.turns] == [
        "upstream_error", "upstream_error", "upstream_error", "upstream_disconnected", "upstream_disconnected"]
    assert all(t.branch == -1 for t in trace.turns)  # failed turns are kept but join no branch


def test_a_flooding_episode_gets_429_while_another_goes_on(gateway: CaptureGateway) -> None:
    flood, calm = gateway.open_episode("flood"), gateway.open_episode("calm")
    statuses: list[int] = []

    def call() -> None:
        r = httpx.post(gateway.base_url + "/v1/chat/completions", timeout=20,
                       headers={"Authorization": f"Bearer {flood}"},
                       json={"model": "slow", "messages": [{"role": "user", "content": "x"}]})
        statuses.append(r.status_code)

    threads = [threading.Thread(target=call) for _ in range(6)]
    for t in threads:
        t.start()
    reply = _oa(gateway, calm).chat.completions.create(model="m", messages=[{"role": "user", "content": "y"}])
    assert reply.choices[0].message.content == "ok 1"
    for t in threads:
        t.join(timeout=20)
    assert sorted(statuses).count(200) == 2 and statuses.count(429) == 4
    trace = gateway.close_episode(flood)
    assert len(trace.turns) == 2 and [e.code for e in trace.errors] == ["too_many_concurrent_requests"] * 4
    assert len(gateway.close_episode(calm).turns) == 1


def test_unreachable_upstream_is_a_502_in_the_trace() -> None:
    gw = CaptureGateway("http://127.0.0.1:9")  # discard port: nothing listens
    gw.start()
    try:
        key = gw.open_episode("e")
        r = httpx.post(gw.base_url + "/v1/messages", headers={"x-api-key": key}, json={
            "model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}]})
        assert r.status_code == 502 and r.json()["type"] == "error"
        assert json.loads(r.text)["error"]["type"] == "api_error"
        assert gw.close_episode(key).turns[0].error.code == "upstream_unreachable"  # type: ignore[union-attr]
    finally:
        gw.stop()


def test_an_episodes_own_turn_limit_refuses_further_calls_in_its_providers_shape(gateway: CaptureGateway) -> None:
    with pytest.raises(ValueError, match="max_turns must be at least 1"):
        gateway.open_episode("zero", max_turns=0)
    capped, other = gateway.open_episode("capped", max_turns=2), gateway.open_episode("other")
    client = _oa(gateway, capped)
    for _ in range(2):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.RateLimitError, match="limit of 2 model calls"):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(anthropic.RateLimitError, match="limit of 2 model calls"):
        _an(gateway, capped).messages.create(model="m", max_tokens=4, messages=[{"role": "user", "content": "x"}])
    _oa(gateway, other).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    trace = gateway.close_episode(capped)
    assert len(trace.turns) == 2 and [e.code for e in trace.errors] == ["turn_limit", "turn_limit"]
    assert len(gateway.close_episode(other).turns) == 1


def test_an_episodes_tools_answer_its_key_only_one_call_at_a_time(gateway: CaptureGateway) -> None:
    release, entered = threading.Event(), threading.Event()
    seen: list[dict[str, Any]] = []

    def tools(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        if request.get("method") == "slow":
            entered.set()
            release.wait(10)
        return {"jsonrpc": "2.0", "id": request.get("id"), "result": {"tools": []}}

    with_tools, without = gateway.open_episode("tools", tools=tools), gateway.open_episode("plain")
    url = gateway.base_url + "/v1/openenv/tools"

    def post(key: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(url, headers={"Authorization": f"Bearer {key}"}, json=body, timeout=20)

    ok = post(with_tools, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert ok.status_code == 200 and ok.json() == {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
    refused = post(without, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "no_tools"
    assert post("oek-forged", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).status_code == 401
    slow = threading.Thread(target=post, args=(with_tools, {"jsonrpc": "2.0", "id": 2, "method": "slow"}))
    slow.start()
    assert entered.wait(10)
    busy = post(with_tools, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    release.set()
    slow.join(timeout=20)
    assert busy.status_code == 429 and busy.json()["error"]["code"] == "tool_call_in_flight"
    assert [r["id"] for r in seen] == [1, 2]  # neither the refused nor the other episode's call reached it
    gateway.close_episode(with_tools)
    gateway.close_episode(without)
    assert post(with_tools, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}).status_code == 401


def test_streamed_calls_reuse_one_upstream_connection() -> None:
    """What follows ``[DONE]`` is read, so the connection goes back to the pool: a stream closed unread
    made every streamed call open a new TCP connection to the inference server."""
    from openenv_gateway.serving import ThreadServer
    from openenv_gateway.testing.scripted import build_scripted_app

    app = build_scripted_app(slow_s=1.0)
    peers: set[tuple[str, int]] = set()

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            peers.add(tuple(scope["client"]))
        await app(scope, receive, send)

    upstream = ThreadServer(counting)
    gw = CaptureGateway(upstream.start())
    gw.start()
    try:
        key = gw.open_episode("reuse")
        for _ in range(3):  # sequential: one connection is enough for all of them
            stream = _oa(gw, key).chat.completions.create(model="m", stream=True,
                                                          messages=[{"role": "user", "content": "hi"}])
            assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        assert len(gw.close_episode(key).turns) == 3
        assert len(peers) == 1, peers
    finally:
        gw.stop()
        upstream.stop()
