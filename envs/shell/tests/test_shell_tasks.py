"""The shell env's declared tasks: the shipped file, 5 train / 3 test; a task's data is the whole task."""

from __future__ import annotations

import pytest

from openenv.errors import ValidationError
from openenv.tasks import Task, tasks_of
from openenv_env_shell.env import ShellAction, ShellEnv, load_tasks


def test_the_shipped_file_is_split_five_train_three_test_and_matches_load_tasks() -> None:
    source = tasks_of(ShellEnv)
    assert source is not None
    assert {s.name: s.num_tasks for s in source.splits()} == {"train": 5, "test": 3}
    by_id = {t.id: t for t in load_tasks()}
    for task in source.iter_tasks():
        assert by_id[task.id].instructions == task.data["instructions"]
        assert by_id[task.id].check == task.data["check"]


def test_a_task_of_your_own_seeds_its_files_and_is_checked_by_its_check() -> None:
    mine = Task(id="write-answer", split="test", data={
        "instructions": "Put 42 in answer.txt", "files": {"question.txt": "6 * 7\n"},
        "check": "assert open('answer.txt').read().strip() == '42'\n"})
    env = ShellEnv()
    try:
        obs = env.reset(seed=1, task=mine)
        assert obs.task_id == "write-answer" and obs.instructions == "Put 42 in answer.txt"
        assert env.step(ShellAction(command="cat question.txt")).stdout == "6 * 7\n"
        done = env.step(ShellAction(command="echo 42 > answer.txt"))
        assert done.solved and done.reward == 1.0
    finally:
        env.close()


def test_a_task_without_a_check_is_refused_naming_the_fields() -> None:
    env = ShellEnv()
    try:
        with pytest.raises(ValidationError, match="id, instructions and check"):
            env.reset(task=Task(id="x", split="train", data={"instructions": "do it"}))
    finally:
        env.close()
