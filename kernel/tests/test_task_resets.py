"""The task rule of reset (``openenv.sessions.tasking``) through the ``SessionManager``."""

from __future__ import annotations

import random
from typing import Any

import pytest

from openenv.env import Environment
from openenv.errors import RuleViolation, ValidationError
from openenv.sessions import SessionManager
from openenv.sessions.tasking import group_seed
from openenv.tasks import InlineTasks, NoTasksError, SeedTasks, Task, TaskError, UnknownTaskError
from openenv.types import Action, Observation, State


class Move(Action):
    n: int = 0


class GameObs(Observation):
    board: list[int] = []


class Game(Environment[Move, GameObs, State]):
    """A procedural game: the seed decides an 'opponent' that draws from its own RNG each step."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False
    tasks = SeedTasks({"train": range(0, 1000), "test": range(5000, 5010)}, config={"size": 3})

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: Task | None = None,
              **kwargs: Any) -> GameObs:
        self.rng = random.Random(seed)
        self.got = {"seed": seed, "task": task, "kwargs": kwargs}
        size = task.data["size"] if task is not None else 2
        return GameObs(board=[self.rng.randrange(100) for _ in range(size)])

    def step(self, action: Move, timeout_s: float | None = None, **kwargs: Any) -> GameObs:
        return GameObs(board=[action.n, self.rng.randrange(100)])  # the opponent's draw


class Quiz(Environment[Move, Observation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False
    tasks = InlineTasks([{"id": "q1", "split": "train", "q": "1+1"}, {"id": "q2", "split": "train", "q": "2+2"},
                         {"id": "t1", "split": "test", "q": "3+3"}])

    def reset(self, seed: int | None = None, episode_id: str | None = None,
              task: Task | None = None) -> Observation:
        self.got = {"seed": seed, "task": task}
        return Observation(metadata={"q": task.data["q"] if task else None})

    def step(self, action: Move, timeout_s: float | None = None) -> Observation:
        return Observation()


class Plain(Environment[Move, Observation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False

    def reset(self, seed: int | None = None, episode_id: str | None = None) -> Observation:
        self.got = {"seed": seed}
        return Observation()

    def step(self, action: Move, timeout_s: float | None = None) -> Observation:
        return Observation()


async def reset(mgr: SessionManager, data: dict[str, Any]) -> tuple[Any, Any]:
    session = await mgr.open()
    obs = await mgr.reset(session, data)
    return obs, session


async def test_task_id_plays_that_task() -> None:
    mgr = SessionManager(Quiz, max_sessions=4)
    obs, session = await reset(mgr, {"task_id": "q2"})
    assert obs.metadata == {"q": "2+2", "task_id": "q2", "split": "train"}
    assert session.env.got["task"] == Quiz.tasks.get("q2")
    await mgr.shutdown()


async def test_seed_task_gives_its_seed_and_config() -> None:
    mgr = SessionManager(Game, max_sessions=4)
    obs, session = await reset(mgr, {"task_id": "test-5003", "seed": 1})
    assert session.env.got["seed"] == 5003  # the task's seed wins over the caller's
    assert session.env.got["task"].data == {"size": 3}
    assert obs.metadata == {"task_id": "test-5003", "split": "test"}
    await mgr.shutdown()


async def test_unknown_task_id_suggests_and_names_splits() -> None:
    mgr = SessionManager(Quiz, max_sessions=4)
    session = await mgr.open()
    with pytest.raises(UnknownTaskError,
                       match=r"Unknown task id 'q22'. Did you mean 'q2'.*Splits: train, test") as info:
        await mgr.reset(session, {"task_id": "q22"})
    assert info.value.code == "VALIDATION_ERROR"
    with pytest.raises(UnknownTaskError, match=r"Unknown split 'trian'. Did you mean 'train'"):
        await mgr.reset(session, {"split": "trian"})
    with pytest.raises(ValidationError, match="in split 'train', not 'test'"):
        await mgr.reset(session, {"task_id": "q1", "split": "test"})
    with pytest.raises(ValidationError, match="non-empty string"):
        await mgr.reset(session, {"task_id": 5})
    with pytest.raises(ValidationError, match="cannot carry a `task`"):
        await mgr.reset(session, {"task": {"id": "q1"}})
    await mgr.reset(session, {})  # the session still works
    await mgr.shutdown()


async def test_env_without_tasks_says_so() -> None:
    mgr = SessionManager(Plain, max_sessions=4)
    session = await mgr.open()
    with pytest.raises(NoTasksError, match=r"declares no tasks.*TaskFile") as info:
        await mgr.reset(session, {"task_id": "x"})
    assert info.value.data["reason"] == "no_tasks"
    obs = await mgr.reset(session, {"group_id": "g"})  # a group still fixes the seed
    assert session.env.got == {"seed": group_seed("g")}
    assert obs.metadata == {"group_id": "g"}
    await mgr.shutdown()


async def test_split_pick_is_deterministic_from_seed_and_random_without() -> None:
    mgr = SessionManager(Game, max_sessions=64)
    picks = set()
    for _ in range(3):
        obs, _s = await reset(mgr, {"split": "train", "seed": 42})
        picks.add(obs.metadata["task_id"])
    assert len(picks) == 1
    spread = set()
    for _ in range(20):
        obs, s = await reset(mgr, {"split": "train"})
        spread.add(obs.metadata["task_id"])
        await mgr.close(s)
    assert len(spread) > 1  # 20 uniform picks of 1000 tasks all equal: probability 1e-57
    assert all(t.startswith("train-") for t in spread | picks)
    await mgr.shutdown()


async def test_group_members_play_identical_episodes() -> None:
    mgr = SessionManager(Game, max_sessions=16)
    actions = [Move(n=i).model_dump() for i in range(5)]

    async def play(data: dict[str, Any]) -> list[Any]:
        obs, session = await reset(mgr, data)
        out = [obs.model_dump()]
        for a in actions:
            out.append((await mgr.step(session, a)).model_dump())
        await mgr.close(session)
        return out

    group = [await play({"split": "train", "group_id": "prompt-7"}) for _ in range(4)]
    assert all(run == group[0] for run in group)
    assert group[0][0]["metadata"]["group_id"] == "prompt-7"
    other = await play({"split": "train", "group_id": "prompt-8"})
    assert other != group[0]
    same_task = [await play({"task_id": "train-3", "group_id": g}) for g in ("a", "b")]
    assert same_task[0][1:] == same_task[1][1:]  # the task's seed fixes the whole episode
    await mgr.shutdown()


def test_env_declaring_tasks_must_take_task() -> None:
    class NoTaskParam(Plain):
        tasks = InlineTasks([{"id": "a", "split": "train"}])

    with pytest.raises(RuleViolation, match="reset does not take `task`"):
        SessionManager(NoTaskParam)


def test_bad_task_source_stops_start_up() -> None:
    class Broken(Quiz):
        tasks = InlineTasks([{"id": "a", "split": "train"}, {"id": "a", "split": "test"}], name="broken.jsonl")

    with pytest.raises(TaskError, match=r"broken.jsonl, row 2, task 'a': the id is in both split"):
        SessionManager(Broken)


async def test_upstream_env_gets_split_and_index() -> None:
    from test_tasks import Upstreamish

    mgr = SessionManager(Upstreamish, max_sessions=1)
    obs, _ = await reset(mgr, {"task_id": "train/2"})
    assert obs.metadata == {"picked": ["train", 2], "task_id": "train/2", "split": "train"}
    await mgr.shutdown()
