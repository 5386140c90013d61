"""The server applies rubrics: the reward a real client sees is the rubric's, with components.

Real parts only: ``openenv serve`` in a subprocess, servers on 127.0.0.1, the package's
``FakeChatServer`` standing in for a chat-completions endpoint.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from openenv.errors import RubricFailure, ValidationError
from openenv.rubric import Rubric
from openenv.testing import live_server
from openenv.types import REWARD_COMPONENTS_HEADER
from openenv_env_echo import EchoAction, EchoEnv, EchoEnvClient
from openenv_rubrics.testing import FakeChatServer, Reply, judge_reply

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

_EXACT_HI = 'exact_match={"expected": "hi", "response": "action.message"}'


@pytest.fixture
def serve(cli_env: dict[str, str], tmp_path: Path, wait_until):  # type: ignore[no-untyped-def]
    """``serve(*args)``: ``openenv serve *args --port 0`` in a subprocess; yields its base URL."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> str:
        ready = tmp_path / f"ready{len(procs)}.json"
        log = open(tmp_path / f"serve{len(procs)}.log", "w")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "openenv", "serve", *args, "--port", "0", "--ready-file", str(ready),
             "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT, text=True, env=cli_env,
            start_new_session=True)
        procs.append(proc)
        info = wait_until(lambda: ready.exists() and json.loads(ready.read_text()), timeout_s=30)
        if not info:
            pytest.fail(f"server did not get ready: {(tmp_path / f'serve{len(procs) - 1}.log').read_text()}")
        return f"http://127.0.0.1:{info['port']}"

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_echo_with_a_rubric_changes_the_reward_a_real_client_sees(serve) -> None:  # type: ignore[no-untyped-def]
    url = serve("echo", "--rubric", _EXACT_HI)
    with EchoEnvClient(url).sync() as env:
        reset = env.reset()
        assert reset.reward_components == {}
        hit = env.step(EchoAction(message="hi"))
        miss = env.step(EchoAction(message="a much longer message"))
    # Without the flag echo pays 0.1 per character (0.2 and 2.1): the rubric's score replaces it.
    assert (hit.reward, hit.reward_components) == (1.0, {"exact_match": 1.0})
    assert (miss.reward, miss.reward_components) == (0.0, {"exact_match": 0.0})
    assert hit.reward_details is None


def test_echo_default_rubric_keeps_its_reward_and_reports_the_component(serve) -> None:  # type: ignore[no-untyped-def]
    url = serve("echo")
    with EchoEnvClient(url).sync() as env:
        env.reset()
        result = env.step(EchoAction(message="Hello"))
    assert result.reward == pytest.approx(0.5)
    assert result.reward_components == {"length": pytest.approx(0.5)}


def test_unknown_rubric_is_a_usage_error_with_a_suggestion(cli_env: dict[str, str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "openenv", "serve", "echo", "--rubric", "exact_mach",
                           "--port", "0"], capture_output=True, text=True, env=cli_env, timeout=60)
    assert proc.returncode == 2
    assert "exact_mach" in proc.stderr and "exact_match" in proc.stderr  # did you mean


