"""The MuJoCo env: seeding, the task's own reward, ends, action checks, images, tasks, baselines."""

from __future__ import annotations

import base64
import io
import random
import threading
from pathlib import Path

import numpy as np
import pytest

from openenv.errors import ValidationError
from openenv.tasks import tasks_of
from openenv.testing import EnvContract, check_registered, exec_snippet, readme_snippets
from openenv_env_mujoco import CONTROL_TASKS, MujocoAction, MujocoEnv, pendulum_balancer, random_policy

README = Path(__file__).resolve().parents[1] / "README.md"


def play(env: MujocoEnv, actions: list[list[float]]) -> list[tuple[list[float], float]]:
    return [(obs.observation, obs.reward or 0.0) for obs in (env.step(MujocoAction(action=a)) for a in actions)]


def test_same_seed_same_episode() -> None:
    rng = random.Random(5)
    moves = [[rng.uniform(-1, 1) for _ in range(6)] for _ in range(60)]
    runs = []
    for seed in (11, 11, 12):
        env = MujocoEnv()
        env.reset(seed=seed, env_id="HalfCheetah-v5")
        runs.append(play(env, moves))
        env.close()
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]  # the seed draws the initial state's noise


def test_reward_and_observation_are_the_tasks_own() -> None:
    import gymnasium

    rng = random.Random(2)
    moves = [[rng.uniform(-1, 1) for _ in range(3)] for _ in range(40)]
    reference = gymnasium.make("Hopper-v5")
    expected_obs, _ = reference.reset(seed=4)
    env = MujocoEnv()
    obs = env.reset(seed=4, env_id="Hopper-v5")
    assert obs.observation == expected_obs.tolist() and len(obs.observation) == 11
    for move in moves:
        vector, reward, terminated, _, info = reference.step(np.asarray(move))
        obs = env.step(MujocoAction(action=move))
        assert obs.observation == vector.tolist() and obs.reward == float(reward)
        assert obs.info["reward_forward"] == info["reward_forward"] and obs.terminated == terminated
        if terminated:
            break
    assert obs.episode_return == pytest.approx(env.state.episode_return)
    reference.close()


def test_a_fall_terminates_and_max_steps_truncates() -> None:
    env, rng = MujocoEnv(), random.Random(0)
    obs = env.reset(seed=0)  # InvertedPendulum-v5: random pushes drop the pole
    while not obs.done:
        obs = env.step(MujocoAction(**random_policy(obs, rng)))
    assert obs.terminated and not obs.truncated and env.state.step_count < 100
    with pytest.raises(ValidationError, match="call reset") as info:
        env.step(MujocoAction(action=[0.0]))
    assert info.value.errors[0]["type"] == "episode_over"
    obs = env.reset(seed=0, env_id="Reacher-v5")
    assert obs.steps_left == 50  # the task's own time limit
    obs = env.reset(seed=0, env_id="Swimmer-v5", max_steps=7)
    rewards = []
    while not obs.done:
        obs = env.step(MujocoAction(**random_policy(obs, rng)))
        rewards.append(obs.reward)
    assert len(rewards) == 7 and obs.truncated and not obs.terminated and obs.steps_left == 0
    assert sum(rewards) == pytest.approx(obs.episode_return)


def test_bad_actions_are_refused_and_the_episode_goes_on() -> None:
    env = MujocoEnv()
    with pytest.raises(ValidationError, match="reset"):
        env.step(MujocoAction(action=[0.0]))
    obs = env.reset(seed=1, env_id="Reacher-v5")
    assert obs.action_names == ["joint0", "joint1"] and obs.action_low == [-1.0, -1.0]
    refusals = {
        "bad_action_shape": ([0.1, 0.2, 0.3], "2 numbers, one per actuator"),
        "action_out_of_bounds": ([0.1, 1.5], r"action\[1\] \(joint1\) = 1.5 is outside \[-1, 1\]; clip it"),
        "non_finite_action": ([float("nan"), 0.0], "finite"),
    }
    for kind, (action, words) in refusals.items():
        with pytest.raises(ValidationError, match=words) as info:
            env.step(MujocoAction(action=action))
        assert info.value.errors[0]["type"] == kind and info.value.errors[0]["loc"] == ["action"]
    assert env.state.step_count == 0
    assert env.step(MujocoAction(action=[1.0, -1.0])).steps_left == 49  # the bounds themselves are in
    # legal_actions: zeros and seeded random vectors inside the bounds, each accepted; the same for the same seed.
    obs = env.reset(seed=8, env_id="Ant-v5")
    assert len(obs.legal_actions) == 5 and obs.legal_actions[0] == [0.0] * 8
    assert obs.legal_actions == MujocoEnv().reset(seed=8, env_id="Ant-v5").legal_actions
    assert all(len(a) == 8 and all(-1.0 <= x <= 1.0 for x in a) for a in obs.legal_actions)
    assert len({tuple(a) for a in obs.legal_actions}) == 5
    for action in obs.legal_actions:
        assert env.step(MujocoAction(action=action)).legal_actions
    with pytest.raises(ValueError):
        MujocoAction(action=[])


