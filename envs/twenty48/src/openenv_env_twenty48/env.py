"""2048: slide the tiles of a 4x4 board; equal tiles merge; reach the 2048 tile.

Dynamics (all promises are tested):

* ``reset(seed=k)`` puts two tiles on an empty board; they and every later tile come from a
  ``random.Random`` seeded from ``k`` and the env's name: same seed and moves, same game. A new
  tile is a 2, or a 4 one time in ten, on a random empty square, after every move;
* the reward of a move is the sum of the tiles its merges make (``[2, 2, 2, 2]`` left gives
  ``[4, 4, 0, 0]`` and 8 points); ``score`` is the running total;
* the game ends when a tile reaches ``target`` (2048; ``reset(target=256)`` for a shorter game),
  with ``won=True``, or when no move changes the board;
* a move that changes nothing, a step before ``reset()`` or after the end, and a bad ``target``
  raise ``openenv.errors.ValidationError`` (listing the moves that are possible); ``legal_actions``
  lists exactly those moves.
* the declared tasks (``openenv.yaml``: ``train`` seeds 0..9 999, ``test`` 1 000 000..1 000 499,
  target 2048) arrive from the server as ``reset(task=<openenv.tasks.Task>)``: the task's seed places
  every tile, so the same task and moves give the same game.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from openenv.env import Environment
from openenv.errors import ValidationError
from openenv.snapshots import rng_state, set_rng_state
from openenv.tasks import merge_task
from openenv.types import EnvironmentMetadata
from openenv_env_twenty48.board import Grid, legal_moves, move, spawn
from openenv_env_twenty48.models import Twenty48Action, Twenty48Observation, Twenty48State

__all__ = ["SIZE", "Twenty48Env"]

SIZE = 4
_TARGETS = tuple(2**k for k in range(3, 18))  # 8 .. 131072


#: A bad action or reset option as one Pydantic-style error (the kernel's helper).
_refuse = ValidationError.of


class Twenty48Env(Environment[Twenty48Action, Twenty48Observation, Twenty48State]):
    """2048 on a 4x4 board. Instances share nothing."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    #: Snapshots hold the board, the tile spawner's generator, the score and the last spawn.
    SUPPORTS_SNAPSHOT = True
    # A step is a few list operations on 16 integers: run inline.
    BLOCKING = False

    def __init__(self) -> None:
        super().__init__()
        self._grid: Grid = [[0] * SIZE for _ in range(SIZE)]
        self._rng = random.Random()
        self._score = 0
        self._target = 2048
        self._won = False
        self._steps = 0
        self._episode_id: str | None = None
        self._last: dict[str, Any] = {}

    # -- protocol ---------------------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Twenty48Observation:
        declared = kwargs.pop("task", None)
        # a declared task (openenv.tasks): its seed and data make the episode
        seed, kwargs = merge_task(declared, seed, kwargs)
        unknown = sorted(set(kwargs) - {"target"})
        if unknown:
            raise _refuse(f"unknown reset option(s) {unknown}; 2048 accepts target",
                          kind="unknown_option", loc=unknown[:1])
        target = kwargs.get("target", 2048)
        if target not in _TARGETS or isinstance(target, bool):
            raise _refuse(f"target must be a power of two from 8 to {_TARGETS[-1]}, got {target!r}",
                          kind="bad_target", loc=["target"], value=target)
        # Salted with the env's name: a policy seeded with the same number (``openenv run --seed``)
        # must not draw the same stream of choices.
        self._rng = random.Random(None if seed is None else f"openenvkit-env-twenty48/{seed}")
        self._grid = [[0] * SIZE for _ in range(SIZE)]
        spawn(self._grid, self._rng)
        spawn(self._grid, self._rng)
        self._score, self._target, self._won, self._steps = 0, int(target), False, 0
        self._episode_id = episode_id or str(uuid.uuid4())
        return self._observe(0)

    def step(
        self, action: Twenty48Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Twenty48Observation:
        if self._episode_id is None:
            raise _refuse("No game in progress: call reset() before step().", kind="no_episode")
        if self._done:
            raise _refuse("The game is over (target reached or no move left): call reset().",
                          kind="episode_over")
        after, points = move(self._grid, action.move)
        if after == self._grid:
            raise _refuse(f"moving {action.move} changes nothing; possible moves: "
                          f"{legal_moves(self._grid)}", kind="no_change", loc=["move"], value=action.move)
        self._grid = after
        self._score += points
        self._steps += 1
        self._won = max(max(row) for row in after) >= self._target
        placed = spawn(self._grid, self._rng)
        return self._observe(points, metadata={"spawned": list(placed) if placed else None})

    @property
    def state(self) -> Twenty48State:
        return Twenty48State(
            episode_id=self._episode_id, step_count=self._steps, board=[r[:] for r in self._grid],
            score=self._score, target=self._target, won=self._won, done=self._done,
        )

    def snapshot(self) -> dict[str, Any]:
        return {"grid": self._grid, "rng": rng_state(self._rng), "score": self._score, "target": self._target,
                "steps": self._steps, "episode_id": self._episode_id, "last": self._last}

    def restore(self, data: dict[str, Any]) -> Twenty48Observation:
        grid, score, target, steps, last = (data.get(k) for k in ("grid", "score", "target", "steps", "last"))
        tiles = {0} | {2 ** k for k in range(1, 18)}
        if (not isinstance(grid, list) or len(grid) != SIZE
                or not all(isinstance(r, list) and len(r) == SIZE and all(type(v) is int and v in tiles for v in r)
                           for r in grid)
                or type(score) is not int or score < 0 or target not in _TARGETS or type(steps) is not int
                or steps < 0 or not isinstance(last, dict)):
            raise ValueError("not a 2048 snapshot: a 4x4 board of powers of two, a score, a target, a step count")
        rng = random.Random()
        set_rng_state(rng, data.get("rng"))
        self._grid, self._rng = [list(r) for r in grid], rng
        self._score, self._target, self._steps = score, int(target), steps  # type: ignore[arg-type]
        self._won = max(max(row) for row in self._grid) >= self._target
        self._episode_id = str(data.get("episode_id") or uuid.uuid4())
        return self._observe(None, metadata={k: v for k, v in last.items() if k != "step"})

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="2048",
            description="The 2048 sliding-tile game on a 4x4 board; reward = merged tile values; "
            "seeded tile spawns.",
            version="0.1.0",
        )

    # -- helpers ----------------------------------------------------------------------------------

    @property
    def _done(self) -> bool:
        return self._won or not legal_moves(self._grid)

    def _observe(self, reward: int | None, metadata: dict[str, Any] | None = None) -> Twenty48Observation:
        self._last = dict(metadata or {})
        done = self._done
        return Twenty48Observation(
            board=[r[:] for r in self._grid], score=self._score,
            max_tile=max(max(row) for row in self._grid),
            legal_actions=[] if done else [{"move": m} for m in legal_moves(self._grid)],
            won=self._won, reward=reward, done=done,
            metadata={"step": self._steps, **(metadata or {})},
        )
