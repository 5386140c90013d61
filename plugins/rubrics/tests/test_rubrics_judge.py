"""The LLM judge against a real chat-completions server on 127.0.0.1 (openenv_rubrics.testing)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from openenv.errors import ConfigError
from openenv.rubric import RubricError
from openenv_rubrics.judge import LLMJudge, parse_judgement
from openenv_rubrics.testing import FakeChatServer, Reply, judge_reply


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    with FakeChatServer() as srv:
        yield srv


def judge(server: FakeChatServer, **kw: Any) -> LLMJudge:
    kw.setdefault("backoff", 0.01)
    return LLMJudge(base_url=server.url, model="judge-1", **kw)


async def test_good_answer_keeps_score_and_rationale(server: FakeChatServer) -> None:
    server.reply = lambda body, n: judge_reply(0.8, "mostly right")
    rubric = judge(server, api_key="sk-local", reference="observation.answer", question="observation.task")
    result = await rubric.ascore({"text": "4"}, {"answer": "4", "task": "2+2?"})
    assert result.score == 0.8 and result.rationale == "mostly right" and result.components == {"raw": 0.8}
    body = server.requests[0]
    assert body["model"] == "judge-1" and body["temperature"] == 0.0
    assert body["response_format"] == {"type": "json_object"}
    user = body["messages"][1]["content"]
    assert "Task:\n2+2?" in user and "Reference answer:\n4" in user and '{"text": "4"}' in user
    assert '"score"' in body["messages"][0]["content"]
    assert server.headers[0]["authorization"] == "Bearer sk-local"
    await rubric.aclose()


async def test_declared_scale_is_normalised_explicitly(server: FakeChatServer) -> None:
    server.reply = lambda body, n: judge_reply(8, "good")
    rubric = judge(server, scale=[0, 10])
    assert (await rubric.ascore("x", None)).score == 0.8
    assert "from 0 to 10" in server.requests[0]["messages"][0]["content"]
    ranged = judge(server, scale=[0, 10], low=-1, high=1)
    assert (await ranged.ascore("x", None)).score == pytest.approx(0.6)


@pytest.mark.parametrize("content", [
    "8/10", "Score: 0.8", '{"score": "0.8"}', '{"score": true}', '{"rating": 1}', "[0.8]",
    '{"score": 1.5}', '{"score": 0.5} {"score": 0.9}', '{"score": 0.1, "score": 0.9}', '{"score": NaN}',
    '{"score": 0.5, "rationale": 3}', "", "```json\n{\"score\": 0.5}\n``` and more",
])
async def test_ambiguous_answers_are_refused_never_scored(server: FakeChatServer, content: str) -> None:
    server.reply = lambda body, n: Reply(content)
    rubric = judge(server)
    with pytest.raises(RubricError, match="rubric 'llm_judge': refused the judge's answer") as err:
        await rubric.ascore("x", None)
    assert "Expected exactly" in str(err.value)
    assert len(server.requests) == 1  # garbage is not retried


def test_parse_judgement_accepts_one_fenced_object() -> None:
    assert parse_judgement('```json\n{"score": 7, "rationale": "ok"}\n```', (0, 10)) == (7.0, "ok")
    assert parse_judgement('  {"score": 0}  ', (0, 1)) == (0.0, None)


async def test_garbage_becomes_the_declared_fallback_with_the_reason(server: FakeChatServer) -> None:
    server.reply = lambda body, n: Reply("8/10")
    result = await judge(server, on_error="fallback", fallback_score=0.0).ascore("x", None)
    assert result.score == 0.0 and "refused the judge's answer" in (result.error or "")


async def test_non_chat_reply_and_client_errors_fail_at_once(server: FakeChatServer) -> None:
    server.reply = lambda body, n: Reply(body='{"hello": 1}')
    with pytest.raises(RubricError, match="not a chat completion"):
        await judge(server).ascore("x", None)
    server.reply = lambda body, n: Reply(status=401)
    with pytest.raises(RubricError, match="answered HTTP 401"):
        await judge(server).ascore("x", None)
    assert len(server.requests) == 2  # neither is retried


async def test_slow_answer_beyond_the_timeout_is_retried_then_fails(server: FakeChatServer) -> None:
    server.reply = lambda body, n: Reply(json.dumps({"score": 1}), delay=1.0)
    rubric = judge(server, request_timeout=0.2, max_retries=1)
    with pytest.raises(RubricError, match=r"failed after 2 attempt\(s\); last: no answer within 0.2 s"):
        await rubric.ascore("x", None)
    assert rubric.stats["retries"] == 1


async def test_5xx_then_success(server: FakeChatServer) -> None:
    server.reply = lambda body, n: Reply(status=503) if n < 2 else judge_reply(0.5, "ok")
    rubric = judge(server, max_retries=3)
    result = await rubric.ascore("x", None)
    assert result.score == 0.5 and len(server.requests) == 3 and rubric.stats["retries"] == 2


async def test_429_honours_retry_after_within_the_cap(server: FakeChatServer) -> None:
    server.reply = lambda body, n: Reply(status=429, headers={"retry-after": "0.3"}) if n == 0 else judge_reply(1.0)
    rubric = judge(server, backoff=0.01, max_backoff=1.0)
    started = time.monotonic()
    assert (await rubric.ascore("x", None)).score == 1.0
    assert time.monotonic() - started >= 0.3


async def test_5xx_forever_is_an_error_never_a_zero(server: FakeChatServer) -> None:
    server.reply = lambda body, n: Reply(status=500)
    rubric = judge(server, max_retries=2)
    with pytest.raises(RubricError, match=r"failed after 3 attempt\(s\); last: HTTP 500"):
        await rubric.ascore("x", None)
    assert len(server.requests) == 3


async def test_endpoint_down_is_an_error() -> None:
    with socket.socket() as reserved:  # bound, never listening: connections are refused
        reserved.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{reserved.getsockname()[1]}/v1"
        rubric = LLMJudge(base_url=url, model="m", max_retries=1, backoff=0.01)
        with pytest.raises(RubricError, match="could not reach the endpoint"):
            await rubric.ascore("x", None)
        assert rubric.stats["requests"] == 2


async def test_concurrency_limit_is_respected(server: FakeChatServer) -> None:
    server.reply = lambda body, n: Reply(json.dumps({"score": 1}), delay=0.15)
    rubric = judge(server, max_concurrency=3)
    results = await asyncio.gather(*(rubric.ascore(f"answer {i}", None) for i in range(9)))
    assert [r.score for r in results] == [1.0] * 9
    assert len(server.requests) == 9
    assert server.max_in_flight == 3


async def test_cache_hit_and_shared_in_flight_request(server: FakeChatServer) -> None:
    server.reply = lambda body, n: Reply(json.dumps({"score": 0.25, "rationale": f"call {n}"}), delay=0.05)
    rubric = judge(server)
    first, second = await asyncio.gather(rubric.ascore("same", None), rubric.ascore("same", None))
    third = await rubric.ascore("same", None)
    assert first == second == third and third.rationale == "call 0"
    assert len(server.requests) == 1 and rubric.stats["cache_hits"] == 2
    await rubric.ascore("different", None)
    assert len(server.requests) == 2
    uncached = judge(server, cache_size=0)
    await uncached.ascore("same", None)
    await uncached.ascore("same", None)
    assert len(server.requests) == 4


def test_works_across_event_loops(server: FakeChatServer) -> None:
    rubric = judge(server, cache_size=0)
    assert asyncio.run(rubric.ascore("a", None)).score == 1.0
    assert asyncio.run(rubric.ascore("a", None)).score == 1.0  # a new loop gets a new client


def test_config_from_environment_and_errors(server: FakeChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="OPENENV_JUDGE_BASE_URL"):
        LLMJudge(model="m")
    monkeypatch.setenv("OPENENV_JUDGE_BASE_URL", server.url)
    with pytest.raises(ConfigError, match="OPENENV_JUDGE_MODEL"):
        LLMJudge()
    monkeypatch.setenv("OPENENV_JUDGE_MODEL", "env-model")
    monkeypatch.setenv("OPENENV_JUDGE_API_KEY", "sk-env")
    rubric = LLMJudge()
    assert (rubric.url, rubric.model, rubric.api_key) == (f"{server.url}/chat/completions", "env-model", "sk-env")
    with pytest.raises(ConfigError, match="uses \\{reference\\}"):
        LLMJudge(prompt="compare {response} with {reference}")
    with pytest.raises(ConfigError, match="scale must be"):
        LLMJudge(scale=[10, 0])
    with pytest.raises(ConfigError, match="max_concurrency"):
        LLMJudge(max_concurrency=0)


async def test_custom_prompt_template(server: FakeChatServer) -> None:
    rubric = judge(server, prompt="Q={question} R={reference} A={response}", question="observation.q",
                   reference="observation.r", response="action.a")
    await rubric.ascore({"a": "yes"}, {"q": "ok?", "r": "yes"})
    assert server.requests[0]["messages"][1]["content"] == "Q=ok? R=yes A=yes"


def test_the_sync_call_is_refused_with_the_way_out(server: FakeChatServer) -> None:
    from openenv.errors import RuleViolation

    with pytest.raises(RuleViolation, match=r"await rubric\.ascore"):
        judge(server).score("x", None)
    assert threading.active_count() >= 1


async def test_shared_in_flight_failure_reaches_every_waiter(server: FakeChatServer) -> None:
    server.reply = lambda body, n: Reply("8/10", delay=0.05)
    rubric = judge(server)
    results = await asyncio.gather(rubric.ascore("same", None), rubric.ascore("same", None), return_exceptions=True)
    assert all(isinstance(r, RubricError) and "refused" in str(r) for r in results)
    assert len(server.requests) == 1
    server.reply = lambda body, n: judge_reply(0.5)
    assert (await rubric.ascore("same", None)).score == 0.5  # failures are not cached


async def test_judge_behind_a_format_gate_keeps_its_rationale(server: FakeChatServer) -> None:
    from openenv_rubrics.config import rubric_from_spec

    server.reply = lambda body, n: judge_reply(0.7, "close enough")
    spec = json.dumps({"rubrics": [
        {"rubric": "regex", "config": {"pattern": "<answer>.*</answer>", "flags": "s"}, "name": "format"},
        {"rubric": "llm_judge", "config": {"base_url": server.url, "model": "m"}, "name": "judge"},
    ]})
    chain = rubric_from_spec(f"sequential={spec}")
    assert chain.is_async
    good = await chain.ascore("<answer>4</answer>", None)
    assert good.score == 0.7 and good.components == {"format": 1.0, "judge": 0.7, "judge.raw": 0.7}
    assert good.rationales == {"judge": "close enough"}
    bad = await chain.ascore("4", None)
    assert bad.score == 0.0 and bad.components == {"format": 0.0} and len(server.requests) == 1


def test_the_server_module_runs_as_a_program() -> None:
    import subprocess
    import sys

    import httpx

    proc = subprocess.Popen([sys.executable, "-m", "openenv_rubrics.testing"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        reply = httpx.post(f"{url}/chat/completions", json={"model": "m", "messages": []}, timeout=10)
        assert json.loads(reply.json()["choices"][0]["message"]["content"])["score"] == 1.0
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
