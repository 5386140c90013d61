"""The coding env: tasks, grading in the sandbox, the plain action, the MCP tools, the budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import openenv_env_coding.plugin
from openenv.errors import ValidationError
from openenv.sessions import SessionManager
from openenv.testing import EnvContract, check_registered
from openenv.tools import CallToolAction, CallToolObservation, ListToolsAction
from openenv_env_coding.env import CodeAction, CodingEnv, CodingObservation
from openenv_env_coding.tasks import TaskError, TestOutcome, load_tasks, pass_rate

SOLUTIONS = {
    "add": "def add(a, b):\n    return a + b\n",
    "reverse_string": "def reverse_string(s):\n    return s[::-1]\n",
    "fizzbuzz": ("def fizzbuzz(n):\n    return 'FizzBuzz' if n % 15 == 0 else 'Fizz' if n % 3 == 0 "
                 "else 'Buzz' if n % 5 == 0 else str(n)\n"),
    "is_palindrome": "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n",
    "fibonacci": "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
    "count_vowels": "def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)\n",
    "flatten": ("def flatten(xs):\n    out = []\n    for x in xs:\n"
                "        out.extend(flatten(x) if isinstance(x, list) else [x])\n    return out\n"),
    "two_sum": ("def two_sum(nums, target):\n    seen = {}\n    for j, x in enumerate(nums):\n"
                "        if target - x in seen:\n            return (seen[target - x], j)\n"
                "        seen[x] = j\n    return None\n"),
    "word_count": ("def word_count(text):\n    out = {}\n    for w in text.lower().split():\n"
                   "        out[w] = out.get(w, 0) + 1\n    return out\n"),
    "gcd": "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a\n",
    "is_prime": ("def is_prime(n):\n    if n < 2:\n        return False\n    i = 2\n    while i * i <= n:\n"
                 "        if n % i == 0:\n            return False\n        i += 1\n    return True\n"),
    "run_length_encode": ("def rle(s):\n    out = []\n    for c in s:\n        if out and out[-1][0] == c:\n"
                          "            out[-1] = (c, out[-1][1] + 1)\n        else:\n            out.append((c, 1))\n"
                          "    return out\n"),
    "roman_to_int": ("def roman_to_int(s):\n    v = dict(I=1, V=5, X=10, L=50, C=100, D=500, M=1000)\n"
                     "    return sum(-v[a] if v[a] < v[b] else v[a] for a, b in zip(s, s[1:])) + v[s[-1]]\n"),
    "merge_sorted": "def merge_sorted(a, b):\n    return sorted(a + b)\n",
}


@pytest.fixture(scope="module")
def env() -> CodingEnv:
    return CodingEnv()


def test_registered_lazily_as_coding_with_a_manifest() -> None:
    check_registered(openenv_env_coding.plugin, "coding", "openenv_env_coding.env:CodingEnv")
    assert Path(openenv_env_coding.plugin.MANIFEST).is_file()


def test_pass_rate() -> None:
    assert pass_rate([]) == 0.0
    assert pass_rate([True, False, True, True]) == 0.75
    assert pass_rate([TestOutcome("t", True), TestOutcome("u", False)]) == 0.5


def test_builtin_tasks_are_fourteen_and_every_one_is_solvable(env: CodingEnv) -> None:
    tasks = load_tasks()
    assert len(tasks) == 14 and {t.id for t in tasks} == set(SOLUTIONS)
    for task in tasks:
        env.reset(task_id=task.id)
        obs = env.step(CodeAction(code=SOLUTIONS[task.id], submit=True))
        assert obs.done and obs.reward == 1.0, (task.id, obs)
        env.reset(task_id=task.id)
        starter = env.step(CodeAction(code=task.starter, submit=True))
        assert starter.done and starter.reward is not None and starter.reward < 1.0, task.id


def test_write_run_fix_submit(env: CodingEnv) -> None:
    obs = env.reset(task_id="fizzbuzz")
    assert isinstance(obs, CodingObservation) and obs.steps_left == 10 and "fizzbuzz" in obs.prompt
    ran = env.step(CodeAction(code="def fizzbuzz(n):\n    return str(n)\nprint(fizzbuzz(3))"))
    assert ran.stdout == "3\n" and ran.exit_code == 0 and ran.reward == 0.0 and not ran.done
    crashed = env.step(CodeAction(code="def fizzbuzz(n):\n    return n +\n"))
    assert crashed.exit_code == 1 and "SyntaxError" in crashed.stderr
    partial = env.step(CodeAction(code="def fizzbuzz(n):\n    return 'Fizz' if n % 3 == 0 else str(n)\n", submit=True))
    assert partial.done and partial.tests_passed == 2 and partial.tests_total == 5 and partial.reward == 0.4
    after = env.step(CodeAction(code="print(1)"))
    assert after.done and "episode is over" in after.stderr


def test_mcp_tools(env: CodingEnv) -> None:
    env.reset(task_id="add")
    listed = env.step(ListToolsAction())
    assert [t.name for t in listed.tools] == ["run_code", "run_tests", "submit"]
    ran = env.step(CallToolAction(tool_name="run_code", arguments={"code": "print('hi')"}))
    assert isinstance(ran, CallToolObservation) and ran.result["data"]["stdout"] == "hi\n" and ran.reward == 0.0
    tests = env.step(CallToolAction(tool_name="run_tests", arguments={"code": "def add(a, b):\n    return 5\n"}))
    assert tests.result["data"]["passed"] == 1 and tests.result["data"]["total"] == 1  # examples only
    sub = env.step(CallToolAction(tool_name="submit", arguments={"code": "def add(a, b):\n    return 5\n"}))
    assert sub.done and sub.reward == 0.25 and sub.result["data"] == {"passed": 1, "total": 4, "reward": 0.25}


def test_the_step_budget_grades_the_last_code() -> None:
    env = CodingEnv(max_steps=2)
    env.reset(task_id="add")
    first = env.step(CodeAction(code=SOLUTIONS["add"]))
    assert not first.done
    second = env.step(ListToolsAction())
    assert second.done and second.reward == 1.0 and second.metadata["budget_exhausted"] is True


def test_tasks_file_and_bad_task_input(tmp_path: Path) -> None:
    good = tmp_path / "tasks.jsonl"
    good.write_text(json.dumps({"id": "sq", "prompt": "square(x)", "tests": ["assert square(3) == 9"]}) + "\n")
    env = CodingEnv(tasks_file=str(good))
    assert env.reset().task_id == "sq"
    assert env.step(CodeAction(code="def square(x):\n    return x * x\n", submit=True)).reward == 1.0
    with pytest.raises(ValidationError, match="Did you mean 'sq'"):
        env.reset(task_id="sqq")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "prompt": "p"}\n')
    with pytest.raises(TaskError, match="missing field"):
        load_tasks(bad)
    bad.write_text('{"id": "x", "prompt": "p", "tests": ["pass"], "hint": 1}\n')
    with pytest.raises(TaskError, match="unknown field"):
        load_tasks(bad)
    with pytest.raises(TaskError, match="cannot read"):
        load_tasks(tmp_path / "missing.jsonl")


def test_keeps_the_kit_env_contract() -> None:  # served too, when a client transport is installed
    assert "check_concurrent_sessions" in EnvContract(CodingEnv).run()  # run() raises on a broken check


async def test_sessions_through_the_session_manager_are_independent() -> None:
    manager = SessionManager(CodingEnv, max_sessions=4, idle_timeout_s=None)
    try:
        sessions = [await manager.open() for _ in range(4)]
        for i, s in enumerate(sessions):
            await manager.reset(s, {"task_id": "add", "episode_id": f"ep-{i}"})
        results = [await manager.step(s, {"code": f"print({i})"}) for i, s in enumerate(sessions)]
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(4)]
        with pytest.raises(ValidationError):
            await manager.step(sessions[0], {"cod": "print(1)"})
        after = await manager.step(sessions[0], {"code": "print('still fine')"})
        assert after.stdout == "still fine\n"
    finally:
        await manager.shutdown()
