"""The maze: generation, walls, exit, truncation, seeds, bad input, the oracle, the README, serving."""

from __future__ import annotations

from collections import deque
from pathlib import Path

import pytest

from openenv.env import env_traits
from openenv.errors import ValidationError
from openenv.sessions import SessionManager
from openenv.testing import (
    EnvContract,
    check_registered,
    exec_snippet,
    readme_snippets,
    served_cli,
)
from openenv_env_maze import MazeAction, MazeEnv, generate_maze
from openenv_env_maze.oracle import shortest_path, solve

README = Path(__file__).resolve().parents[1] / "README.md"


def open_squares(grid: list[str]) -> set[tuple[int, int]]:
    return {(r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch != "#"}


def test_generated_maze_is_perfect_and_reproducible() -> None:
    for seed in range(15):
        for rows, cols in ((2, 2), (5, 5), (4, 9)):
            grid = generate_maze(rows, cols, seed)
            assert grid == generate_maze(rows, cols, seed)
            assert len(grid) == 2 * rows + 1 and {len(row) for row in grid} == {2 * cols + 1}
            assert all(ch == "#" for ch in grid[0] + grid[-1]) and all(r[0] == r[-1] == "#" for r in grid)
            squares = open_squares(grid)
            # connected: every cell reachable from the corner ...
            seen, queue = {(1, 1)}, deque([(1, 1)])
            while queue:
                r, c = queue.popleft()
                for nxt in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                    if nxt in squares and nxt not in seen:
                        seen.add(nxt)
                        queue.append(nxt)
            assert seen == squares
            # ... and a tree: open squares = 2*cells - 1 (cells plus one passage per tree edge)
            assert len(squares) == 2 * rows * cols - 1
    assert generate_maze(6, 6, 1) != generate_maze(6, 6, 2)
    with pytest.raises(ValueError, match="from 2 to"):
        generate_maze(1, 5, 0)


def test_reset_builds_the_maze_of_the_seed_and_size() -> None:
    env = MazeEnv()
    obs = env.reset(seed=4, size=[3, 5], episode_id="ep")
    assert obs.position == [1, 1] and obs.goal == [5, 9]
    assert len(obs.grid) == 7 and obs.grid[1][1] == "A" and obs.grid[5][9] == "E"
    expected = generate_maze(3, 5, 4)
    assert [row.replace("A", ".").replace("E", ".") for row in obs.grid] == expected
    assert obs.reward == 0.0 and not obs.done and obs.steps_left == 8 * 15
    state = env.state
    assert (state.episode_id, state.size, state.seed, state.step_count) == ("ep", [3, 5], 4, 0)
    assert len(env.reset(seed=4, size=8).grid) == 17
    assert len(env.reset(seed=4).grid) == 13  # default 6x6 cells


def test_legal_actions_are_exactly_the_unblocked_moves() -> None:
    env = MazeEnv()
    for seed in range(20):
        obs = env.reset(seed=seed, size=4)
        taken: list[str] = []
        for _ in range(15):
            legal = {a["move"] for a in obs.legal_actions}
            assert legal  # a perfect maze has no isolated square
            for move in ("up", "down", "left", "right"):
                probe = MazeEnv()
                probe.reset(seed=seed, size=4)
                for earlier in taken:
                    probe.step(MazeAction(move=earlier))
                moved = probe.step(MazeAction(move=move))
                assert (move in legal) == (not moved.metadata["blocked"]), (seed, move)
            choice = sorted(legal)[seed % len(legal)]
            obs = env.step(MazeAction(move=choice))
            taken.append(choice)
            if obs.done:
                break


def test_walls_block_and_cost_the_step_penalty() -> None:
    env = MazeEnv(step_penalty=-0.5)
    obs = env.reset(seed=0, size=3)
    obs = env.step(MazeAction(move="up"))  # the border is always wall
    assert obs.position == [1, 1] and obs.reward == -0.5 and obs.metadata["blocked"] is True
    assert env.state.step_count == 1 and not obs.done


def test_oracle_reaches_the_exit_with_the_best_return() -> None:
    env = MazeEnv()
    for seed in range(10):
        for size in (2, 5, [7, 11]):
            obs = env.reset(seed=seed, size=size)
            path = shortest_path(obs.grid, obs.position, obs.goal)
            total = 0.0
            while not obs.done:
                obs = env.step(MazeAction(**solve(obs.model_dump())))
                total += obs.reward or 0.0
            assert obs.position == obs.goal and not obs.truncated and obs.legal_actions == []
            assert env.state.step_count == len(path)
            assert total == pytest.approx(1.0 - 0.01 * (len(path) - 1))


def test_truncation_after_max_steps() -> None:
    env = MazeEnv()
    obs = env.reset(seed=1, size=6, max_steps=3)
    for _ in range(3):
        obs = env.step(MazeAction(move="up"))
    assert obs.done and obs.truncated and obs.steps_left == 0 and obs.legal_actions == []


def test_same_seed_same_episode() -> None:
    def episode(seed: int) -> list[object]:
        env = MazeEnv()
        obs = env.reset(seed=seed, size=5)
        out: list[object] = [obs.grid]
        for i in range(30):
            if obs.done:
                break
            obs = env.step(MazeAction(**obs.legal_actions[i % len(obs.legal_actions)]))
            out.append((obs.position, obs.reward))
        return out

    assert episode(11) == episode(11)
    assert episode(11) != episode(12)


def test_bad_input_is_a_structured_error() -> None:
    env = MazeEnv()
    with pytest.raises(ValidationError, match="reset"):
        env.step(MazeAction(move="up"))
    with pytest.raises(ValueError):
        MazeAction.model_validate({"move": "jump"})
    for size in (1, 41, "big", [3], [2, True]):
        with pytest.raises(ValidationError, match="size") as info:
            env.reset(size=size)
        assert info.value.errors[0]["loc"] == ["size"]
    with pytest.raises(ValidationError, match="accepts size"):
        env.reset(colour="red")
    with pytest.raises(ValidationError, match="max_steps"):
        env.reset(max_steps=0)
    obs = env.reset(seed=2, size=2)
    while not obs.done:
        obs = env.step(MazeAction(**solve(obs)))
    with pytest.raises(ValidationError, match="reset") as info:
        env.step(MazeAction(move="up"))
    assert info.value.code == "VALIDATION_ERROR" and info.value.errors[0]["type"] == "episode_over"


async def test_sessions_are_independent_and_errors_keep_them_alive() -> None:
    assert env_traits(MazeEnv)["SUPPORTS_CONCURRENT_SESSIONS"] and not env_traits(MazeEnv)["BLOCKING"]
    manager = SessionManager(MazeEnv, env_name="maze", max_sessions=2)
    a, b = await manager.open(), await manager.open()
    try:
        obs_a = await manager.reset(a, {"seed": 1, "size": 3})
        await manager.reset(b, {"seed": 1, "size": 3})
        move = solve(obs_a)
        await manager.step(a, move)
        with pytest.raises(ValidationError):
            await manager.step(a, {"move": "sideways"})
        assert (await manager.state(a))["step_count"] == 1
        assert (await manager.state(b))["position"] == [1, 1]
    finally:
        await manager.shutdown()


def test_keeps_the_kit_env_contract() -> None:  # served too, when a client transport is installed
    assert "check_concurrent_sessions" in EnvContract(MazeEnv).run()  # run() raises on a broken check


def test_readme_example_runs() -> None:
    blocks = readme_snippets(README)
    assert len(blocks) == 1
    namespace = exec_snippet(blocks[0], filename=README)
    assert isinstance(namespace["total"], float) and namespace["total"] > 0.5


def test_readme_picture_is_the_maze_of_its_seed() -> None:
    text = README.read_text(encoding="utf-8")
    picture = [line.split()[0] for line in text.split("```\n", 2)[1].splitlines()]
    assert picture == MazeEnv().reset(seed=1, size=4).grid


def test_plugin_registration() -> None:
    from openenv_env_maze import plugin

    entry, _ = check_registered(plugin, "maze", "openenv_env_maze.env:MazeEnv")
    assert entry.load() is MazeEnv


@pytest.mark.requires_plugins("transport-ws")
@pytest.mark.slow
def test_served_errors_are_structured_and_the_server_keeps_serving(tmp_path: Path) -> None:
    from openenv.client import GenericEnvClient

    with (served_cli("maze", tmp_path=tmp_path, max_sessions=4) as url,
          GenericEnvClient(url).sync() as one, GenericEnvClient(url).sync() as two):
        result = one.reset(seed=1, size=2)
        two.reset(seed=1, size=2)
        with pytest.raises(ValidationError) as info:  # refused by the action model, on the server
            one.step({"move": "fly"})
        assert info.value.errors and info.value.errors[0]["loc"][-1] == "move"
        with pytest.raises(ValidationError, match="size must be"):
            one.reset(size=99)
        result = one.reset(seed=1, size=2)
        while not result.done:
            result = one.step(solve(result.observation))
        assert result.reward == 1.0
        with pytest.raises(ValidationError, match="call reset") as info:
            one.step({"move": "up"})
        assert info.value.errors[0]["type"] == "episode_over"
        assert two.step({"move": "up"}).observation["metadata"]["blocked"] is True  # the other session goes on
        assert one.reset(seed=2, size=3).observation["position"] == [1, 1]
