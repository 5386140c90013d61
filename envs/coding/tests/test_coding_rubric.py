"""The served coding env's reward comes from its declared rubric, the rubrics package's
``code_tests`` (``CodeTestPassRate``), and ``--rubric code_tests=...`` can replace it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import openenv_rubrics.plugin
from openenv.client import GenericEnvClient
from openenv.plugins import PluginManager
from openenv.testing import live_server
from openenv_env_coding.env import TESTS_FIELD, CodingEnv
from openenv_rubrics.builtin import CodeTestPassRate

pytestmark = pytest.mark.requires_plugins("transport-ws")

PARTIAL = "def fizzbuzz(n):\n    return 'Fizz' if n % 3 == 0 else str(n)\n"  # 2 of 5 hidden tests
WRONG_ADD = "def add(a, b):\n    return 5\n"  # 1 of 4


def _serve(env: Any, **settings: Any) -> Any:
    from openenv_transport_ws import plugin as ws

    pm = PluginManager(strict=True, entry_points=[])
    pm.register(ws)
    pm.register(openenv_rubrics.plugin)  # the registry `--rubric NAME` resolves against
    return live_server(env, transports=["ws"], plugin_manager=pm, max_sessions=2, **settings)


async def _episode(url: str) -> list[Any]:
    async with GenericEnvClient(url) as env:
        out = [await env.reset(task_id="fizzbuzz")]
        out.append(await env.step({"code": "print(1)"}))
        out.append(await env.step({"code": PARTIAL, "submit": True}))
        await env.reset(task_id="add")
        out.append(await env.step({"type": "call_tool", "tool_name": "run_code", "arguments": {"code": "print(2)"}}))
        out.append(await env.step({"type": "call_tool", "tool_name": "submit", "arguments": {"code": WRONG_ADD}}))
        return out


def test_the_env_declares_the_packages_code_tests_rubric() -> None:
    assert isinstance(CodingEnv.rubric, CodeTestPassRate) and CodingEnv.rubric.name == "pass_rate"
    assert CodingEnv.rubric.results.text == TESTS_FIELD == "observation.metadata.tests"


def test_the_served_reward_and_its_components_come_from_the_rubric() -> None:
    with _serve(CodingEnv) as srv:
        reset, ran, submitted, tool_ran, tool_submitted = asyncio.run(_episode(srv.url))
    assert reset.reward_components == {}
    assert (ran.reward, ran.reward_components) == (0.0, {"pass_rate": 0.0})  # graded nothing
    assert submitted.done and submitted.reward == 0.4
    assert submitted.reward_components == {"pass_rate": 0.4, "pass_rate.passed": 2.0, "pass_rate.total": 5.0}
    assert submitted.observation["metadata"]["tests"] == {"passed": 2, "total": 5}
    assert (tool_ran.reward, tool_ran.reward_components) == (0.0, {"pass_rate": 0.0})
    assert tool_submitted.done and tool_submitted.reward == 0.25  # the MCP submit tool
    assert tool_submitted.reward_components == {"pass_rate": 0.25, "pass_rate.passed": 1.0,
                                                "pass_rate.total": 4.0}


def test_a_code_tests_rubric_from_the_command_line_scores_the_env() -> None:  # what --rubric passes
    spec = "code_tests=results=observation.metadata.tests,missing_score=0,all_or_nothing=true"
    with _serve(CodingEnv, rubric=spec) as srv:
        _, ran, submitted, _, tool_submitted = asyncio.run(_episode(srv.url))
    assert ran.reward_components == {"code_tests": 0.0}
    # all or nothing: 2 of 5 is 0.0 where the env's own reward is 0.4
    assert (submitted.reward, submitted.reward_components) == (0.0, {"code_tests": 0.0})
    assert tool_submitted.reward == 0.0


def test_an_exhausted_budget_is_graded_and_scored() -> None:
    class Short(CodingEnv):
        def __init__(self) -> None:
            super().__init__(max_steps=1)

    async def play(url: str) -> Any:
        async with GenericEnvClient(url) as env:
            await env.reset(task_id="add")
            return await env.step({"code": "def add(a, b):\n    return a + b\n"})

    with _serve(Short) as srv:
        last = asyncio.run(play(srv.url))
    assert last.done and last.reward == 1.0 and last.observation["metadata"]["budget_exhausted"] is True
    assert last.reward_components == {"pass_rate": 1.0, "pass_rate.passed": 4.0, "pass_rate.total": 4.0}
