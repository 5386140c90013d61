"""Dynamics of the grid world: walls, edges, goal, truncation, seeds, legal actions."""

from __future__ import annotations

import pytest

from openenv.env import env_traits
from openenv.sessions import SessionManager
from openenv_env_grid_world import DEFAULT_LAYOUT, MOVES, GridAction, GridWorldEnv

# A corridor: start at the left, goal at the right, a wall below the middle.
CORRIDOR = ("S.G", ".#.")


def step(env: GridWorldEnv, move: str):
    return env.step(GridAction(move=move))


def test_reset_starts_at_s_with_a_rendered_map() -> None:
    env = GridWorldEnv()
    obs = env.reset(episode_id="ep")
    assert obs.position == [0, 0] and obs.goal == [4, 4]
    assert obs.grid == ["A....", ".##..", "...#.", ".#...", "...#G"]
    assert obs.reward == 0.0 and obs.done is False and obs.truncated is False
    assert obs.legal_actions == ["down", "right"]
    state = env.state
    assert state.episode_id == "ep" and state.step_count == 0 and state.position == [0, 0]


def test_moving_into_a_wall_or_edge_stays_and_is_penalised() -> None:
    env = GridWorldEnv(step_penalty=-0.25)
    env.reset()
    obs = step(env, "up")  # edge
    assert obs.position == [0, 0] and obs.reward == -0.25 and obs.metadata["blocked"] is True
    obs = step(env, "right")
    assert obs.position == [0, 1] and obs.metadata["blocked"] is False
    obs = step(env, "down")  # wall at (1, 1)
    assert obs.position == [0, 1] and obs.reward == -0.25 and obs.metadata["blocked"] is True
    assert env.state.step_count == 3


def test_reaching_the_goal_rewards_and_ends() -> None:
    env = GridWorldEnv()
    env.reset()
    rewards = [step(env, m).reward for m in ["right"] * 4 + ["down"] * 3]
    assert rewards == [-0.01] * 7
    obs = step(env, "down")
    assert obs.position == [4, 4] and obs.reward == 1.0
    assert obs.done is True and obs.truncated is False
    assert obs.legal_actions == []
    assert obs.grid[4] == "...#A"
    assert env.state.done is True
    with pytest.raises(RuntimeError, match="reset"):
        step(env, "up")


def test_truncation_after_max_steps() -> None:
    env = GridWorldEnv(max_steps=3)
    env.reset()
    assert [step(env, "up").done for _ in range(2)] == [False, False]
    obs = step(env, "up")
    assert obs.done is True and obs.truncated is True and obs.reward == -0.01
    assert obs.legal_actions == []
    # The last allowed step reaching the goal is a success, not a truncation.
    env = GridWorldEnv(CORRIDOR, max_steps=2)
    env.reset()
    step(env, "right")
    obs = step(env, "right")
    assert obs.done and not obs.truncated and obs.reward == 1.0


def test_seeded_reset_is_reproducible_and_varies_with_the_seed() -> None:
    def episode(seed: int) -> list[tuple[list[int], float]]:
        env = GridWorldEnv()
        obs = env.reset(seed=seed)
        trace = [(obs.position, obs.reward)]
        for move in ["left", "down", "right", "down", "up"]:
            if obs.done:
                break
            obs = step(env, move)
            trace.append((obs.position, obs.reward))
        return trace

    assert episode(7) == episode(7)
    starts = {tuple(episode(s)[0][0]) for s in range(30)}
    assert len(starts) > 3  # seeds actually change the start
    walls = {(r, c) for r, row in enumerate(DEFAULT_LAYOUT) for c, ch in enumerate(row) if ch == "#"}
    assert not starts & walls and (4, 4) not in starts


def test_legal_actions_are_exactly_the_unblocked_moves() -> None:
    env = GridWorldEnv()
    for seed in range(40):
        obs = env.reset(seed=seed)
        for move in MOVES:
            probe = GridWorldEnv()
            probe.reset(seed=seed)
            moved = probe.step(GridAction(move=move))
            assert (move in obs.legal_actions) == (not moved.metadata["blocked"]), (seed, move)


def test_invalid_moves_and_layouts_are_refused() -> None:
    with pytest.raises(ValueError):
        GridAction.model_validate({"move": "jump"})
    with pytest.raises(ValueError, match="same length"):
        GridWorldEnv(("S.", "..G"))
    with pytest.raises(ValueError, match="'S'"):
        GridWorldEnv(("...", "..G"))
    with pytest.raises(RuntimeError, match="reset"):
        GridWorldEnv().step(GridAction(move="up"))


def test_declared_traits_allow_inline_concurrent_sessions() -> None:
    traits = env_traits(GridWorldEnv)
    assert traits["SUPPORTS_CONCURRENT_SESSIONS"] and not traits["BLOCKING"]


async def test_sessions_are_independent() -> None:
    manager = SessionManager(GridWorldEnv, env_name="grid_world", max_sessions=2)
    a, b = await manager.open(), await manager.open()
    try:
        await manager.reset(a, {"episode_id": "a"})
        await manager.reset(b, {"episode_id": "b"})
        await manager.step(a, {"move": "right"})
        assert (await manager.state(a))["position"] == [0, 1]
        assert (await manager.state(b))["position"] == [0, 0]
    finally:
        await manager.shutdown()


def test_plugin_registration() -> None:
    from openenv.testing import check_registered
    from openenv_env_grid_world import plugin

    entry, _ = check_registered(plugin, "grid_world", "openenv_env_grid_world.env:GridWorldEnv")
    assert entry.load() is GridWorldEnv
