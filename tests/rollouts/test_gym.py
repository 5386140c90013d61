"""The Gymnasium adapter: check_env on in-repo envs, spaces, terminated vs truncated, info, vector autoreset."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium", reason="install openenvkit-rollouts[gym] to test the Gymnasium adapter")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from openenv_rollouts.gym import OpenEnvGym, OpenEnvVectorEnv  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

#: Every in-repo env. Those in PENALIZE refuse some or most sampled actions (an illegal chess move,
#: a word not in the list, a filled sudoku cell, a 2048 move that changes nothing, an action outside
#: the wrapped env's space): they pass with ``invalid_action="penalize"``, the others with the
#: defaults. (2048 with "raise" passed or failed by the board a sampled move met.)
CHECKED = ["grid_world", "maze", "connect4", "2048", "echo", "echo_async", "echo_mcp", "sql", "shell",
           "coding", "reasoning_gym", "chess", "sudoku", "wordle", "openspiel", "gymnasium", "atari", "jupyter",
           "miniwob", "office", "harbor", "mujoco"]
PENALIZE = {"chess", "sudoku", "wordle", "openspiel", "gymnasium", "atari", "2048"}  # schemas wider than the legal set


def test_every_in_repo_env_is_checked() -> None:
    from openenv.plugins import get_plugin_manager

    assert {e.name for e in get_plugin_manager().catalog.envs} <= set(CHECKED)


@pytest.mark.parametrize("name", CHECKED)
def test_check_env_passes(name: str) -> None:
    from openenv.plugins import get_plugin_manager

    if name not in {e.name for e in get_plugin_manager().catalog.envs}:
        pytest.skip(f"env {name} is not installed here")
    env = OpenEnvGym(name, max_episode_steps=10, invalid_action="penalize" if name in PENALIZE else "raise")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "no spec" (render modes): we have no render modes
            check_env(env, skip_render_check=True)
    finally:
        env.close()


def test_grid_world_spaces_truncation_and_info() -> None:
    env = gym.make("openenv/grid_world", max_episode_steps=3)  # registered id; kwargs reach the adapter
    try:
        inner = env.unwrapped
        assert isinstance(inner, OpenEnvGym)
        assert env.action_space == gym.spaces.Discrete(4)
        assert set(env.observation_space.spaces) == {"position", "goal", "grid", "legal_actions", "truncated"}
        obs, info = env.reset(seed=1)
        assert env.observation_space.contains(obs) and "metadata" in info
        ends = []
        for _ in range(3):
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            assert isinstance(reward, float) and {"metadata", "reward_components", "raw_reward"} <= set(info)
            ends.append((terminated, truncated))
            if terminated or truncated:
                break
        assert ends[-1][0] or ends[-1] == (False, True)  # the goal (terminated) or the step limit (truncated)
    finally:
        env.close()


def test_vector_env_autoresets_on_the_next_step() -> None:
    vec = OpenEnvVectorEnv("count_env:CountEnv", num_envs=3, max_episode_steps=10)
    try:
        assert vec.single_action_space == gym.spaces.Discrete(4)
        obs, _ = vec.reset(seed=0)
        assert list(obs["total"]) == [0, 0, 0]
        actions = np.array([1, 2, 3])
        for _ in range(3):
            obs, rewards, terminated, truncated, info = vec.step(actions)
        assert list(terminated) == [True, True, True] and not truncated.any()
        assert list(obs["total"]) == [3, 6, 9] and rewards == pytest.approx([1 / 3, 2 / 3, 1.0])
        assert info["reward_components"][2] == pytest.approx({"size": 1.0, "bonus": 1.0})
        obs, rewards, terminated, _, _ = vec.step(actions)  # the autoreset step: actions ignored
        assert list(obs["total"]) == [0, 0, 0] and not terminated.any() and not rewards.any()
        obs, *_ = vec.step(actions)
        assert list(obs["total"]) == [1, 2, 3]
    finally:
        vec.close()


def test_a_refused_action_raises_or_is_penalized() -> None:
    from openenv.errors import ConfigError, ValidationError

    with pytest.raises(ConfigError, match="penalize"):
        OpenEnvGym("chess", invalid_action="ignore")  # type: ignore[arg-type]
    strict = OpenEnvGym("chess", max_episode_steps=5)
    try:
        strict.reset(seed=1)
        with pytest.raises(ValidationError, match="unreadable move"):
            strict.step("zz")
    finally:
        strict.close()
    env = OpenEnvGym("chess", max_episode_steps=2, invalid_action="penalize", invalid_reward=-0.5)
    try:
        first, _ = env.reset(seed=1)
        obs, reward, terminated, truncated, info = env.step("zz")
        assert obs == first and obs is not first
        assert (reward, terminated, truncated) == (-0.5, False, False)
        assert info["invalid_action"]["code"] == "VALIDATION_ERROR"
        assert "unreadable move" in info["invalid_action"]["message"]
        *_, truncated, _ = env.step("e2e4")
        assert truncated  # the refused step counted towards max_episode_steps
    finally:
        env.close()


def test_volatile_fields_are_left_out_of_the_observation() -> None:
    env = OpenEnvGym("shell", max_episode_steps=3)
    try:
        assert env.volatile_fields == ["duration_s", "grader_uid", "cwd"]
        assert "cwd" not in env.observation_space.spaces
        a, _ = env.reset(seed=1)
        b, _ = env.reset(seed=1)
        assert "cwd" not in a and a == b
    finally:
        env.close()


def test_sub_envs_that_end_at_different_steps_reset_alone() -> None:
    """Seed 1 with ``down`` every step: the first grid reaches its goal on step 4, the second does not
    (a vector env once sent actions for the live sub-envs only and the whole step failed)."""
    vec = OpenEnvVectorEnv("grid_world", num_envs=2, max_episode_steps=20)
    try:
        vec.reset(seed=1)
        down = np.array([1, 1])
        ended = []
        for _ in range(6):
            _, _, terminated, _, _ = vec.step(down)
            ended.append(list(terminated))
        assert [True, False] in ended  # one ended, the other went on
        assert all(not row[1] for row in ended)
    finally:
        vec.close()


def test_a_vector_env_over_two_replicas() -> None:
    """``replicas=2``: the sub-envs are spread over two servers the provider starts, stepped together."""
    from openenv.errors import ConfigError

    with pytest.raises(ConfigError, match="replicas must be an integer from 1 to num_envs"):
        OpenEnvVectorEnv("count_env:CountEnv", num_envs=2, replicas=3)
    with pytest.raises(ConfigError, match="cannot be combined with base_url"):
        OpenEnvVectorEnv(base_url="http://127.0.0.1:9", num_envs=2, replicas=2)
    vec = OpenEnvVectorEnv("count_env:CountEnv", num_envs=4, max_episode_steps=10, replicas=2)
    try:
        urls = {shard._vec.client.base_url for shard in vec._shards}
        assert len(urls) == 2  # two servers
        obs, _ = vec.reset(seed=0)
        actions = np.array([1, 2, 3, 0])
        for _ in range(3):
            obs, _, terminated, *_ = vec.step(actions)
        assert list(obs["total"]) == [3, 6, 9, 0] and terminated.all()
        obs, *_ = vec.step(actions)  # autoreset on both servers
        assert list(obs["total"]) == [0, 0, 0, 0]
    finally:
        vec.close()
