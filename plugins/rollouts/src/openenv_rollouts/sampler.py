"""Task samplers: which task the next group (or episode) plays.

``make_sampler(kind, task_ids, seed=...)`` builds one of three samplers over a fixed list of task
ids; ``collect``, ``eval`` and the TRL adapter ask it for ids and feed finished groups back:

* ``uniform``: every task equally likely.
* ``weighted``: in proportion to a weight per task (``weights={id: w}``; missing ids weigh 1).
* ``signal``: prefers tasks whose groups carry a learning signal. A GRPO group whose members all
  succeed or all fail has zero reward variance, hence zero advantage and no gradient. The sampler
  keeps per-task success counts from finished groups (``update(task_id, successes)``), estimates
  the task's success rate ``p`` (Jeffreys prior: an unseen task is at 0.5, the most mixed, so every
  task is tried early) and weighs the task by ``m ** sharpness`` with ``m = 1 - p^G - (1 - p)^G``,
  the chance that a group of ``group_size`` on it is mixed. The power (default 3) matters when most
  tasks are too easy or too hard: in proportion to ``m`` alone, a hundred tasks at ``m = 0.2``
  still outdraw twenty good ones. Two things keep any task from starving: each draw is uniform with
  probability ``explore`` (default 0.05), and every weight has a floor (``floor``, default 0.01).
  Old evidence fades (``decay``, default 0.95 per update of that task), so a task the policy has
  learned to solve is noticed and a task that becomes learnable comes back.

Every sampler is deterministic given its seed and the sequence of calls, and its whole state (the
RNG included) is JSON: ``json.dumps(s.state_dict())``, and ``load_state_dict`` on a sampler built
over the same tasks continues the same sequence; runs save it beside their output (``collect``
writes ``<output>.sampler.json``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from openenv.errors import ConfigError, did_you_mean

__all__ = ["SAMPLERS", "SignalSampler", "TaskSampler", "UniformSampler", "WeightedSampler", "make_sampler",
           "zero_variance"]

SAMPLERS = ("uniform", "weighted", "signal")
_STATE_SCHEMA = "openenv.sampler/1"


def zero_variance(successes: Sequence[bool]) -> bool:
    """True when a group carries no learning signal: all of it solved, or none of it."""
    return len(set(successes)) <= 1


def _rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _set_rng_state(rng: random.Random, state: Sequence[Any]) -> None:
    version, internal, gauss = state
    rng.setstate((version, tuple(internal), gauss))


class TaskSampler:
    """Base: draws task ids from ``task_ids`` with a seeded RNG; subclasses give the weights."""

    kind = "uniform"

    def __init__(self, task_ids: Iterable[str], *, seed: int | None = 0) -> None:
        self.task_ids = [str(t) for t in task_ids]
        if not self.task_ids:
            raise ConfigError("a task sampler needs at least one task; the split has none.")
        if len(set(self.task_ids)) != len(self.task_ids):
            seen: set[str] = set()
            dup = next(t for t in self.task_ids if t in seen or seen.add(t))  # type: ignore[func-returns-value]
            raise ConfigError(f"task id {dup!r} is listed twice; task ids must be unique.")
        self.seed = seed
        self.rng = random.Random(seed)
        self.draws = 0

    def weights(self) -> list[float]:
        """The unnormalised probability of each task in ``task_ids`` for the next draw."""
        return [1.0] * len(self.task_ids)

    def sample(self, n: int = 1) -> list[str]:
        """``n`` task ids (with replacement), each drawn with the weights of that moment."""
        out = []
        for _ in range(n):
            out.append(self.task_ids[self._pick()])
            self.draws += 1
        return out

    def _pick(self) -> int:
        return self.rng.randrange(len(self.task_ids))

    def _pick_weighted(self, weights: list[float]) -> int:
        # one uniform draw against the running sum: the same call sequence on every platform
        total = math.fsum(weights)
        x = self.rng.random() * total
        acc = 0.0
        for i, w in enumerate(weights):
            acc += w
            if x < acc:
                return i
        return len(weights) - 1

    def update(self, task_id: str, successes: Sequence[bool]) -> None:
        """Feed back a finished group (or episode) of ``task_id``: one bool per member."""
        self._check_id(task_id)

    def _check_id(self, task_id: str) -> None:
        if task_id not in self._index:
            raise ConfigError(f"the sampler has no task {task_id!r}.{did_you_mean(task_id, self.task_ids)}")

    @property
    def _index(self) -> dict[str, int]:
        index = self.__dict__.get("_index_cache")
        if index is None:
            index = self.__dict__["_index_cache"] = {t: i for i, t in enumerate(self.task_ids)}
        return index

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue the sequence, as JSON types."""
        return {"schema": _STATE_SCHEMA, "kind": self.kind, "tasks": len(self.task_ids), "seed": self.seed,
                "draws": self.draws, "rng": _rng_state(self.rng)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from ``state_dict()`` of a sampler of the same kind over the same tasks."""
        if state.get("schema") != _STATE_SCHEMA or state.get("kind") != self.kind:
            raise ConfigError(f"sampler state is {state.get('kind')!r} ({state.get('schema')!r}); this sampler "
                              f"is {self.kind!r} ({_STATE_SCHEMA}). Resume with the same --sampler.")
        if state.get("tasks") != len(self.task_ids):
            raise ConfigError(f"sampler state covers {state.get('tasks')} tasks, this sampler "
                              f"{len(self.task_ids)}; resume over the same split.")
        self.draws = int(state["draws"])
        _set_rng_state(self.rng, state["rng"])


class UniformSampler(TaskSampler):
    """Every task equally likely."""

    kind = "uniform"


class WeightedSampler(TaskSampler):
    """Tasks in proportion to ``weights`` (``{task_id: weight}``; ids not named weigh 1)."""

    kind = "weighted"

    def __init__(self, task_ids: Iterable[str], *, weights: Mapping[str, float], seed: int | None = 0) -> None:
        super().__init__(task_ids, seed=seed)
        for tid, w in weights.items():
            self._check_id(str(tid))
            if not isinstance(w, int | float) or isinstance(w, bool) or not math.isfinite(w) or w < 0:
                raise ConfigError(f"weight of task {tid!r} must be a finite number >= 0, got {w!r}.")
        self._weights = [float(weights.get(t, 1.0)) for t in self.task_ids]
        if not any(self._weights):
            raise ConfigError("every task weight is 0; give at least one task a positive weight.")

    def weights(self) -> list[float]:
        return list(self._weights)

    def _pick(self) -> int:
        return self._pick_weighted(self._weights)


class SignalSampler(TaskSampler):
    """Prefers tasks whose groups are neither all solved nor all failed (see the module docstring)."""

    kind = "signal"

    def __init__(self, task_ids: Iterable[str], *, group_size: int = 8, seed: int | None = 0,
                 explore: float = 0.05, floor: float = 0.01, decay: float = 0.95, sharpness: float = 3.0) -> None:
        super().__init__(task_ids, seed=seed)
        if group_size < 2:
            raise ConfigError(f"the signal sampler needs groups of 2 or more (got group_size={group_size}): "
                              "a single episode has no within-group variance.")
        if not 0.0 <= explore <= 1.0 or not 0.0 < decay <= 1.0 or floor < 0 or sharpness <= 0:
            raise ConfigError("signal sampler options: 0 <= explore <= 1, 0 < decay <= 1, floor >= 0, "
                              "sharpness > 0.")
        self.group_size, self.explore, self.floor, self.decay = group_size, explore, floor, decay
        self.sharpness = sharpness
        n = len(self.task_ids)
        self.solved = [0.0] * n  # decayed counts of solved / failed episodes per task
        self.failed = [0.0] * n
        self.groups = [0] * n
        self.mixed_groups = [0] * n

    def success_rate(self, task_id: str) -> float:
        """The smoothed success rate of a task (0.5 for a task never seen)."""
        self._check_id(task_id)
        return self._rate(self._index[task_id])

    def _rate(self, i: int) -> float:
        # Jeffreys prior Beta(1/2, 1/2): an unseen task is at 0.5, and one all-failed group of 8
        # already puts it at 0.03 (Beta(1, 1) would leave it at 0.1, still looking 57% mixed)
        return (self.solved[i] + 0.5) / (self.solved[i] + self.failed[i] + 1.0)

    def weights(self) -> list[float]:
        g, power = self.group_size, self.sharpness
        out = []
        for i in range(len(self.task_ids)):
            p = self._rate(i)
            mixed = 1.0 - p ** g - (1.0 - p) ** g
            out.append(self.floor + mixed ** power)
        return out

    def _pick(self) -> int:
        if self.rng.random() < self.explore:
            return self.rng.randrange(len(self.task_ids))
        return self._pick_weighted(self.weights())

    def update(self, task_id: str, successes: Sequence[bool]) -> None:
        self._check_id(task_id)
        i = self._index[task_id]
        wins = sum(1 for s in successes if s)
        self.solved[i] = self.solved[i] * self.decay + wins
        self.failed[i] = self.failed[i] * self.decay + (len(successes) - wins)
        self.groups[i] += 1
        self.mixed_groups[i] += not zero_variance(successes)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "group_size": self.group_size, "solved": list(self.solved),
                "failed": list(self.failed), "groups": list(self.groups), "mixed_groups": list(self.mixed_groups)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.solved = [float(x) for x in state["solved"]]
        self.failed = [float(x) for x in state["failed"]]
        self.groups = [int(x) for x in state["groups"]]
        self.mixed_groups = [int(x) for x in state["mixed_groups"]]


def make_sampler(kind: str, task_ids: Iterable[str], *, seed: int | None = 0, group_size: int = 8,
                 weights: Mapping[str, float] | None = None, **options: Any) -> TaskSampler:
    """``uniform`` | ``weighted`` (needs ``weights``) | ``signal`` over ``task_ids``."""
    if kind == "uniform":
        return UniformSampler(task_ids, seed=seed)
    if kind == "weighted":
        if weights is None:
            raise ConfigError("the weighted sampler needs weights: {task_id: weight} from Python, or "
                              "`openenv collect --sampler weighted --task-weights FILE`.")
        return WeightedSampler(task_ids, weights=weights, seed=seed)
    if kind == "signal":
        return SignalSampler(task_ids, group_size=max(2, group_size), seed=seed, **options)
    raise ConfigError(f"unknown sampler {kind!r}.{did_you_mean(kind, list(SAMPLERS))} "
                      f"Use one of {', '.join(SAMPLERS)}.")