def test_a_misspelt_field_path_is_refused_at_start_up_with_a_suggestion(cli_env: dict[str, str]) -> None:
    """Not a server that starts and then fails every step: `serve` refuses, naming the field."""
    proc = subprocess.run([sys.executable, "-m", "openenv", "serve", "echo", "--port", "0", "--rubric",
                           "exact_match=response=action.mesage,target=observation.echoed_message"],
                          capture_output=True, text=True, env=cli_env, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "field path 'action.mesage'" in proc.stderr and "Did you mean 'message'?" in proc.stderr
    assert "Traceback" not in proc.stderr
    from openenv.context import ServerConfig
    from openenv.errors import ConfigError
    from openenv.server import create_app
    from openenv_rubrics.config import rubric_from_spec

    with pytest.raises(ConfigError, match="no field 'echoed_mesage'"):
        create_app(EchoEnv, config=ServerConfig(rubric=rubric_from_spec(
            "exact_match=response=action.message,target=observation.echoed_mesage")))
    # free-form parts (metadata) and correct paths pass
    create_app(EchoEnv, config=ServerConfig(rubric=rubric_from_spec(
        "exact_match=response=action.message,target=observation.metadata.answer")))


def _ws_step(url: str, message: str) -> dict[str, Any]:
    from openenv.client import EnvClient

    with EnvClient(url).sync() as env:
        env.reset()
        r = env.step({"message": message})
    return {"reward": r.reward, "components": r.reward_components}


def test_ws_rest_and_the_raw_bodies_carry_the_same_components() -> None:
    from openenv.rubric_spec import rubric_from_spec

    with live_server(EchoEnv, transports=["ws", "rest"], rubric=rubric_from_spec(_EXACT_HI)) as srv:
        url = f"http://127.0.0.1:{srv.port}"
        via_ws = _ws_step(url, "hi")
        from openenv.client import EnvClient

        with EnvClient(url, transport="rest").sync() as env:
            env.reset()
            r = env.step({"message": "hi"})
        via_rest = {"reward": r.reward, "components": r.reward_components}
        raw = httpx.post(url + "/step", json={"action": {"message": "hi"}},
                         headers={REWARD_COMPONENTS_HEADER: "1"}).json()
        # A client that does not ask (upstream's) gets upstream's body exactly, with the rubric's reward.
        plain = httpx.post(url + "/step", json={"action": {"message": "hi"}}).json()
    assert via_ws == via_rest == {"reward": 1.0, "components": {"exact_match": 1.0}}
    assert raw["reward"] == 1.0 and raw["reward_components"] == {"exact_match": 1.0}
    assert set(raw) == {"observation", "reward", "done", "metadata", "reward_components"}
    assert set(plain) == {"observation", "reward", "done", "metadata"} and plain["reward"] == 1.0


def test_a_client_can_never_set_the_reward() -> None:
    from openenv.client import EnvClient

    with live_server(EchoEnv, transports=["rest"]) as srv:
        url = f"http://127.0.0.1:{srv.port}"
        # A step argument named reward is refused...
        body = httpx.post(url + "/step", json={"action": {"message": "x"}, "reward": 99.0})
        assert body.status_code == 422 and "reward" in json.dumps(body.json())
        # ...and so is an action field named reward (actions forbid unknown fields).
        with EnvClient(url, transport="rest").sync() as env:
            env.reset()
            with pytest.raises(ValidationError):
                env.step({"message": "x", "reward": 99.0})
            assert env.step({"message": "x"}).reward == pytest.approx(0.1)


class _Raises(Rubric):
    def evaluate(self, action: Any, observation: Any) -> float:
        if action.message == "boom":
            raise RuntimeError("kaput")
        return 2.0 if action.message == "big" else 0.5


def test_a_failing_rubric_is_a_rubric_error_and_the_session_survives() -> None:
    from openenv.client import EnvClient

    with (live_server(EchoEnv, transports=["ws"], rubric=_Raises(name="fragile")) as srv,
          EnvClient(f"http://127.0.0.1:{srv.port}").sync() as env):
            env.reset()
            with pytest.raises(RubricFailure) as raised:
                env.step({"message": "boom"})
            assert raised.value.code == "RUBRIC_ERROR" and raised.value.rubric == "fragile"
            assert "kaput" in str(raised.value)
            with pytest.raises(RubricFailure, match="outside its declared range"):
                env.step({"message": "big"})
            assert env.step({"message": "ok"}).reward == 0.5  # same session, still usable


def test_fallback_rubric_reports_the_error_in_reward_details() -> None:
    from openenv.client import EnvClient

    rubric = _Raises(name="fragile", on_error="fallback", fallback_score=0.25)
    with (live_server(EchoEnv, transports=["ws"], rubric=rubric) as srv,
          EnvClient(f"http://127.0.0.1:{srv.port}").sync() as env):
            env.reset()
            r = env.step({"message": "boom"})
    assert r.reward == 0.25 and r.reward_components == {"fragile": 0.25}
    assert r.reward_details is not None and "kaput" in r.reward_details["error"]


@pytest.mark.parametrize(("reply", "why"), [
    (lambda body, n: Reply(status=503), "503"),
    (lambda body, n: Reply(content="8/10"), "8/10"),
], ids=["endpoint-5xx", "garbage-answer"])
def test_a_judge_that_is_down_or_answers_garbage_is_never_a_silent_zero(reply: Any, why: str) -> None:
    from openenv.client import EnvClient
    from openenv_rubrics.judge import LLMJudge

    with FakeChatServer(reply) as chat:
        judge = LLMJudge(base_url=chat.url, model="m", api_key="k", max_retries=0, timeout=5.0,
                         response="action.message")
        with (live_server(EchoEnv, transports=["ws"], rubric=judge) as srv,
              EnvClient(f"http://127.0.0.1:{srv.port}").sync() as env):
                env.reset()
                with pytest.raises(RubricFailure) as raised:
                    env.step({"message": "is this right?"})
                assert raised.value.rubric == "llm_judge" and why in str(raised.value)
                assert env.state()["step_count"] == 1  # the env's step ran; the session lives on


def test_a_served_judge_scores_with_its_rationale() -> None:
    from openenv.client import EnvClient
    from openenv_rubrics.judge import LLMJudge

    with FakeChatServer(lambda body, n: judge_reply(0.75, "mostly right")) as chat:
        judge = LLMJudge(base_url=chat.url, model="m", api_key="k", timeout=5.0,
                         response="action.message")
        with (live_server(EchoEnv, transports=["ws"], rubric=judge) as srv,
              EnvClient(f"http://127.0.0.1:{srv.port}").sync() as env):
                env.reset()
                r = env.step({"message": "answer"})
    assert r.reward == 0.75 and r.reward_components["llm_judge"] == 0.75
    assert r.reward_details is not None and "mostly right" in json.dumps(r.reward_details)


def test_the_compat_generic_client_and_the_kernel_generic_client_see_components() -> None:
    from openenv.client import GenericEnvClient as KernelGeneric
    from openenv.core.generic_client import GenericEnvClient as CompatGeneric
    from openenv.rubric_spec import rubric_from_spec

    with live_server(EchoEnv, transports=["ws"], rubric=rubric_from_spec(_EXACT_HI)) as srv:
        url = f"http://127.0.0.1:{srv.port}"
        for client_cls in (KernelGeneric, CompatGeneric):
            with client_cls(base_url=url).sync() as env:
                env.reset()
                r = env.step({"message": "hi"})
            assert (r.reward, r.reward_components) == (1.0, {"exact_match": 1.0}), client_cls


_MCP_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}


