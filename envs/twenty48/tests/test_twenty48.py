"""2048: slides and merges, spawns, legal moves, seeds, bad input, the baselines, the README and
serving."""

from __future__ import annotations

import random
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
from openenv_env_twenty48 import Twenty48Action, Twenty48Env, greedy_move, lookahead_move, slide_row
from openenv_env_twenty48.board import legal_moves, move, spawn

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.parametrize(("row", "expected", "points"), [
    ([2, 2, 2, 2], [4, 4, 0, 0], 8),
    ([2, 2, 4, 4], [4, 8, 0, 0], 12),
    ([4, 4, 8, 0], [8, 8, 0, 0], 8),   # a merged tile does not merge again in the same move
    ([2, 2, 2, 0], [4, 2, 0, 0], 4),   # the pair nearest the wall merges first
    ([0, 2, 2, 2], [4, 2, 0, 0], 4),
    ([2, 0, 0, 2], [4, 0, 0, 0], 4),
    ([2, 4, 2, 4], [2, 4, 2, 4], 0),
    ([0, 0, 0, 2], [2, 0, 0, 0], 0),
    ([8, 8, 16, 16], [16, 32, 0, 0], 48),
    ([0, 0, 0, 0], [0, 0, 0, 0], 0),
])
def test_slide_row(row: list[int], expected: list[int], points: int) -> None:
    assert slide_row(row) == (expected, points)


def test_moves_in_every_direction() -> None:
    grid = [[2, 2, 2, 2], [0, 4, 0, 4], [2, 0, 0, 0], [2, 4, 8, 16]]
    assert move(grid, "left") == ([[4, 4, 0, 0], [8, 0, 0, 0], [2, 0, 0, 0], [2, 4, 8, 16]], 16)
    assert move(grid, "right") == ([[0, 0, 4, 4], [0, 0, 0, 8], [0, 0, 0, 2], [2, 4, 8, 16]], 16)
    assert move(grid, "up") == ([[4, 2, 2, 2], [2, 8, 8, 4], [0, 0, 0, 16], [0, 0, 0, 0]], 12)
    assert move(grid, "down") == ([[0, 0, 0, 0], [0, 0, 0, 2], [2, 2, 2, 4], [4, 8, 8, 16]], 12)
    assert grid == [[2, 2, 2, 2], [0, 4, 0, 4], [2, 0, 0, 0], [2, 4, 8, 16]]  # not changed in place
    stuck = [[2, 4, 2, 4], [4, 2, 4, 2], [2, 4, 2, 4], [4, 2, 4, 2]]
    assert legal_moves(stuck) == []
    assert legal_moves([[2, 4, 2, 4], [4, 2, 4, 2], [2, 4, 2, 4], [4, 2, 8, 8]]) == ["left", "right"]


def test_spawns_are_seeded_twos_and_fours_on_empty_squares() -> None:
    values = []
    for seed in range(300):
        grid = [[2, 4, 8, 16], [0] * 4, [32, 0, 64, 0], [2] * 4]
        r, c, v = spawn(grid, random.Random(seed))  # type: ignore[misc]
        assert (r, c) in {(1, 0), (1, 1), (1, 2), (1, 3), (2, 1), (2, 3)} and grid[r][c] == v
        values.append(v)
    assert set(values) == {2, 4} and 10 < values.count(4) < 60
    assert spawn([[2] * 4 for _ in range(4)], random.Random(0)) is None


def test_a_step_slides_scores_and_spawns() -> None:
    env = Twenty48Env()
    obs = env.reset(seed=3, episode_id="ep")
    assert sum(v > 0 for row in obs.board for v in row) == 2 and obs.score == 0
    assert [a["move"] for a in obs.legal_actions] == legal_moves(obs.board)
    total = 0
    for _ in range(40):
        if obs.done:
            break
        before = obs.board
        choice = obs.legal_actions[0]["move"]
        expected, points = move(before, choice)
        obs = env.step(Twenty48Action(move=choice))
        r, c, v = obs.metadata["spawned"]
        assert expected[r][c] == 0
        expected[r][c] = v
        assert obs.board == expected and obs.reward == points
        total += points
        assert obs.score == total and obs.max_tile == max(max(row) for row in obs.board)
    state = env.state
    assert state.episode_id == "ep" and state.score == total and state.board == obs.board


def test_same_seed_same_game() -> None:
    def game(seed: int) -> list[list[list[int]]]:
        env = Twenty48Env()
        obs = env.reset(seed=seed)
        boards = [obs.board]
        for i in range(60):
            if obs.done:
                break
            obs = env.step(Twenty48Action(**obs.legal_actions[i % len(obs.legal_actions)]))
            boards.append(obs.board)
        return boards

    assert game(4) == game(4)
    assert game(4) != game(5)


