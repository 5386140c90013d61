"""The maze: a perfect maze generated from the seed; walk from the top-left corner to the exit.

Dynamics (all promises are tested):

* ``reset(seed=k, size=n)`` builds an ``n x n``-cell maze (``size=[rows, cols]`` for a rectangle;
  default 6x6 cells, a 13x13 map) from ``random.Random(k)``: same seed and size, same maze. The
  agent starts at the top-left open square, the exit ``E`` is the bottom-right one;
* every step costs ``step_penalty`` (-0.01); reaching the exit gives ``goal_reward`` (+1.0) instead
  and ends the episode. The best return of a maze is therefore ``1.0 - 0.01 * (shortest - 1)``;
* a move into a wall is a documented penalty, not an error: the agent stays, the step costs
  ``step_penalty`` and ``metadata.blocked`` is true. ``legal_actions`` lists the open moves;
* after ``max_steps`` steps (default ``8 * rows * cols``; ``reset(max_steps=...)``) the episode
  ends with ``truncated=True``;
* a step before ``reset()`` or after the episode ended, and a bad ``size``, raise
  ``openenv.errors.ValidationError`` saying what to do.
* the declared tasks (``openenv.yaml``: ``train`` seeds 0..9 999, ``test`` 1 000 000..1 000 499,
  size 6) arrive from the server as ``reset(task=<openenv.tasks.Task>)``: the task's seed and size
  make the maze, nothing else.
"""

from __future__ import annotations

import uuid
from typing import Any

from openenv.env import Environment
from openenv.errors import ValidationError
from openenv.tasks import merge_task
from openenv.types import EnvironmentMetadata
from openenv_env_maze.generate import MAX_CELLS, generate_maze
from openenv_env_maze.models import MOVES, MazeAction, MazeObservation, MazeState, Move

__all__ = ["DEFAULT_SIZE", "MazeEnv"]

#: Default maze size in cells (rows, cols).
DEFAULT_SIZE = (6, 6)

_DELTAS: dict[str, tuple[int, int]] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


#: A bad action or reset option as one Pydantic-style error (the kernel's helper).
_refuse = ValidationError.of


def _parse_size(size: Any) -> tuple[int, int]:
    if isinstance(size, int) and not isinstance(size, bool):
        rows = cols = size
    elif isinstance(size, list | tuple) and len(size) == 2 and all(
        isinstance(v, int) and not isinstance(v, bool) for v in size
    ):
        rows, cols = int(size[0]), int(size[1])
    else:
        raise _refuse(f"size must be an integer or [rows, cols], got {size!r}; e.g. reset(size=8)",
                      kind="bad_size", loc=["size"], value=size)
    if not (2 <= rows <= MAX_CELLS and 2 <= cols <= MAX_CELLS):
        raise _refuse(f"maze size must be from 2 to {MAX_CELLS} cells per side, got {[rows, cols]}",
                      kind="bad_size", loc=["size"], value=size)
    return rows, cols


