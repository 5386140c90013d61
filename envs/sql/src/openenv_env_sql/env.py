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
    #: Snapshots hold the task, the attempts and the last answer shown (the database is read-only:
    #: it is rebuilt from the task's schema).
    SUPPORTS_SNAPSHOT = True
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
        self._last: dict[str, Any] = {}

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

    def snapshot(self) -> dict[str, Any]:
        return {"task": self._task.id if self._task else None, "attempts": self._attempts, "solved": self._solved,
                "done": self._done, "max_attempts": self.max_attempts, "episode_id": self._episode_id,
                "last": self._last}

    def restore(self, data: dict[str, Any]) -> SqlObservation:
        task, attempts, max_attempts, last = (data.get(k) for k in ("task", "attempts", "max_attempts", "last"))
        if (task not in _BY_ID or type(max_attempts) is not int or max_attempts < 1 or type(attempts) is not int
                or not 0 <= attempts <= max_attempts or not isinstance(last, dict)
                or not isinstance(last.get("feedback"), str) or not isinstance(last.get("columns"), list)
                or not isinstance(last.get("rows"), list) or type(data.get("solved")) is not bool
                or type(data.get("done")) is not bool):
            raise ValueError(f"not a sql snapshot: the task must be one of {', '.join(_BY_ID)}, the attempts "
                             "within max_attempts, the last answer a feedback, columns and rows")
        self.close()
        self.rubric.reset()
        self._task = _BY_ID[str(task)]
        self._db = ReadOnlyDatabase(SCHEMAS[self._task.schema], timeout_s=self.timeout_s)
        self._want = self._db.query(self._task.reference)[1]
        self.max_attempts, self._attempts = max_attempts, attempts  # type: ignore[assignment]
        self._solved, self._done = bool(data["solved"]), bool(data["done"])
        self._episode_id = str(data.get("episode_id") or uuid.uuid4())
        rows = [tuple(r) if isinstance(r, list) else (r,) for r in last["rows"]]
        return self._observe(reward=None, feedback=last["feedback"], error=last.get("error"),
                             columns=[str(c) for c in last["columns"]], rows=rows,
                             row_count=last.get("row_count") if type(last.get("row_count")) is int else None)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name="sql", version="0.1.0",
                                   description="SQLite query tasks: reward 1.0 when the result set matches.")

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _observe(self, *, reward: float | None, feedback: str, error: str | None = None,
                 columns: list[str] | None = None, rows: list[tuple[Any, ...]] | None = None,
                 row_count: int | None = None) -> SqlObservation:
        assert self._task is not None and self._db is not None
        rows = rows or []
        count = len(rows) if row_count is None else row_count
        self._last = {"feedback": feedback, "error": error, "columns": columns or [],
                      "rows": [list(r) for r in rows[:PREVIEW_ROWS]], "row_count": count}
        return SqlObservation(
            task_id=self._task.id, question=self._task.question, schema_sql=self._db.schema_sql(),
            ordered=self._task.ordered, attempts_left=self.max_attempts - self._attempts,
            correct=None if self._attempts == 0 else self._solved, error=error, feedback=feedback,
            columns=columns or [], rows=[list(r) for r in rows[:PREVIEW_ROWS]], row_count=count,
            reward=reward, done=self._done, metadata={"attempt": self._attempts},
        )
