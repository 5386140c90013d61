"""verifiers' own OpenEnv code path (``verifiers.v1.tasksets.openenv``) against envs of ours.

``vf-eval`` runs verifiers' ``OpenEnvEnv`` on ``OpenEnvTaskset`` tasks, as a user runs it: the
engine opens verifiers' client on our server (``GenericEnvClient(base_url=...)``, or
``await GenericEnvClient.from_env(name, use_docker=False)``, which starts the env installed here),
reads ``GET /schema`` (a tool env is one whose action schema is titled ``Action``: verifiers then
lists the tools), resets, and steps with each reply of the model. The model is a local
OpenAI-compatible server (``FakeChatServer``, 127.0.0.1) that plays well: the shortest path on
grid_world, a tool call on echo_mcp. The player runs verifiers' ``null`` harness (a plain chat
program) in its ``subprocess`` runtime. Runs in ``nox -s verifiers``; skipped where verifiers is
not installed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verifiers.v1.tasksets.openenv", reason="needs verifiers (nox -s verifiers)")

from openenv.client import GenericEnvClient
from openenv.testing import wait_until
from openenv_rubrics.testing import FakeChatServer, Reply

_DELTAS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def _shortest_path(observation: dict[str, Any]) -> list[str]:
    """The moves from the agent to the goal on grid_world's map (breadth-first)."""
    grid, goal = observation["grid"], tuple(observation["goal"])
    start = tuple(observation["position"])
    came: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    todo = deque([start])
    while todo:
        here = todo.popleft()
        if here == goal:
            break
        for move, (dr, dc) in _DELTAS.items():
            r, c = here[0] + dr, here[1] + dc
            if 0 <= r < len(grid) and 0 <= c < len(grid[0]) and grid[r][c] != "#" and (r, c) not in came:
                came[(r, c)] = (here, move)
                todo.append((r, c))
    moves: list[str] = []
    at: tuple[int, int] = goal
    while came[at] is not None:
        at, move = came[at]  # type: ignore[misc]
        moves.append(move)
    return moves[::-1]


def _payload(body: dict[str, Any]) -> dict[str, Any]:
    """What verifiers' engine sent as the user turn: ``{"observation", "action_schema"}``."""
    content = body["messages"][-1]["content"]
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content)
    doc: dict[str, Any] = json.loads(content)
    return doc


def _player(body: dict[str, Any], _n: int) -> Reply:
    doc = _payload(body)
    tools = doc["action_schema"].get("available_tools")
    if tools:  # a tool env: call its first tool, as the action schema says
        return Reply(json.dumps({"type": "call_tool", "tool_name": tools[0]["name"],
                                 "arguments": {"message": "hello verifiers"}}))
    return Reply(json.dumps({"move": _shortest_path(doc["observation"])[0]}))


@pytest.fixture
def model() -> Iterator[FakeChatServer]:
    with FakeChatServer(_player) as server:
        yield server