class MazeEnv(Environment[MazeAction, MazeObservation, MazeState]):
    """A generated maze. Instances share no state, so many sessions may run at once."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    #: Snapshots hold the maze itself, the agent's square, the counters and the last step's extras.
    SUPPORTS_SNAPSHOT = True
    # Generation is a few thousand list operations, a step a few comparisons: run inline.
    BLOCKING = False

    def __init__(self, *, step_penalty: float = -0.01, goal_reward: float = 1.0) -> None:
        super().__init__()
        self.step_penalty = step_penalty
        self.goal_reward = goal_reward
        self._grid: list[str] = []
        self._size = DEFAULT_SIZE
        self._seed: int | None = None
        self._pos = (1, 1)
        self._goal = (1, 1)
        self._steps = 0
        self._max_steps = 0
        self._done = False
        self._episode_id: str | None = None
        self._last: dict[str, Any] = {"truncated": False, "metadata": {}}

    # -- protocol ---------------------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> MazeObservation:
        declared = kwargs.pop("task", None)
        # a declared task (openenv.tasks): its seed and data make the episode
        seed, kwargs = merge_task(declared, seed, kwargs)
        unknown = sorted(set(kwargs) - {"size", "max_steps"})
        if unknown:
            raise _refuse(f"unknown reset option(s) {unknown}; the maze accepts size and max_steps",
                          kind="unknown_option", loc=unknown[:1])
        rows, cols = _parse_size(kwargs.get("size", DEFAULT_SIZE))
        max_steps = kwargs.get("max_steps", 8 * rows * cols)
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise _refuse(f"max_steps must be a positive integer, got {max_steps!r}",
                          kind="bad_max_steps", loc=["max_steps"], value=max_steps)
        self._grid = generate_maze(rows, cols, seed)
        self._size, self._seed, self._max_steps = (rows, cols), seed, max_steps
        self._pos, self._goal = (1, 1), (2 * rows - 1, 2 * cols - 1)
        self._steps = 0
        self._done = False
        self._episode_id = episode_id or str(uuid.uuid4())
        return self._observe(reward=0.0, truncated=False)

    def step(
        self, action: MazeAction, timeout_s: float | None = None, **kwargs: Any
    ) -> MazeObservation:
        if self._episode_id is None:
            raise _refuse("No episode in progress: call reset() before step().", kind="no_episode")
        if self._done:
            raise _refuse("The episode is over (exit reached or step limit): call reset().",
                          kind="episode_over")
        target = self._target(action.move)
        if target is not None:
            self._pos = target
        self._steps += 1
        at_goal = self._pos == self._goal
        truncated = not at_goal and self._steps >= self._max_steps
        self._done = at_goal or truncated
        return self._observe(
            reward=self.goal_reward if at_goal else self.step_penalty, truncated=truncated,
            metadata={"step": self._steps, "blocked": target is None},
        )

    @property
    def state(self) -> MazeState:
        return MazeState(
            episode_id=self._episode_id, step_count=self._steps, size=list(self._size),
            seed=self._seed, position=list(self._pos), goal=list(self._goal), done=self._done,
        )

    def snapshot(self) -> dict[str, Any]:
        return {"grid": self._grid, "size": list(self._size), "seed": self._seed, "max_steps": self._max_steps,
                "pos": list(self._pos), "steps": self._steps, "done": self._done, "episode_id": self._episode_id,
                "last": self._last}

    def restore(self, data: dict[str, Any]) -> MazeObservation:
        grid, size, pos = data.get("grid"), data.get("size"), data.get("pos")
        steps, max_steps, done, last = data.get("steps"), data.get("max_steps"), data.get("done"), data.get("last")
        try:
            rows, cols = _parse_size(size)
            ok = (isinstance(grid, list) and len(grid) == 2 * rows + 1
                  and all(isinstance(r, str) and len(r) == 2 * cols + 1 and set(r) <= {"#", "."} for r in grid)
                  and isinstance(pos, list) and len(pos) == 2 and all(type(v) is int for v in pos)
                  and 0 <= pos[0] < len(grid) and 0 <= pos[1] < len(grid[0]) and grid[pos[0]][pos[1]] != "#"
                  and type(max_steps) is int and max_steps >= 1 and type(steps) is int and 0 <= steps <= max_steps
                  and type(done) is bool and isinstance(last, dict) and isinstance(last.get("metadata"), dict))
        except (ValidationError, TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError("not a maze snapshot: the grid must match the size, the agent stand on an open "
                             "square, the step counts be in range")
        self._grid, self._size, self._max_steps = list(grid), (rows, cols), max_steps  # type: ignore[arg-type,assignment]
        self._seed = data.get("seed") if type(data.get("seed")) is int else None
        self._pos, self._goal = (pos[0], pos[1]), (2 * rows - 1, 2 * cols - 1)  # type: ignore[index]
        self._steps, self._done = steps, done  # type: ignore[assignment]
        self._episode_id = str(data.get("episode_id") or uuid.uuid4())
        return self._observe(reward=None, truncated=bool(last["truncated"]),  # type: ignore[index]
                             metadata=dict(last["metadata"]))  # type: ignore[index]

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="maze",
            description="A perfect maze generated from the seed: walk to the exit (+1.0); -0.01 "
            "per step; size via reset(size=...).",
            version="0.1.0",
        )

    # -- helpers ----------------------------------------------------------------------------------

    def legal_moves(self) -> list[Move]:
        """Moves from the current square that do not run into a wall ([] once done)."""
        if self._done or not self._grid:
            return []
        return [m for m in MOVES if self._target(m) is not None]

    def render(self) -> list[str]:
        """The map with the agent drawn as ``A`` and the exit as ``E``."""
        rows = [list(row) for row in self._grid]
        if rows:
            rows[self._goal[0]][self._goal[1]] = "E"
            rows[self._pos[0]][self._pos[1]] = "A"
        return ["".join(row) for row in rows]

    def _target(self, move: str) -> tuple[int, int] | None:
        dr, dc = _DELTAS[move]
        r, c = self._pos[0] + dr, self._pos[1] + dc
        # The map's border is all wall, so an open square is never on the edge.
        return (r, c) if self._grid[r][c] != "#" else None

    def _observe(
        self, *, reward: float | None, truncated: bool, metadata: dict[str, Any] | None = None
    ) -> MazeObservation:
        self._last = {"truncated": truncated, "metadata": dict(metadata or {})}
        return MazeObservation(
            grid=self.render(), position=list(self._pos), goal=list(self._goal),
            legal_actions=[{"move": m} for m in self.legal_moves()],
            steps_left=self._max_steps - self._steps, truncated=truncated,
            reward=reward, done=self._done, metadata=metadata or {},
        )
