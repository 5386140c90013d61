"""What each episode of a run plays: the plans of ``collect`` and ``eval``.

A plan lists the run's episode keys in order and says, for episode ``i``, its reset keywords and
what the record notes about it (``EpisodeSpec``); ``run_plan`` (in ``collect``) plays the keys not
yet written and tells the plan about every finished record, which is how a task sampler learns.

* ``CollectPlan``: ``episodes`` episodes in groups of ``group_size``; group ``g`` plays task row
  ``g % len(rows)`` with ``seed + g``, or a task of a server split drawn by a sampler when the
  group's first member starts. Every member of a group shares its ``group_id``.
* ``EvalPlan``: every task of a split, ``k`` times (keys ``<task_id>#<sample>``).
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openenv.errors import ConfigError, OpenEnvError, did_you_mean
from openenv_rollouts.sampler import TaskSampler, make_sampler

if TYPE_CHECKING:
    from openenv_rollouts.records import EpisodeRecord
    from openenv_rollouts.server import EnvServer

__all__ = ["CollectPlan", "EpisodePlan", "EpisodeSpec", "EvalPlan", "episode_key", "eval_key", "server_tasks"]


def episode_key(index: int) -> str:
    return f"ep-{index:06d}"


def eval_key(task_id: str, sample: int) -> str:
    return f"{task_id}#{sample}"


@dataclass(frozen=True)
class EpisodeSpec:
    """One planned episode: its identity, what it resets with, and what its record notes."""

    index: int
    key: str
    seed: int | None = None
    task: Mapping[str, Any] | None = None
    task_id: str | None = None
    split: str | None = None
    group_id: str | None = None
    sample: int | None = None
    #: Seed of the policy's RNG when it is not ``seed`` (eval: each sample draws differently).
    rng_seed: int | None = None

    def reset_kwargs(self) -> dict[str, Any]:
        """The reset keywords: a server task by id (with its group), else the seed and the task row."""
        if self.task_id is not None:
            kwargs: dict[str, Any] = {"task_id": self.task_id}
            if self.group_id is not None:
                kwargs["group_id"] = self.group_id
            return kwargs
        kwargs = {} if self.seed is None else {"seed": self.seed}
        kwargs.update(self.task or {})
        return kwargs


class EpisodePlan:
    """Base of the plans: ``keys`` in order, ``spec(i)``, ``finished(record)``, ``save()``."""

    keys: list[str]

    def spec(self, index: int) -> EpisodeSpec:
        raise NotImplementedError

    def finished(self, record: EpisodeRecord) -> None:
        """A record of this plan was written."""

    def save(self) -> None:
        """Persist what a resume needs (called when the run stops, however it stops)."""

    def probe_kwargs(self) -> dict[str, Any]:
        """Reset keywords of the session that lists an MCP env's tools."""
        return self.spec(0).reset_kwargs() if self.keys else {}


async def server_tasks(server: EnvServer, split: str) -> list[Any]:
    """The tasks of ``split`` on the served env (``openenv.tasks.Task`` objects), or a
    ``ConfigError`` that says what is wrong: the env has no tasks, or no such split (did-you-mean)."""
    from openenv.client import GenericEnvClient

    client = GenericEnvClient(server.base_url, token=server.token)
    if not hasattr(client, "splits"):
        raise ConfigError("this openenvkit has no Task API (client.splits/tasks); upgrade openenvkit to use "
                          "--split and openenv eval.")
    await client.connect()
    try:
        try:
            splits = await client.splits()
        except OpenEnvError as exc:
            raise ConfigError(f"env '{server.env}' declares no tasks, so it has no split '{split}': {exc}. "
                              "Declare tasks in the env (see docs), or use --tasks FILE with collect.") from exc
        names = [s.name for s in splits]
        if not names:
            raise ConfigError(f"env '{server.env}' declares no tasks, so it has no split '{split}'. Declare "
                              "tasks in the env (see docs), or use --tasks FILE with collect.")
        if split not in names:
            raise ConfigError(f"env '{server.env}' has no split '{split}'.{did_you_mean(split, names)} "
                              f"Its splits: {', '.join(names)}.")
        tasks = list(await client.tasks(split))
    finally:
        await client.close()
    if not tasks:
        raise ConfigError(f"split '{split}' of env '{server.env}' has no tasks.")
    return tasks


def _group_tag(*parts: Any) -> str:
    """A short stable id for a run's groups (the same run, resumed, names its groups the same)."""
    return f"{zlib.crc32(json.dumps(parts, default=str).encode()):08x}"