@pytest.fixture
def served_grid(tmp_path: Path) -> Iterator[str]:
    """``openenv serve grid_world`` without a token: verifiers reads ``/schema`` with no credentials."""
    ready = tmp_path / "ready.json"
    env = {k: v for k, v in os.environ.items() if k != "OPENENV_TOKEN"}
    proc = subprocess.Popen([sys.executable, "-m", "openenv", "serve", "grid_world", "--port", "0",
                             "--ready-file", str(ready)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=env)
    try:
        wait_until(lambda: ready.exists() or proc.poll() is not None, timeout_s=30)
        assert ready.exists(), proc.stderr.read().decode() if proc.stderr else "server did not start"
        yield f"http://127.0.0.1:{json.loads(ready.read_text())['port']}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)


def _near_goal_seeds(base_url: str, count: int) -> dict[int, float]:
    """Seeds whose start is one or two moves from the goal (short episodes: each model turn of
    verifiers' harness is a process of its own), with the reward the shortest path earns."""
    found: dict[int, float] = {}
    with GenericEnvClient(base_url).sync() as client:
        for seed in range(200):
            result = client.reset(seed=seed)
            path = _shortest_path(result.observation)
            if not 1 <= len(path) <= 2:
                continue
            total = 0.0
            for move in path:
                result = client.step({"move": move})
                total += result.reward or 0.0
            assert result.done
            found[seed] = total
            if len(found) == count:
                return found
    raise AssertionError("grid_world has no start next to its goal")


def _vf_eval(tmp_path: Path, model: FakeChatServer, taskset: dict[str, Any], *,
             max_turns: int | None = None) -> list[dict[str, Any]]:
    """Run ``vf-eval`` (verifiers' CLI, in a subprocess) on the ``openenv`` taskset; its traces."""
    def value(v: Any) -> str:  # the JSON spelling of strings, numbers and booleans is TOML's too
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v)

    lines = ['model = "scripted"', "push = false", f"output_dir = {value(str(tmp_path / 'out'))}",
             "[env.taskset]", 'id = "openenv"', *(f"{k} = {value(v)}" for k, v in taskset.items()),
             "[env.player]", *([f"max_turns = {max_turns}"] if max_turns else []),
             "[env.player.runtime]", 'type = "subprocess"', "[env.player.harness]", 'id = "null"',
             "[client]", f"base_url = {value(model.url)}"]
    config = tmp_path / "eval.toml"
    config.write_text("\n".join(lines) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENENV_TOKEN"}
    env.update(OPENENV_STATE_DIR=str(tmp_path / "state"), NO_COLOR="1")
    done = subprocess.run([sys.executable, "-c", "from verifiers.v1.cli.eval.main import main; main()",
                           "@", str(config), "--no-rich"], capture_output=True, text=True, timeout=240,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    traces = [json.loads(line) for path in (tmp_path / "out").glob("*/traces.jsonl")
              for line in path.read_text().splitlines() if line.strip()]
    assert traces, done.stderr[-4000:]
    return traces


def _reward(episode: dict[str, Any]) -> float:
    (trace,) = episode["traces"]
    return float(trace["rewards"]["openenv_reward"]["score"])


def _seed(episode: dict[str, Any]) -> int:
    return int(episode["task"]["data"]["reset"]["seed"])


def test_taskset_plays_a_served_env_and_scores_its_rewards(tmp_path: Path, model: FakeChatServer,
                                                           served_grid: str) -> None:
    expected = _near_goal_seeds(served_grid, 2)
    episodes = _vf_eval(tmp_path, model, {"base_url": served_grid,
                                          "resets": [{"seed": s} for s in expected]})
    assert sorted(_seed(e) for e in episodes) == sorted(expected)
    for episode in episodes:
        assert episode["ok"], episode["errors"]
        # the engine summed the step rewards our server sent, for the moves the model chose
        assert _reward(episode) == pytest.approx(expected[_seed(episode)])
    first = _payload(model.requests[0])
    assert first["action_schema"]["title"] == "GridAction" and "legal_actions" in first["observation"]


def test_taskset_starts_an_installed_env_through_from_env(tmp_path: Path, model: FakeChatServer,
                                                          served_grid: str) -> None:
    # from_env is awaited on `openenv.GenericEnvClient` itself (not the compat layer's class)
    expected = _near_goal_seeds(served_grid, 1)
    episodes = _vf_eval(tmp_path, model, {"env": "grid_world", "resets": [{"seed": s} for s in expected]})
    (episode,) = episodes
    assert episode["ok"], episode["errors"]
    assert _reward(episode) == pytest.approx(next(iter(expected.values())))


def test_a_tool_env_is_recognised_and_its_tools_are_called(tmp_path: Path, model: FakeChatServer) -> None:
    episodes = _vf_eval(tmp_path, model, {"env": "echo_mcp"}, max_turns=2)
    (episode,) = episodes
    first = _payload(model.requests[0])
    # title "Action": verifiers listed the tools and showed the model how to call them
    assert {t["name"] for t in first["action_schema"]["available_tools"]} == {"echo_message", "echo_with_length"}
    assert first["action_schema"]["title"] == "CallToolAction"
    later = _payload(model.requests[1])  # the observation after the model's tool call
    assert later["observation"]["tool_name"] == "echo_message"
    assert "hello verifiers" in json.dumps(later["observation"]["result"])
    assert not episode["errors"]