def test_bad_reset_options_say_what_fits() -> None:
    env = MujocoEnv()
    with pytest.raises(ValidationError, match="Did you mean 'Hopper-v5'"):
        env.reset(env_id="Hoper-v5")
    with pytest.raises(ValidationError, match="Did you mean 'HalfCheetah-v5'"):
        env.reset(env_id="half_cheetah")
    for options, words in (({"image": "yes"}, "image must be"), ({"image_effects": 1}, "image_effects"),
                           ({"image_size": 4}, "image_size"),
                           ({"max_steps": 0}, "max_steps"), ({"camera": 1}, "unknown reset option")):
        with pytest.raises(ValidationError, match=words):
            env.reset(**options)
    with pytest.raises(ValidationError, match="seed"):
        env.reset(seed=-1)


def _picture(data_url: str) -> np.ndarray:
    from PIL import Image

    assert data_url.startswith("data:image/png;base64,")
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data_url.split(",", 1)[1]))).convert("RGB"))


def test_images_are_rendered_offscreen_in_any_thread() -> None:
    env = MujocoEnv()
    try:
        obs = env.reset(seed=3, env_id="Hopper-v5", image=True, image_size=96)
    except ValidationError as exc:
        if exc.errors[0]["type"] == "no_renderer":  # no EGL/OSMesa on this machine: the refusal is the promise
            pytest.skip(str(exc))
        raise
    assert obs.image is not None
    first = _picture(obs.image)
    assert first.shape == (96, 96, 3) and len(np.unique(first.reshape(-1, 3), axis=0)) > 50  # a scene, not a fill
    # The server steps a blocking env on a worker thread, not the one that reset it: frames must still draw.
    frames: list[np.ndarray] = []

    def walk() -> None:
        step = obs
        for _ in range(5):
            step = env.step(MujocoAction(action=[0.5, -0.5, 0.5]))
        assert step.image is not None
        frames.append(_picture(step.image))

    worker = threading.Thread(target=walk)
    worker.start()
    worker.join(timeout=60)
    assert frames and frames[0].shape == (96, 96, 3) and frames[0].max() > 0
    assert not np.array_equal(frames[0], first)  # the hopper moved
    assert env.reset(seed=3, env_id="Hopper-v5").image is None
    # Shadows and the floor's reflection are drawn only when asked for (they cost most of a software frame).
    plain = env.reset(seed=3, env_id="Hopper-v5", image=True, image_size=96).image
    shaded = env.reset(seed=3, env_id="Hopper-v5", image=True, image_size=96, image_effects=True).image
    assert plain is not None and shaded is not None
    assert np.array_equal(_picture(plain), first) and not np.array_equal(_picture(shaded), first)
    env.close()


def test_tasks_are_control_tasks_by_seed_with_disjoint_splits() -> None:
    source = tasks_of(MujocoEnv)
    assert source is not None
    per_task = len(CONTROL_TASKS)
    assert {s.name: s.num_tasks for s in source.splits()} == {"train": 20 * per_task, "test": 10 * per_task}
    task = source.get("hopper-test-1000007")
    assert task.seed == 1_000_007 and task.data == {"env_id": "Hopper-v5"}
    train = {(t.data["env_id"], t.seed) for t in source.task_range("train")}
    test = {(t.data["env_id"], t.seed) for t in source.task_range("test")}
    assert not train & test
    env = MujocoEnv()
    first = env.reset(seed=99, task=task)
    assert first.env_id == "Hopper-v5" and env.state.seed == 1_000_007
    assert MujocoEnv().reset(task=task).observation == first.observation


