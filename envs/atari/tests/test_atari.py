"""The Atari env: seeding with sticky actions, frame skip, observations, legal actions, tasks, baselines."""

from __future__ import annotations

import base64
import io
import random
from pathlib import Path

import pytest

from openenv.errors import ValidationError
from openenv.tasks import tasks_of
from openenv.testing import EnvContract, check_registered, exec_snippet, readme_snippets
from openenv_env_atari import AtariAction, AtariEnv, AtariObservation, pong_tracker, random_policy

README = Path(__file__).resolve().parents[1] / "README.md"


def play(env: AtariEnv, actions: list[str]) -> list[tuple[list[int], float]]:
    return [(obs.ram, obs.reward) for obs in (env.step(AtariAction(action=a)) for a in actions)]  # type: ignore[arg-type]


def test_same_seed_same_episode_even_with_sticky_actions() -> None:
    moves = [random.Random(5).choice(["NOOP", "FIRE", "RIGHT", "LEFT"]) for _ in range(150)]
    runs = []
    for seed in (11, 11, 12):
        env = AtariEnv()
        env.reset(seed=seed, game="breakout", obs_type="ram", sticky_actions=0.5)
        runs.append(play(env, moves))
    assert runs[0] == runs[1]
    # Sticky actions draw from the seeded generator: another seed repeats other frames.
    assert runs[0] != runs[2]


def test_frame_skip_observations_and_image() -> None:
    env = AtariEnv()
    obs = env.reset(seed=1, game="space_invaders", frame_skip=3, frame_size=42, image=True)
    assert obs.legal_actions == ["NOOP", "FIRE", "RIGHT", "LEFT", "RIGHTFIRE", "LEFTFIRE"]
    assert len(obs.ram) == 128 and all(0 <= b <= 255 for b in obs.ram)
    assert obs.frame is not None and len(obs.frame) == 42 and {len(r) for r in obs.frame} == {42}
    assert max(max(r) for r in obs.frame) > 0  # the screen is drawn, not blank
    assert obs.image is not None and obs.image.startswith("data:image/png;base64,")
    from PIL import Image

    picture = Image.open(io.BytesIO(base64.b64decode(obs.image.split(",", 1)[1])))
    assert picture.size == (160, 210) and picture.mode == "RGB"
    # A declared image field: the value knows its size, and the schema says it before any frame.
    assert (obs.image.width, obs.image.height, obs.image.image_format) == (160, 210, "png")
    declared = AtariObservation.model_json_schema()["properties"]["image"]["anyOf"][0]["x-openenv-image"]
    assert declared == {"formats": ["png"], "width": 160, "height": 210}
    for _ in range(5):
        obs = env.step(AtariAction(action="FIRE"))
    assert obs.frame_number == 15 and env.state.frame_skip == 3
    ram_only = env.reset(seed=1, game="pong", obs_type="ram")
    assert ram_only.frame is None and ram_only.image is None


def test_reward_is_the_score_delta_and_max_steps_truncates() -> None:
    env = AtariEnv()
    obs = env.reset(seed=2, obs_type="ram", max_steps=300)
    rewards = []
    while not obs.done:
        obs = env.step(AtariAction(**random_policy(obs, random.Random(0))))  # type: ignore[arg-type]
        rewards.append(obs.reward)
    assert len(rewards) == 300 and obs.truncated and obs.steps_left == 0 and obs.legal_actions == []
    assert sum(rewards) == obs.score == env.state.score and obs.score < 0  # random Pong loses points
    with pytest.raises(ValidationError, match="call reset") as info:
        env.step(AtariAction(action="NOOP"))
    assert info.value.errors[0]["type"] == "episode_over"


def test_the_scripted_pong_player_beats_random() -> None:
    def score(policy: str) -> float:
        env, rng = AtariEnv(), random.Random(1)
        obs = env.reset(seed=3, obs_type="ram", max_steps=1500)
        while not obs.done:
            move = pong_tracker(obs) if policy == "tracker" else random_policy(obs, rng)
            obs = env.step(AtariAction(**move))  # type: ignore[arg-type]
        return obs.score

    tracker, rand = score("tracker"), score("random")
    assert tracker > rand + 5, (tracker, rand)


def test_bad_input_is_refused_with_what_to_do() -> None:
    env = AtariEnv()
    with pytest.raises(ValidationError, match="reset"):
        env.step(AtariAction(action="NOOP"))
    with pytest.raises(ValidationError, match="did you mean") as info:
        env.reset(game="spaceinvaders")
    assert "space_invaders" in str(info.value)
    for options, words in (({"frame_skip": 0}, "frame_skip"), ({"sticky_actions": 2}, "probability"),
                           ({"obs_type": "rgb"}, "obs_type"), ({"colour": True}, "unknown reset option")):
        with pytest.raises(ValidationError, match=words):
            env.reset(**options)
    env.reset(seed=1, game="pong")
    with pytest.raises(ValidationError, match="legal actions are") as info:
        env.step(AtariAction(action="UP"))  # Pong's paddle moves with RIGHT/LEFT
    assert info.value.errors[0]["type"] == "illegal_action"
    assert env.step(AtariAction(action="RIGHT")).frame_number == 4  # the episode goes on
    with pytest.raises(ValueError):
        AtariAction(action="JUMP")  # type: ignore[arg-type]


def test_tasks_are_games_by_seed_with_disjoint_splits() -> None:
    source = tasks_of(AtariEnv)
    assert source is not None
    assert {s.name: s.num_tasks for s in source.splits()} == {"train": 150, "test": 60}
    task = source.get("breakout-test-1000007")
    assert task.seed == 1_000_007 and task.data == {"game": "breakout"}
    train = {(t.data["game"], t.seed) for t in source.task_range("train")}
    test = {(t.data["game"], t.seed) for t in source.task_range("test")}
    assert not train & test
    env = AtariEnv()
    first = env.reset(seed=99, task=task)
    assert first.game == "breakout" and env.state.seed == 1_000_007
    assert AtariEnv().reset(task=task).ram == first.ram


def test_keeps_the_kit_env_contract() -> None:
    EnvContract(AtariEnv, valid_actions=[{"action": "NOOP"}, {"action": "FIRE"}]).run()


def test_readme_example_runs() -> None:
    blocks = readme_snippets(README)
    assert len(blocks) == 1
    exec_snippet(blocks[0], filename=README)


def test_plugin_registration() -> None:
    from openenv_env_atari import plugin

    entry, _ = check_registered(plugin, "atari", "openenv_env_atari.env:AtariEnv")
    assert entry.load() is AtariEnv