class CollectPlan(EpisodePlan):
    """``collect``'s plan: groups of ``group_size`` episodes on task rows or sampled server tasks."""

    def __init__(self, *, env: str, episodes: int, seed: int | None, rows: Sequence[Mapping[str, Any]] | None,
                 group_size: int = 1, split: str | None = None, task_ids: Sequence[str] | None = None,
                 sampler: str | TaskSampler = "uniform", sampler_weights: Mapping[str, float] | None = None,
                 threshold: float = 1.0, state_path: Path | None = None,
                 written: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        if group_size < 1:
            raise ConfigError(f"group_size must be at least 1, got {group_size}.")
        self.keys = [episode_key(i) for i in range(episodes)]
        self.seed, self.rows, self.group_size, self.split = seed, list(rows or []), group_size, split
        self.threshold, self.state_path = threshold, state_path
        self.tag = _group_tag(env, seed, split, group_size, episodes)
        self.sampler: TaskSampler | None = None
        self.assigned: dict[int, str] = {}
        self.results: dict[int, list[bool]] = {}
        if task_ids is not None:
            self.sampler = sampler if isinstance(sampler, TaskSampler) else make_sampler(
                sampler, task_ids, seed=seed or 0, group_size=group_size, weights=sampler_weights)
            if state_path is not None and state_path.exists() and written:
                self.sampler.load_state_dict(json.loads(state_path.read_text(encoding="utf-8")))
            for record in (written or {}).values():  # a resumed group keeps the task it started on
                group, tid = self._group_of(int(record["episode"])), record.get("task_id")
                if tid is not None:
                    self.assigned[group] = str(tid)
                    self.results.setdefault(group, []).append(self._success(record))

    def _group_of(self, index: int) -> int:
        return index // self.group_size

    def _success(self, record: Mapping[str, Any]) -> bool:
        return record.get("status") == "ok" and float(record.get("reward") or 0.0) >= self.threshold

    def spec(self, index: int) -> EpisodeSpec:
        group = self._group_of(index)
        group_id = f"{self.tag}-g{group:06d}" if self.group_size > 1 else None
        seed = self.seed + group if self.seed is not None else None
        # the members of a group play one episode but draw their own actions: the policy's RNG is
        # seeded per episode, as without groups
        rng_seed = self.seed + index if self.seed is not None else None
        if self.sampler is not None:
            tid = self.assigned.get(group)
            if tid is None:  # drawn when the group's first member starts, from what finished so far
                tid = self.assigned[group] = self.sampler.sample(1)[0]
            return EpisodeSpec(index, self.keys[index], seed=None, task_id=tid, split=self.split,
                               group_id=group_id, rng_seed=rng_seed)
        row = self.rows[group % len(self.rows)] if self.rows else None
        return EpisodeSpec(index, self.keys[index], seed=seed, task=row, group_id=group_id, rng_seed=rng_seed)

    def finished(self, record: EpisodeRecord) -> None:
        if self.sampler is None or record.task_id is None:
            return
        group = self._group_of(record.episode)
        results = self.results.setdefault(group, [])
        results.append(record.status == "ok" and record.reward >= self.threshold)
        size = min(self.group_size, len(self.keys) - group * self.group_size)
        if len(results) == size:
            self.sampler.update(record.task_id, results)
            self.save()

    def save(self) -> None:
        if self.sampler is None or self.state_path is None:
            return
        tmp = self.state_path.with_name(self.state_path.name + ".tmp")
        tmp.write_text(json.dumps(self.sampler.state_dict()), encoding="utf-8")
        os.replace(tmp, self.state_path)  # a reader (or a kill) never sees half a state


class EvalPlan(EpisodePlan):
    """``eval``'s plan: every task of ``split``, ``k`` times; the policy's RNG differs per sample."""

    def __init__(self, tasks: Sequence[Any], *, split: str, k: int, seed: int = 0) -> None:
        if k < 1:
            raise ConfigError(f"-k must be at least 1, got {k}.")
        self.specs: list[EpisodeSpec] = []
        for task in tasks:
            for sample in range(k):
                key = eval_key(str(task.id), sample)
                self.specs.append(EpisodeSpec(
                    len(self.specs), key, seed=getattr(task, "seed", None), task_id=str(task.id), split=split,
                    sample=sample, rng_seed=seed + zlib.crc32(key.encode())))
        self.keys = [s.key for s in self.specs]

    def spec(self, index: int) -> EpisodeSpec:
        return self.specs[index]