def _mcp_call(client: httpx.Client, url: str, message: str, headers: dict[str, str]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo_message", "arguments": {"message": message}}}
    response = client.post(url + "/mcp", json=body, headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_mcp_peers_get_the_components_in_meta_and_the_openenv_dialect_stays_upstreams(serve) -> None:  # type: ignore[no-untyped-def]
    url = serve("echo_mcp", "--rubric",
                'exact_match={"expected": "hi", "response": "action.arguments.message"}')
    with httpx.Client(timeout=10) as client:
        init = client.post(url + "/mcp", json=_MCP_INIT)
        assert init.status_code == 200, init.text
        mcp = {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        # A standard MCP peer (Streamable HTTP) gets them in _meta without asking for them.
        hit, miss = _mcp_call(client, url, "hi", mcp)["result"], _mcp_call(client, url, "bye", mcp)["result"]
        # A peer that never initialized speaks upstream's dialect: its result is upstream's, reward-free.
        upstream = _mcp_call(client, url, "hi", {REWARD_COMPONENTS_HEADER: "1"})["result"]
    assert hit["structuredContent"] == {"result": "hi"} and hit["isError"] is False
    assert hit["_meta"] == {"openenv/reward": 1.0, "openenv/done": False,
                            "openenv/reward_components": {"exact_match": 1.0}}
    assert miss["_meta"]["openenv/reward_components"] == {"exact_match": 0.0}
    assert miss["_meta"]["openenv/reward"] == 0.0
    assert upstream["structuredContent"] == {"result": "hi"} and "_meta" not in upstream
    assert "reward" not in json.dumps(upstream)


def test_mcp_meta_carries_reward_details_and_no_rubric_means_no_components() -> None:
    from openenv_env_echo_mcp.env import EchoMcpEnv

    class _Fragile(Rubric):
        def evaluate(self, action: Any, observation: Any) -> float:
            if action.arguments.get("message") == "boom":
                raise RuntimeError("kaput")
            return 0.5

    rubric = _Fragile(name="fragile", on_error="fallback", fallback_score=0.25)
    upstream_bodies: list[bytes] = []
    for served_rubric in (rubric, None):
        with (live_server(EchoMcpEnv, transports=["mcp"], rubric=served_rubric) as srv,
              httpx.Client(timeout=10) as client):
            url = f"http://127.0.0.1:{srv.port}"
            init = client.post(url + "/mcp", json=_MCP_INIT)
            headers = {"mcp-session-id": init.headers["mcp-session-id"]}
            boom, ok = (_mcp_call(client, url, m, headers)["result"] for m in ("boom", "ok"))
            upstream_bodies.append(client.post(url + "/mcp", json={
                "jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "echo_message", "arguments": {"message": "ok"}}}).content)
        if served_rubric is None:  # echo_mcp pays no reward of its own: no _meta at all
            assert "_meta" not in boom and "_meta" not in ok
            continue
        assert boom["_meta"]["openenv/reward"] == 0.25
        assert boom["_meta"]["openenv/reward_components"] == {"fragile": 0.25}
        assert "kaput" in boom["_meta"]["openenv/reward_details"]["error"]
        assert ok["_meta"] == {"openenv/reward": 0.5, "openenv/done": False,
                               "openenv/reward_components": {"fragile": 0.5}}
    # Upstream's dialect (no initialize): the same bytes with the rubric as without.
    assert upstream_bodies[0] == upstream_bodies[1]
