"""The client side of the Task API (docs/protocol.md §13): ``await env.splits()``,
``await env.tasks(split)``, ``await env.task(task_id)`` on ``EnvClient`` (and sync twins on
``SyncEnvClient``), over the ``/ws`` ``tasks`` frame that the ``tasks`` hello extension grants.

A task is played with ``await env.reset(task_id=...)``, ``reset(split=...)`` (a task of that split)
and ``reset(group_id=...)`` (every member of the group gets the identical episode).
"""

from __future__ import annotations

from typing import Any

from openenv.protocol import EXT_TASKS, T_TASKS, expect, frame
from openenv.tasks import Split, Task

__all__ = ["TaskQueries", "served_task"]


class TaskQueries:
    """Mixed into ``EnvClient``: needs its ``_request`` and ``_require_extension``."""

    async def _tasks_query(self, **query: Any) -> dict[str, Any]:
        await self._require_extension(  # type: ignore[attr-defined]
            EXT_TASKS, "Task API queries",
            hint="Upstream servers answer the Task API over HTTP only: POST {base_url}/{env}/tasks.")
        reply = await self._request(frame(T_TASKS, query))  # type: ignore[attr-defined]
        data: dict[str, Any] = expect(reply, T_TASKS)
        return data

    async def splits(self) -> list[Split]:
        """The env's splits (name, type, number of tasks)."""
        data = await self._tasks_query(query="splits")
        return [Split.model_validate(s) for s in data["splits"]]

    async def tasks(self, split: str, start: int | None = None, stop: int | None = None) -> list[Task]:
        """The tasks of ``split`` (``[start, stop)`` of it when given)."""
        query: dict[str, Any] = {"query": "list", "split": split}
        if start is not None:
            query["start"] = start
        if stop is not None:
            query["stop"] = stop
        data = await self._tasks_query(**query)
        return [served_task(t, split) for t in data["tasks"]]

    async def num_tasks(self, split: str) -> int:
        data = await self._tasks_query(query="count", split=split)
        return int(data["num_tasks"])

    async def task(self, task_id: str) -> Task:
        """The task with ``task_id`` (``UnknownTaskError``-coded ``ValidationError`` if none)."""
        data = await self._tasks_query(query="get", task_id=task_id)
        return served_task(data["task"], None)


def served_task(raw: Any, split: str | None) -> Task:
    """A served task as a ``Task``; an upstream-style env's own task spec becomes the ``data``."""
    if isinstance(raw, dict) and {"id", "split"} <= raw.keys() and raw.keys() <= {"id", "split", "seed", "data"}:
        return Task.model_validate(raw)
    data = raw if isinstance(raw, dict) else {"value": raw}
    return Task(id=str(data.get("id", "")) or "?", split=split or "?", data=data)
