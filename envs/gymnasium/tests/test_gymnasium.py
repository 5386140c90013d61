"""The Gymnasium env: spaces, JSON, end flags, renders, seeding, baselines, bad input, README, a served run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces

from openenv.errors import ExecutionError, ValidationError
from openenv.testing import EnvContract, check_registered, readme_snippets, run_cli, run_snippet
from openenv_env_gymnasium import GymAction, GymnasiumEnv
from openenv_env_gymnasium.policy import TabularPlanner, cartpole_action
from openenv_env_gymnasium.spaces import SpaceError, describe, from_json, to_json

README = Path(__file__).resolve().parents[1] / "README.md"



def act(env: GymnasiumEnv, action: object):
    return env.step(GymAction(action=action))  # type: ignore[arg-type]


@pytest.mark.parametrize(("env_id", "kwargs", "best"), [
    ("FrozenLake-v1", {"is_slippery": False}, 1.0),
    ("Taxi-v4", {}, None),
    ("CliffWalking-v1", {}, -13.0),
])
def test_the_planner_reaches_the_best_return(env_id: str, kwargs: dict, best: float | None) -> None:
    env = GymnasiumEnv()
    planner = TabularPlanner(env_id, kwargs)
    obs = env.reset(seed=4, env_id=env_id, make_kwargs=kwargs)
    total, steps = 0.0, 0
    while not obs.done:
        obs = act(env, planner.act(obs))
        total, steps = total + float(obs.reward or 0), steps + 1
    assert obs.terminated and not obs.truncated and obs.metadata["terminated"] is True
    assert env.state.total_reward == total
    if best is not None:
        assert total == best
    else:  # Taxi: +20 for the drop-off, -1 for every other step: optimal means no wasted step
        assert total == 20 - (steps - 1) and steps <= 20


def test_cartpole_is_balanced_until_the_time_limit() -> None:
    env = GymnasiumEnv("CartPole-v1")
    obs = env.reset(seed=2)
    assert obs.observation_space and obs.observation_space["type"] == "Box"
    assert obs.action_space == {"type": "Discrete", "n": 2, "start": 0}
    total = 0.0
    while not obs.done:
        obs = act(env, cartpole_action(obs))
        total += float(obs.reward or 0)
    assert total == 500.0 and obs.truncated and not obs.terminated and obs.metadata["truncated"] is True


def test_blackjack_tuple_observation_and_taxi_action_mask() -> None:
    env = GymnasiumEnv()
    obs = env.reset(seed=1, env_id="Blackjack-v1")
    assert isinstance(obs.observation, list) and len(obs.observation) == 3
    obs = act(env, 0)  # stick: the dealer plays, the hand ends
    assert obs.done and obs.terminated and obs.reward in (-1.0, 0.0, 1.0, 1.5)
    obs = env.reset(seed=1, env_id="Taxi-v4")
    mask = obs.info["action_mask"]
    assert obs.legal_actions == [a for a in range(6) if mask[a]] and len(obs.legal_actions) < 6


def test_text_render_and_refusals() -> None:
    env = GymnasiumEnv()
    obs = env.reset(seed=0, env_id="FrozenLake-v1", render=True)
    assert obs.render and "S" in obs.render and "G" in obs.render
    assert env.reset(seed=0, env_id="FrozenLake-v1").render is None
    with pytest.raises(ValidationError, match=r"no 'ansi' render .* Reset with render='rgb_array'"):
        env.reset(env_id="CartPole-v1", render="ansi")


def test_box_actions_and_samples() -> None:
    env = GymnasiumEnv("Pendulum-v1")
    obs = env.reset(seed=3)
    assert obs.action_space and obs.action_space["shape"] == [1] and len(obs.legal_actions) == 4
    assert act(env, obs.legal_actions[0]).reward < 0
    assert act(env, 1.5).done is False  # a bare number for a one-element Box
    with pytest.raises(ValidationError, match="outside the Box"):
        act(env, [3.0])
    with pytest.raises(ValidationError, match="expected shape"):
        act(env, [1.0, 1.0])
    again = GymnasiumEnv("Pendulum-v1").reset(seed=3)
    assert again.legal_actions == obs.legal_actions and again.observation == obs.observation


def test_space_conversion_of_every_supported_space() -> None:
    assert from_json(spaces.Discrete(3, start=1), 3) == 3
    for bad in (0, 4, True, "1", 1.5):
        with pytest.raises(SpaceError, match="Discrete"):
            from_json(spaces.Discrete(3, start=1), bad)
    md = spaces.MultiDiscrete([2, 3])
    assert from_json(md, [1, 2]).tolist() == [1, 2]
    with pytest.raises(SpaceError):
        from_json(md, [2, 0])
    with pytest.raises(SpaceError):
        from_json(md, [0.5, 1])
    mb = spaces.MultiBinary(3)
    assert from_json(mb, [1, 0, 1]).tolist() == [1, 0, 1]
    with pytest.raises(SpaceError):
        from_json(mb, [1, 2, 0])
    d = spaces.Dict({"move": spaces.Discrete(2), "force": spaces.Box(-1, 1, (2,))})
    value = from_json(d, {"move": 1, "force": [0.5, -0.5]})
    assert d.contains(value)
    with pytest.raises(SpaceError, match="exactly the keys"):
        from_json(d, {"move": 1})
    with pytest.raises(SpaceError, match=r"action\.force"):
        from_json(d, {"move": 1, "force": [2, 0]})
    t = spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3)))
    assert t.contains(from_json(t, [1, 2]))
    with pytest.raises(SpaceError, match="list of 2"):
        from_json(t, [1])
    with pytest.raises(SpaceError, match="not supported"):
        from_json(spaces.Text(5), "hello")
    assert to_json({"a": np.arange(3), "b": (np.float32(0.5), float("inf"))}) == {"a": [0, 1, 2], "b": [0.5, None]}
    assert describe(d)["spaces"]["force"]["low"] == [-1.0, -1.0]


def test_unknown_ids_missing_dependencies_and_bad_steps() -> None:
    env = GymnasiumEnv()
    with pytest.raises(ValidationError, match="Did you mean 'FrozenLake-v1'"):
        env.reset(env_id="FrozenLake-v2")
    with pytest.raises(ValidationError, match="not installed"):
        env.reset(env_id="LunarLander-v3")
    with pytest.raises(ValidationError, match="cannot make"):
        env.reset(env_id="FrozenLake-v1", make_kwargs={"no_such_option": 1})
    with pytest.raises(ExecutionError, match="reset"):
        act(env, 0)
    obs = env.reset(seed=0, env_id="FrozenLake-v1", make_kwargs={"is_slippery": False})
    with pytest.raises(ValidationError, match=r"not in Discrete\(4\): send an int in 0\.\.3"):
        act(env, 7)
    with pytest.raises(ValidationError):
        act(env, {"x": 1})
    while not obs.done:
        obs = act(env, 0)  # left, into the edge: the agent stays until the time limit (100 steps)
    assert obs.truncated and not obs.terminated and env.state.step_count == 100
    with pytest.raises(ExecutionError, match="reset"):
        act(env, 0)


def test_same_seed_same_episode_and_the_env_var_default(monkeypatch: pytest.MonkeyPatch) -> None:
    def episode(seed: int) -> list[object]:
        env = GymnasiumEnv()
        obs = env.reset(seed=seed)  # slippery FrozenLake: the seed decides where the agent slides
        trace = [obs.observation]
        while not obs.done:
            obs = act(env, 2)
            trace.append(obs.observation)
        return trace

    assert episode(5) == episode(5)
    assert len({tuple(episode(s)) for s in range(8)}) > 1
    monkeypatch.setenv("OPENENV_GYMNASIUM_ENV_ID", "CartPole-v1")
    assert GymnasiumEnv().reset(seed=0).env_id == "CartPole-v1"


def test_readme_example_runs() -> None:
    block = readme_snippets(README)[0]
    done = run_snippet(block, timeout=120, ignore_warnings=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[1] == "1.0 True False" and lines[2].startswith("4 {'terminated': False")


@pytest.mark.requires_plugins("provider-local", "transport-ws")
@pytest.mark.parametrize("env_id", ["FrozenLake-v1", "CartPole-v1"])
def test_served_by_openenv_run(tmp_path: Path, env_id: str) -> None:
    done = run_cli("run", "gymnasium", "--episodes", "2", "--seed", "1", "--max-steps", "30", tmp_path=tmp_path,
                   env={"OPENENV_GYMNASIUM_ENV_ID": env_id})
    assert done.returncode == 0, done.stderr
    assert f'"env_id":"{env_id}"' in done.stdout and "episode 2  reset" in done.stdout


def test_keeps_the_kit_env_contract() -> None:  # served too, when a client transport is installed
    assert "check_concurrent_sessions" in EnvContract(GymnasiumEnv).run()  # run() raises on a broken check


async def test_contract_plugin_manifest_and_independent_sessions() -> None:
    from openenv.sessions import SessionManager
    from openenv_env_gymnasium import GymnasiumEnv, plugin

    entry, manifest = check_registered(plugin, "gymnasium", "openenv_env_gymnasium.env:GymnasiumEnv")
    assert entry.load() is GymnasiumEnv and entry.description
    assert manifest.description and manifest.tags
    assert manifest.reward_range is not None and len(manifest.reward_range) == 2 and "resources" in manifest.model_extra
    manager = SessionManager(GymnasiumEnv, env_name="gymnasium", max_sessions=2)
    a, b = await manager.open(), await manager.open()
    try:
        await manager.reset(a, {"seed": 1, "env_id": "CartPole-v1"})
        await manager.reset(b, {"seed": 1, "env_id": "CartPole-v1"})
        await manager.step(a, {"action": 1})
        state_a, state_b = await manager.state(a), await manager.state(b)
        assert state_a["step_count"] == 1 and state_b["step_count"] == 0
        assert state_a["total_reward"] == 1.0 and state_b["total_reward"] == 0.0
    finally:
        await manager.shutdown()


_DIAL_MODULE = '''
import gymnasium
import numpy as np
from gymnasium import spaces


class Dial(gymnasium.Env):
    """Turn two dials (MultiDiscrete) to the target; the observation is a Dict."""

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, render_mode=None):
        self.action_space = spaces.MultiDiscrete([3, 3])
        dials = spaces.MultiDiscrete([3, 3])
        self.observation_space = spaces.Dict({"dials": dials, "target": dials})
        self.render_mode = render_mode

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.dials = np.zeros(2, dtype=np.int64)
        self.target = self.np_random.integers(0, 3, size=2)
        return {"dials": self.dials.copy(), "target": self.target.copy()}, {}

    def step(self, action):
        self.dials = np.asarray(action, dtype=np.int64)
        hit = bool((self.dials == self.target).all())
        return {"dials": self.dials.copy(), "target": self.target.copy()}, float(hit), hit, False, {}

    def render(self):
        return f"dials {self.dials.tolist()} target {self.target.tolist()}"


gymnasium.register("openenv-test/Dial-v0", entry_point=Dial, max_episode_steps=5)
'''


def test_a_third_party_env_by_module_and_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "openenv_dial_env.py").write_text(_DIAL_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    env = GymnasiumEnv()
    obs = env.reset(seed=3, env_id="openenv_dial_env:openenv-test/Dial-v0", render=True)
    assert obs.env_id == "openenv-test/Dial-v0" and obs.action_space == {
        "type": "MultiDiscrete", "nvec": [3, 3], "start": [0, 0]}
    assert set(obs.observation) == {"dials", "target"} and obs.render and obs.render.startswith("dials")
    assert len(obs.legal_actions) == 4 and all(len(a) == 2 for a in obs.legal_actions)
    with pytest.raises(ValidationError, match="outside MultiDiscrete"):
        act(env, [3, 0])
    obs = act(env, obs.observation["target"])
    assert obs.reward == 1.0 and obs.terminated and obs.done
    obs = env.reset(seed=3, env_id="openenv-test/Dial-v0")  # registered now: the plain id works too
    assert obs.observation["dials"] == [0, 0]
    with pytest.raises(ValidationError, match="cannot import 'no_such_module'"):
        env.reset(env_id="no_such_module:Dial-v0")


def test_the_manifest_oracle_beats_a_policy_that_never_reaches_the_goal() -> None:
    """The manifest's oracle: the planner on the default (slippery) FrozenLake, the controller on
    CartPole; always stepping left never reaches the goal, so oracle_margin 0.2 can fail."""
    from openenv.registry import load_ref
    from openenv_env_gymnasium import plugin
    from openenv_env_gymnasium.policy import oracle

    _entry, manifest = check_registered(plugin, "gymnasium", "openenv_env_gymnasium.env:GymnasiumEnv")
    assert load_ref(str(manifest.oracle)) is oracle and manifest.oracle_margin == 0.2

    def mean_return(policy, seeds: range, env_id: str | None = None) -> float:
        env, total = GymnasiumEnv(env_id), 0.0
        for seed in seeds:
            obs = env.reset(seed=seed)
            while not obs.done:
                obs = env.step(GymAction(**policy(obs.model_dump())))
                total += float(obs.reward or 0)
        return total / len(seeds)

    assert mean_return(oracle, range(10)) == 0.7  # seeded: 7 of 10 slippery episodes reach the goal
    assert mean_return(lambda obs: {"action": 0}, range(10)) == 0.0
    assert mean_return(oracle, range(1), "CartPole-v1") == 500.0
    with pytest.raises(ValueError, match="no baseline for Pendulum-v1"):
        oracle({"env_id": "Pendulum-v1", "observation": [1.0, 0.0, 0.0]})


@pytest.mark.requires_plugins("provider-local", "transport-ws")
def test_openenv_validate_checks_the_oracle() -> None:
    from openenv.cli.validate_cmd import validate_target

    report = validate_target("gymnasium")
    checks = {c.name: (c.status, c.detail) for c in report.checks}
    assert report.ok, checks
    assert checks["oracle"] == ("pass", "oracle 0.333 vs random 0 (margin 0.2)")
