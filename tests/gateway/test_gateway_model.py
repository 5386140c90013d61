"""The gateway in front of a real model: captured ids are the engine's ids, turns link by exact
token prefix, rewrites branch with measured drift, and upstream failures reach the agent in its
provider's shape. Driven with the real ``openai`` and ``anthropic`` SDKs."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from openenv_gateway import CaptureGateway
from openenv_gateway.trace import common_prefix_len


def _oa(base: str, key: str) -> Any:
    import openai

    return openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=60)


def _direct(model_url: str, messages: list[dict[str, Any]], max_tokens: int) -> dict[str, Any]:
    """What the engine itself returns for these messages (greedy), asked directly."""
    r = httpx.post(model_url + "/v1/chat/completions", timeout=60, json={
        "model": "m", "messages": messages, "max_tokens": max_tokens, "return_token_ids": True, "logprobs": True})
    r.raise_for_status()
    body = r.json()
    choice = body["choices"][0]
    return {"prompt": body["prompt_token_ids"], "completion": choice["token_ids"],
            "logprobs": [e["logprob"] for e in choice["logprobs"]["content"]], "text": choice["message"]["content"]}


def test_captured_ids_equal_the_engines_ids_in_every_dialect(gateway: CaptureGateway, model_url: str) -> None:
    import anthropic

    key = gateway.open_episode("ids")
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello world"}]
    expected = _direct(model_url, messages, 12)
    client = _oa(gateway.base_url, key)
    chat = client.chat.completions.create(model="m", messages=messages, max_tokens=12)
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model="m", messages=messages, max_tokens=12, stream=True) if c.choices)
    msg = anthropic.Anthropic(base_url=gateway.base_url, api_key=key, max_retries=0).messages.create(
        model="m", max_tokens=12, system="be brief", messages=[{"role": "user", "content": "hello world"}])
    resp = client.responses.create(model="m", instructions="be brief", input="hello world", max_output_tokens=12)
    assert chat.choices[0].message.content == streamed == msg.content[0].text == resp.output_text == expected["text"]
    trace = gateway.close_episode(key)
    assert [t.dialect for t in trace.turns] == ["chat", "chat", "anthropic", "responses"]
    for turn in trace.turns:
        assert turn.ids_source == "engine" and turn.error is None
        assert turn.prompt_ids == expected["prompt"]
        assert turn.completion_ids == expected["completion"]
        assert turn.logprobs == pytest.approx(expected["logprobs"], abs=1e-5)


def test_a_multi_turn_conversation_links_by_exact_prefix(gateway: CaptureGateway) -> None:
    # One token per answer: a single sampled token re-renders to itself, so every turn extends the last.
    key = gateway.open_episode("linked")
    client = _oa(gateway.base_url, key)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]
    for i in range(4):
        answer = client.chat.completions.create(model="m", messages=messages, max_tokens=1)
        messages += [{"role": "assistant", "content": answer.choices[0].message.content},
                     {"role": "user", "content": f"turn {i}"}]
    trace = gateway.close_episode(key)
    assert [t.branch for t in trace.turns] == [0, 0, 0, 0]
    assert [t.parent_turn for t in trace.turns] == [None, 0, 1, 2]
    for prev, nxt in zip(trace.turns, trace.turns[1:], strict=False):
        assert nxt.prompt_ids[:len(prev.full_ids)] == prev.full_ids


def test_turns_link_exactly_when_the_engines_ids_extend_and_drift_is_measured(gateway: CaptureGateway,
                                                                              model_url: str) -> None:
    # Longer answers from a random model often re-tokenise differently when the agent sends them back:
    # the gateway must then start a branch (and say by how much it drifted), never link silently.
    key = gateway.open_episode("drift")
    client = _oa(gateway.base_url, key)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]
    for i in range(4):
        answer = client.chat.completions.create(model="m", messages=messages, max_tokens=6)
        messages += [{"role": "assistant", "content": answer.choices[0].message.content},
                     {"role": "user", "content": f"turn {i}"}]
    trace = gateway.close_episode(key)
    for k in range(1, 4):
        prev, turn = trace.turns[k - 1], trace.turns[k]
        extends = turn.prompt_ids[:len(prev.full_ids)] == prev.full_ids
        assert (turn.branch == prev.branch) == extends
        if not extends:
            branch = trace.branches[turn.branch]
            assert branch.drift is not None and branch.turns[0] == k
            tip = trace.turns[trace.branches[branch.drift.from_branch].turns[-1]] if branch.drift.from_branch != \
                turn.branch else prev
            assert branch.drift.common_prefix == common_prefix_len(tip.full_ids, turn.prompt_ids)
            assert branch.drift.tokens_dropped == len(tip.full_ids) - branch.drift.common_prefix


def test_a_rewritten_conversation_becomes_a_new_branch(gateway: CaptureGateway) -> None:
    key = gateway.open_episode("rewrite")
    client = _oa(gateway.base_url, key)
    history: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]
    answer = client.chat.completions.create(model="m", messages=history, max_tokens=1).choices[0].message.content
    history += [{"role": "assistant", "content": answer}, {"role": "user", "content": "and then"}]
    client.chat.completions.create(model="m", messages=history, max_tokens=1)
    # the agent drops its first exchange (compaction)
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "and then"}], max_tokens=1)
    trace = gateway.close_episode(key)
    assert [t.branch for t in trace.turns] == [0, 0, 1]
    drift = trace.branches[1].drift
    assert drift is not None and drift.from_branch == 0
    assert drift.common_prefix == common_prefix_len(trace.turns[1].full_ids, trace.turns[2].prompt_ids)
    assert drift.tokens_dropped == len(trace.turns[1].full_ids) - drift.common_prefix > 0


def test_wrong_and_foreign_keys_are_refused(gateway: CaptureGateway) -> None:
    import openai

    mine, other = gateway.open_episode("mine"), gateway.open_episode("other")
    _oa(gateway.base_url, other).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                                         max_tokens=1)
    with pytest.raises(openai.AuthenticationError):
        _oa(gateway.base_url, mine + "x").chat.completions.create(model="m", messages=[
            {"role": "user", "content": "x"}], max_tokens=1)
    own = httpx.get(gateway.base_url + "/v1/openenv/trace", headers={"Authorization": f"Bearer {mine}"}).json()
    assert own["episode_id"] == "mine" and own["turns"] == []
    with pytest.raises(openai.BadRequestError) as bad:
        _oa(gateway.base_url, mine).chat.completions.create(model="m", messages=[], max_tokens=1)
    assert bad.value.body["param"] == "messages"
    assert len(gateway.close_episode(other).turns) == 1 and gateway.close_episode(mine).turns == []


def test_engine_errors_pass_through_in_the_providers_shape(gateway: CaptureGateway) -> None:
    import openai

    key = gateway.open_episode("bad-sampling")
    with pytest.raises(openai.BadRequestError) as bad:
        _oa(gateway.base_url, key).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}],
                                                           max_tokens=1, n=3)
    assert "n=1" in bad.value.message
    trace = gateway.close_episode(key)
    assert trace.turns[0].error is not None and trace.turns[0].error.code == "upstream_error"


def test_an_engine_killed_mid_stream_gives_the_agent_a_provider_error(model_stack: None) -> None:
    import anthropic
    import openai

    from openenv_gateway.testing.process import model_server

    with model_server("--token-delay-s", "0.3", "--max-tokens-cap", "64") as server:
        gw = CaptureGateway(server.base_url)
        gw.start()
        try:
            # an agent that hangs up mid-stream: its turn is still recorded, saying so
            from openenv.testing import wait_until

            quitter = gw.open_episode("quitter")
            early = _oa(gw.base_url, quitter).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}], max_tokens=64, stream=True)
            next(iter(early))
            early.close()
            turns = wait_until(lambda: gw.trace(quitter).turns, timeout_s=30)
            assert turns and turns[0].error is not None and turns[0].error.code == "agent_disconnected"
            assert turns[0].branch == -1 and len(gw.close_episode(quitter).turns) == 1

            key = gw.open_episode("killed")
            stream = _oa(gw.base_url, key).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}], max_tokens=64, stream=True)
            chunks = iter(stream)
            next(chunks)  # the stream is open and the engine is sampling
            server.kill()
            with pytest.raises(openai.APIError) as err:
                list(chunks)
            assert "stream" in err.value.message
            # the gateway keeps serving: the next call gets a clean 502, in Anthropic's shape this time
            with pytest.raises(anthropic.APIStatusError) as down:
                anthropic.Anthropic(base_url=gw.base_url, api_key=key, max_retries=0).messages.create(
                    model="m", max_tokens=4, messages=[{"role": "user", "content": "x"}])
            assert down.value.status_code == 502
            trace = gw.close_episode(key)
            assert [t.error.code if t.error else None for t in trace.turns] == ["upstream_disconnected",
                                                                                "upstream_unreachable"]
        finally:
            gw.stop()


def test_an_engine_without_token_ids_is_recorded_as_missing(model_stack: None) -> None:
    from openenv_gateway.testing.process import model_server

    with model_server("--no-token-ids") as server:
        gw = CaptureGateway(server.base_url)
        gw.start()
        try:
            key = gw.open_episode("noids")
            reply = _oa(gw.base_url, key).chat.completions.create(model="m", messages=[
                {"role": "user", "content": "x"}], max_tokens=3)
            assert reply.choices[0].message.content is not None
            turn = gw.close_episode(key).turns[0]
            assert turn.ids_source == "missing" and turn.completion_ids == []
            assert turn.error is not None and turn.error.code == "ids_missing"
        finally:
            gw.stop()