def test_greedy_beats_random_play() -> None:
    env = Twenty48Env()
    greedy, rand = [], []
    for seed in range(8):
        rng = random.Random(seed)
        for scores, use_greedy in ((greedy, True), (rand, False)):
            obs = env.reset(seed=seed)
            while not obs.done:
                action = greedy_move(obs) if use_greedy else rng.choice(obs.legal_actions)
                obs = env.step(Twenty48Action(**action))
            assert not obs.legal_actions and legal_moves(obs.board) == []  # lost: no move left
            scores.append(obs.score)
    assert sum(greedy) > 2 * sum(rand), (greedy, rand)
    assert sum(g > r for g, r in zip(greedy, rand, strict=True)) >= 7


def test_lookahead_wins_with_the_target_tile() -> None:
    env = Twenty48Env()
    for seed in range(3):
        obs = env.reset(seed=seed, target=512)
        while not obs.done:
            obs = env.step(Twenty48Action(**lookahead_move(obs.model_dump())))
        assert obs.won and obs.max_tile == 512 and env.state.won and env.state.done


def test_bad_input_is_a_structured_error() -> None:
    env = Twenty48Env()
    with pytest.raises(ValidationError, match="reset"):
        env.step(Twenty48Action(move="up"))
    with pytest.raises(ValueError):
        Twenty48Action.model_validate({"move": "north"})
    for kwargs, match in (({"target": 1000}, "power of two"), ({"target": 4}, "power of two"),
                          ({"target": True}, "power of two"), ({"size": 5}, "accepts target")):
        with pytest.raises(ValidationError, match=match):
            env.reset(**kwargs)
    # A fresh board has a move that changes nothing for some seed: find one and try it.
    for seed in range(50):
        obs = env.reset(seed=seed)
        blocked = [m for m in ("up", "down", "left", "right") if {"move": m} not in obs.legal_actions]
        if blocked:
            break
    with pytest.raises(ValidationError, match=f"moving {blocked[0]} changes nothing; possible moves") as info:
        env.step(Twenty48Action(move=blocked[0]))
    assert info.value.errors[0]["type"] == "no_change" and env.state.step_count == 0
    obs = env.reset(seed=1, target=8)
    while not obs.done:
        obs = env.step(Twenty48Action(**greedy_move(obs)))
    assert obs.won
    with pytest.raises(ValidationError, match="game is over") as info:
        env.step(Twenty48Action(move="up"))
    assert info.value.errors[0]["type"] == "episode_over"


async def test_sessions_are_independent_and_errors_keep_them_alive() -> None:
    traits = env_traits(Twenty48Env)
    assert traits["SUPPORTS_CONCURRENT_SESSIONS"] and not traits["BLOCKING"]
    manager = SessionManager(Twenty48Env, env_name="2048", max_sessions=2)
    a, b = await manager.open(), await manager.open()
    try:
        first = await manager.reset(a, {"seed": 1})
        await manager.reset(b, {"seed": 1})
        await manager.step(a, first.legal_actions[0])
        with pytest.raises(ValidationError):
            await manager.step(a, {"move": "diagonal"})
        assert (await manager.state(a))["step_count"] == 1
        assert (await manager.state(b))["board"] == first.board
    finally:
        await manager.shutdown()


def test_keeps_the_kit_env_contract() -> None:  # served too, when a client transport is installed
    assert "check_concurrent_sessions" in EnvContract(Twenty48Env).run()  # run() raises on a broken check


def test_readme_example_runs() -> None:
    blocks = readme_snippets(README)
    assert len(blocks) == 1
    namespace = exec_snippet(blocks[0], filename=README)
    assert namespace["obs"].won  # type: ignore[attr-defined]


def test_plugin_registration() -> None:
    from openenv_env_twenty48 import plugin

    entry, _ = check_registered(plugin, "2048", "openenv_env_twenty48.env:Twenty48Env")
    assert entry.load() is Twenty48Env


@pytest.mark.requires_plugins("transport-ws")
@pytest.mark.slow
def test_served_errors_are_structured_and_the_server_keeps_serving(tmp_path: Path) -> None:
    from openenv.client import GenericEnvClient

    with (served_cli("2048", tmp_path=tmp_path, max_sessions=4) as url,
          GenericEnvClient(url).sync() as one, GenericEnvClient(url).sync() as two):
        with pytest.raises(ValidationError, match="power of two") as info:
            one.reset(target=1000)
        assert info.value.errors[0]["type"] == "bad_target"
        first = two.reset(seed=1)
        result = one.reset(seed=1, target=64)
        with pytest.raises(ValidationError) as info:
            one.step({"move": "north"})
        assert info.value.errors[0]["loc"][-1] == "move"
        while not result.done:
            legal = [a["move"] for a in result.observation["legal_actions"]]
            blocked = [m for m in ("up", "down", "left", "right") if m not in legal]
            if blocked:  # a move that changes nothing is refused, and the game goes on
                with pytest.raises(ValidationError, match="changes nothing"):
                    one.step({"move": blocked[0]})
            result = one.step(greedy_move(result.observation))
        assert result.observation["won"] and result.observation["max_tile"] == 64
        assert two.step(first.observation["legal_actions"][0]).observation["score"] >= 0
