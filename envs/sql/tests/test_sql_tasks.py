"""The SQL env's declared tasks: 7 train, 3 test; a task's data is the whole task."""

from __future__ import annotations

import pytest

from openenv.errors import ValidationError
from openenv.tasks import Task, tasks_of
from openenv_env_sql.env import SqlEnv
from openenv_env_sql.models import SqlAction
from openenv_env_sql.tasks import TASKS


def test_every_shipped_task_is_declared_once_in_train_or_test() -> None:
    source = tasks_of(SqlEnv)
    assert source is not None
    assert {s.name: s.num_tasks for s in source.splits()} == {"train": 7, "test": 3}
    assert sorted(t.id for s in ("train", "test") for t in source.task_range(s)) == sorted(t.id for t in TASKS)
    assert {t.schema for t in TASKS if t.split == "test"} == {"shop", "school"}


@pytest.mark.parametrize("task_id", [t.id for t in TASKS])
def test_a_declared_task_plays_its_question_and_its_reference_solves_it(task_id: str) -> None:
    task = tasks_of(SqlEnv).get(task_id)  # type: ignore[union-attr]
    env = SqlEnv()
    obs = env.reset(seed=3, task=task)
    assert obs.task_id == task_id and obs.question == task.data["question"]
    assert env.step(SqlAction(query=task.data["reference"])).reward == 1.0


def test_a_task_of_your_own_plays_its_own_reference() -> None:
    mine = Task(id="shop_cities", split="train", data={"schema": "shop", "question": "Every city, once.",
                                                         "reference": "SELECT DISTINCT city FROM customers"})
    env = SqlEnv()
    assert env.reset(task=mine).question == "Every city, once."
    assert env.step(SqlAction(query="SELECT city FROM customers GROUP BY city")).reward == 1.0
    with pytest.raises(ValidationError, match="schemas are"):
        env.reset(task=Task(id="x", split="train", data={**mine.data, "schema": "shops"}))
