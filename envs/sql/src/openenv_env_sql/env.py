"""SQL tasks on SQLite: write a query whose result set equals the reference query's.

Promises (tested):

* each episode builds the task's database fresh in memory; the agent can only read it
  (``PRAGMA query_only`` plus an authorizer refusing writes, DDL, ``ATTACH`` and ``PRAGMA``);
* an attempt is one statement; SQL errors, refused operations, timeouts (``timeout_s``) and huge
  results come back as ``error``/``feedback`` in the observation and use up the attempt;
* the reward comes from the env's rubric (``openenv_env_sql.rubrics``): by default ``ExactResult``,
  1.0 when the result set equals the reference's (rows compared as a multiset, or as a list when the
  task asks for an order; column names do not matter), else 0.0; the episode ends on a correct
  attempt (reward 1.0) or after ``max_attempts``, so the last attempt's reward is the episode's;
* ``reset(task="...")`` picks a task by id (unknown ids: ``ValidationError`` with did-you-mean);
  otherwise ``reset(seed=k)`` draws one with ``random.Random(k)``: same seed, same task;
* the tasks are declared to the task API (``tasks``: 7 ``train``, 3 ``test``); the server's
  ``reset(task_id=...)`` arrives as ``reset(task=<openenv.tasks.Task>)`` and plays the query its
  data describes;
* stepping before ``reset`` or after the end is an ``ExecutionError`` telling you to reset.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from openenv.env import Environment
from openenv.errors import ExecutionError, ValidationError, did_you_mean
from openenv.rubric import Rubric
from openenv.tasks import Task as DeclaredTask
from openenv.types import EnvironmentMetadata
from openenv_env_sql.db import QueryError, ReadOnlyDatabase
from openenv_env_sql.models import SqlAction, SqlObservation, SqlState
from openenv_env_sql.rubrics import Attempt, ExactResult
from openenv_env_sql.tasks import SCHEMAS, TASK_SOURCE, TASKS, Task, from_declared

__all__ = ["PREVIEW_ROWS", "SqlEnv"]

#: How many result rows the observation shows.
PREVIEW_ROWS = 20
_BY_ID = {task.id: task for task in TASKS}


def _count(name: str, value: Any) -> int:
    """An int option of ``reset`` (at least 1), refused with a ``ValidationError`` saying what fits."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name} must be a whole number of at least 1 (e.g. {name}=3), got {value!r}")
    return value


class SqlEnv(Environment[SqlAction, SqlObservation, SqlState]):
    """One task per episode, several attempts. Instances share nothing (each has its own database)."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    tasks = TASK_SOURCE

    def __init__(self, *, max_attempts: int = 3, timeout_s: float = 1.0, rubric: Rubric | None = None) -> None:
        super().__init__()
        self.rubric: Rubric = rubric or ExactResult()
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        self.max_attempts, self.timeout_s = max_attempts, timeout_s
        self._task: Task | None = None
        self._db: ReadOnlyDatabase | None = None
        self._want: list[tuple[Any, ...]] = []
        self._attempts = 0
        self._solved = False
        self._done = False
        self._episode_id: str | None = None

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> SqlObservation:
        """Start an episode; ``task="shop_new_york"`` picks the task (default: drawn with the seed)."""
        unknown = set(kwargs) - {"task", "max_attempts"}
        if unknown:
            raise ValidationError(f"unknown reset option(s) {sorted(unknown)}; accepted: task, max_attempts")
        name = kwargs.get("task")
        if name is None:
            task = random.Random(seed).choice(TASKS)
        elif isinstance(name, DeclaredTask):
            try:
                task = from_declared(name)
            except ValueError as exc:
                raise ValidationError(str(exc)) from None
        elif name in _BY_ID:
            task = _BY_ID[name]
        else:
            raise ValidationError(f"unknown task {name!r}.{did_you_mean(str(name), _BY_ID)} "
                                  f"Tasks: {', '.join(_BY_ID)}")
        self.close()
        self.rubric.reset()
        self._task = task
        self._db = ReadOnlyDatabase(SCHEMAS[task.schema], timeout_s=self.timeout_s)
        self._want = self._db.query(task.reference)[1]
        self.max_attempts = _count("max_attempts", kwargs.get("max_attempts", self.max_attempts))
        self._attempts, self._solved, self._done = 0, False, False
        self._episode_id = episode_id or str(uuid.uuid4())
        return self._observe(reward=0.0, feedback="Write one SELECT query that answers the question.")

    def step(self, action: SqlAction, timeout_s: float | None = None, **kwargs: Any) -> SqlObservation:
        if self._task is None or self._db is None:
            raise ExecutionError("No episode in progress: call reset() before step().")
        if self._done:
            raise ExecutionError("The episode is over (solved or out of attempts): call reset().")
        self._attempts += 1
        try:
            columns, rows = self._db.query(action.query)
        except QueryError as exc:
            self._solved = False
            self._done = self._attempts >= self.max_attempts
            return self._observe(reward=0.0, error=str(exc), feedback=f"SQL error: {exc}")
        reward = self.rubric.score(action, Attempt(rows, self._want, self._task.ordered)).score
        self._solved = reward >= 1.0
        self._done = self._solved or self._attempts >= self.max_attempts
        if self._solved:
            feedback = "Correct: the result matches."
        else:
            feedback = (f"Not the expected result: got {len(rows)} row(s), expected {len(self._want)}"
                        + (" (order counts for this task)." if self._task.ordered else "."))
        return self._observe(reward=reward, feedback=feedback, columns=columns, rows=rows)

    @property
    def state(self) -> SqlState:
        return SqlState(episode_id=self._episode_id, step_count=self._attempts,
                        task_id=self._task.id if self._task else "", attempts=self._attempts,
                        solved=self._solved, done=self._done)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name="sql", version="0.1.0",
                                   description="SQLite query tasks: reward 1.0 when the result set matches.")

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _observe(self, *, reward: float, feedback: str, error: str | None = None, columns: list[str] | None = None,
                 rows: list[tuple[Any, ...]] | None = None) -> SqlObservation:
        assert self._task is not None and self._db is not None
        rows = rows or []
        return SqlObservation(
            task_id=self._task.id, question=self._task.question, schema_sql=self._db.schema_sql(),
            ordered=self._task.ordered, attempts_left=self.max_attempts - self._attempts,
            correct=None if self._attempts == 0 else self._solved, error=error, feedback=feedback,
            columns=columns or [], rows=[list(r) for r in rows[:PREVIEW_ROWS]], row_count=len(rows),
            reward=reward, done=self._done, metadata={"attempt": self._attempts},
        )
