"""The coding env's declared tasks: the shipped file, 10 train / 4 test; a task's data is the whole task."""

from __future__ import annotations

import pytest

from openenv.errors import ValidationError
from openenv.tasks import Task, tasks_of
from openenv_env_coding.env import CodeAction, CodingEnv
from openenv_env_coding.tasks import load_tasks


def test_the_shipped_file_is_split_ten_train_four_test_and_matches_load_tasks() -> None:
    source = tasks_of(CodingEnv)
    assert source is not None
    assert {s.name: s.num_tasks for s in source.splits()} == {"train": 10, "test": 4}
    by_id = {t.id: t for t in load_tasks()}
    for task in source.iter_tasks():
        assert list(by_id[task.id].tests) == task.data["tests"] and by_id[task.id].prompt == task.data["prompt"]


def test_a_task_of_your_own_is_graded_by_its_own_hidden_tests() -> None:
    mine = Task(id="triple", split="test", data={
        "prompt": "Write `triple(x)` returning 3 * x.", "tests": ["assert triple(2) == 6", "assert triple(-1) == -3"]})
    env = CodingEnv()
    obs = env.reset(seed=3, task=mine)
    assert obs.task_id == "triple" and obs.prompt == "Write `triple(x)` returning 3 * x."
    half = env.step(CodeAction(code="def triple(x):\n    return 6 if x == 2 else 0\n", submit=True))
    assert half.done and half.reward == 0.5
    env.reset(task=mine)
    assert env.step(CodeAction(code="def triple(x):\n    return 3 * x\n", submit=True)).reward == 1.0


def test_a_task_without_tests_is_refused_naming_the_fields() -> None:
    with pytest.raises(ValidationError, match="missing field"):
        CodingEnv().reset(task=Task(id="x", split="train", data={"prompt": "p"}))