def test_the_balancer_keeps_the_pole_up_and_random_does_not() -> None:
    def steps(policy: str, seed: int) -> int:
        env, rng = MujocoEnv(), random.Random(seed)
        obs = env.reset(seed=seed, max_steps=500)
        while not obs.done:
            move = pendulum_balancer(obs) if policy == "balancer" else random_policy(obs, rng)
            obs = env.step(MujocoAction(**move))
        return env.state.step_count

    assert [steps("balancer", s) for s in range(3)] == [500, 500, 500]
    assert max(steps("random", s) for s in range(3)) < 100
    with pytest.raises(ValueError, match="InvertedPendulum-v5 only"):
        pendulum_balancer(MujocoEnv().reset(seed=0, env_id="Reacher-v5"))


def test_keeps_the_kit_env_contract() -> None:
    EnvContract(MujocoEnv, valid_actions=[{"action": [0.5]}, {"action": [-1.0]}]).run()


def test_readme_example_runs() -> None:
    blocks = readme_snippets(README)
    assert len(blocks) == 1
    exec_snippet(blocks[0], filename=README)


def test_plugin_registration() -> None:
    from openenv_env_mujoco import plugin

    entry, _ = check_registered(plugin, "mujoco", "openenv_env_mujoco.env:MujocoEnv")
    assert entry.load() is MujocoEnv


@pytest.mark.requires_plugins("transport-ws")
async def test_served_bad_actions_are_structured_errors_and_sessions_go_on() -> None:
    from openenv.client import GenericEnvClient
    from openenv.errors import OpenEnvError
    from openenv.testing import live_server

    with live_server(MujocoEnv, transports=["ws"], max_sessions=4) as server:
        a, b = GenericEnvClient(server.url), GenericEnvClient(server.url)
        try:
            first = await a.reset(seed=2, env_id="Reacher-v5", image=True, image_size=64)
            other = await b.reset(seed=2, env_id="Hopper-v5", image=True, image_size=64)
            assert first.observation["image"].startswith("data:image/png;base64,")
            assert len(other.observation["observation"]) == 11
            for bad, kind in (([0.0], "bad_action_shape"), ([0.0, -3.0], "action_out_of_bounds")):
                with pytest.raises(OpenEnvError) as info:
                    await a.step({"action": bad})
                assert info.value.code == "VALIDATION_ERROR" and kind in str(info.value)
            with pytest.raises(OpenEnvError, match="action"):
                await a.step({"action": "fast"})  # not a list of numbers: the action model refuses it
            moved = await a.step({"action": [0.5, 0.5]})  # the same session goes on, from step 0
            assert moved.observation["steps_left"] == 49 and moved.observation["image"] != first.observation["image"]
            assert (await b.step({"action": [0.0, 0.0, 0.0]})).observation["steps_left"] == 999
        finally:
            await a.close()
            await b.close()


def test_sessions_render_at_the_same_time_and_alike() -> None:
    # Each env has its own GL context on its own render thread: concurrent sessions do not share one.
    envs = [MujocoEnv() for _ in range(3)]
    try:
        envs[0].reset(seed=4, env_id="HalfCheetah-v5", image=True, image_size=48)
    except ValidationError as exc:
        if exc.errors[0]["type"] == "no_renderer":  # no EGL/OSMesa on this machine
            pytest.skip(str(exc))
        raise
    frames: dict[int, list[str]] = {}
    failures: list[BaseException] = []

    def play(k: int) -> None:
        try:
            obs = envs[k].reset(seed=4, env_id="HalfCheetah-v5", image=True, image_size=48)
            frames[k] = [obs.image or ""]
            for _ in range(4):
                frames[k].append(envs[k].step(MujocoAction(action=[0.3] * 6)).image or "")
        except BaseException as exc:  # reported below: a thread's exception would otherwise be lost
            failures.append(exc)

    try:
        workers = [threading.Thread(target=play, args=(k,)) for k in range(3)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
    finally:
        for env in envs:
            env.close()
    assert not failures, failures
    assert sorted(frames) == [0, 1, 2] and frames[0] == frames[1] == frames[2]  # same seed and actions, same frames
    assert len(set(frames[0])) == 5 and all(f.startswith("data:image/png;base64,") for f in frames[0])
