"""The grid world: a small deterministic maze with walls, a goal and a step limit.

Dynamics (all promises are tested):

* a move into a wall or off the edge leaves the agent in place and still costs ``step_penalty``;
* reaching the goal gives ``goal_reward`` (+1.0) and ends the episode;
* after ``max_steps`` steps without reaching the goal the episode ends with ``truncated=True``;
* ``legal_actions`` lists the moves that neither hit a wall nor leave the grid (empty once done);
* ``reset()`` starts at the layout's ``S``; ``reset(seed=k)`` draws the start from the free cells
  with ``random.Random(k)``, so the same seed gives the same episode; ``reset(start=[row, col])``
  starts on that free cell (a wall, the goal or a cell off the grid is a ``ValidationError``);
* the tasks (``tasks``, for the task API) are the start cells of the default layout: a task's data
  is its ``start``, so train and test episodes never share a start (15 ``train``, 4 ``test``);
* stepping after the episode ended raises, telling the caller to reset;
* snapshots (``SUPPORTS_SNAPSHOT``): the agent's cell, the step count, the episode id and the last
  step's ``truncated``/``metadata``; a restore checks the cell is free and the numbers in range.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from typing import Any

from openenv.env import Environment
from openenv.errors import ValidationError
from openenv.tasks import InlineTasks, checked_task
from openenv.tasks import Task as DeclaredTask
from openenv.types import EnvironmentMetadata
from openenv_env_grid_world.models import MOVES, GridAction, GridObservation, GridState, Move
from openenv_rubrics.shaping import FieldsEqual

__all__ = ["DEFAULT_LAYOUT", "GridWorldEnv", "start_tasks"]

#: The default 5x5 map: ``S`` start, ``G`` goal, ``#`` wall, ``.`` free.
DEFAULT_LAYOUT: tuple[str, ...] = (
    "S....",
    ".##..",
    "...#.",
    ".#...",
    "...#G",
)

_DELTAS: dict[str, tuple[int, int]] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def _parse_layout(
    layout: Sequence[str],
) -> tuple[frozenset[tuple[int, int]], tuple[int, int], tuple[int, int], int, int]:
    """Walls, start, goal and size of a layout; ``ValueError`` naming what is wrong."""
    rows = [str(row) for row in layout]
    if not rows or not rows[0]:
        raise ValueError("layout must have at least one non-empty row")
    width = len(rows[0])
    if any(len(row) != width for row in rows):
        raise ValueError("every layout row must have the same length")
    walls, start, goal = set(), None, None
    for r, row in enumerate(rows):
        for c, ch in enumerate(row):
            if ch == "#":
                walls.add((r, c))
            elif ch == "S":
                start = (r, c)
            elif ch == "G":
                goal = (r, c)
            elif ch != ".":
                raise ValueError(f"unknown layout character {ch!r} at row {r}, column {c}; "
                                 "use '#', '.', 'S' or 'G'")
    if start is None or goal is None:
        raise ValueError("layout needs exactly one 'S' (start) and one 'G' (goal)")
    if start == goal:
        raise ValueError("start and goal must differ")
    return frozenset(walls), start, goal, len(rows), width


#: Every how-many-th start cell (in row-major order) is held out for the ``test`` split.
_TEST_EVERY = 4


def start_tasks(layout: Sequence[str] = DEFAULT_LAYOUT) -> InlineTasks:
    """One task per free cell of ``layout`` (not the goal), id ``start-<row>-<col>``: every
    ``_TEST_EVERY``-th cell in row-major order is ``test``, the rest ``train``."""
    walls, _, goal, rows, cols = _parse_layout(layout)
    cells = [(r, c) for r in range(rows) for c in range(cols) if (r, c) not in walls and (r, c) != goal]
    return InlineTasks(
        [DeclaredTask(id=f"start-{r}-{c}", split="test" if i % _TEST_EVERY == _TEST_EVERY - 1 else "train",
                      data={"start": [r, c]}) for i, (r, c) in enumerate(cells)],
        name="grid_world start cells")


class GridWorldEnv(Environment[GridAction, GridObservation, GridState]):
    """A deterministic grid world. Instances share no state, so many sessions may run at once."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    SUPPORTS_SNAPSHOT = True
    # A step is a few integer operations: run it inline on the event loop.
    BLOCKING = False
    #: The server scores each step with this rubric: +1.0 on the goal, else the step penalty
    #: (the constructor's defaults; a factory with other values should serve with its own
    #: ``--rubric fields_equal=...`` or declare a rubric on a subclass).
    rubric = FieldsEqual(name="goal", left="observation.position", right="observation.goal",
                         on_equal=1.0, on_differ=-0.01)
    tasks = start_tasks()

    def __init__(
        self,
        layout: Sequence[str] = DEFAULT_LAYOUT,
        *,
        step_penalty: float = -0.01,
        goal_reward: float = 1.0,
        max_steps: int = 50,
    ) -> None:
        super().__init__()
        self._walls, self._start, self._goal, self._rows, self._cols = _parse_layout(layout)
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.step_penalty = step_penalty
        self.goal_reward = goal_reward
        self.max_steps = max_steps
        self._free = [
            (r, c) for r in range(self._rows) for c in range(self._cols)
            if (r, c) not in self._walls and (r, c) != self._goal
        ]
        self._pos = self._start
        self._steps = 0
        self._done = False
        self._episode_id: str | None = None
        self._last: dict[str, Any] = {"truncated": False, "metadata": {}}

    # -- protocol ---------------------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GridObservation:
        declared = kwargs.pop("task", None)
        if declared is not None:  # a declared task (openenv.tasks): its data names the start cell
            declared = checked_task(declared)
            kwargs = {**kwargs, **declared.data}
        if kwargs.get("start") is not None:
            self._pos = self._start_cell(kwargs["start"])
        else:
            self._pos = self._start if seed is None else random.Random(seed).choice(self._free)
        self._steps = 0
        self._done = False
        self._episode_id = episode_id or str(uuid.uuid4())
        return self._observe(reward=0.0, truncated=False)

    def step(
        self, action: GridAction, timeout_s: float | None = None, **kwargs: Any
    ) -> GridObservation:
        if self._episode_id is None:
            raise RuntimeError("No episode in progress: call reset() before step().")
        if self._done:
            raise RuntimeError("The episode is over (goal reached or step limit): call reset().")
        target = self._target(self._pos, action.move)
        blocked = target is None
        if target is not None:
            self._pos = target
        self._steps += 1
        at_goal = self._pos == self._goal
        truncated = not at_goal and self._steps >= self.max_steps
        self._done = at_goal or truncated
        reward = self.goal_reward if at_goal else self.step_penalty
        return self._observe(
            reward=reward, truncated=truncated,
            metadata={"step": self._steps, "blocked": blocked},
        )

    @property
    def state(self) -> GridState:
        return GridState(
            episode_id=self._episode_id, step_count=self._steps,
            position=list(self._pos), goal=list(self._goal), done=self._done,
        )

    def snapshot(self) -> dict[str, Any]:
        return {"pos": list(self._pos), "steps": self._steps, "done": self._done,
                "episode_id": self._episode_id, "last": self._last}

    def restore(self, data: dict[str, Any]) -> GridObservation:
        pos, steps, done, last = data.get("pos"), data.get("steps"), data.get("done"), data.get("last")
        if (not isinstance(pos, list) or len(pos) != 2 or tuple(pos) not in [*self._free, self._goal]
                or type(steps) is not int or not 0 <= steps <= self.max_steps or type(done) is not bool
                or not isinstance(last, dict) or not isinstance(last.get("metadata"), dict)):
            raise ValueError("not a grid_world snapshot of this layout: pos must be a free cell, steps within "
                             "max_steps, done a boolean")
        self._pos, self._steps, self._done = (pos[0], pos[1]), steps, done
        self._episode_id = str(data.get("episode_id") or uuid.uuid4())
        return self._observe(reward=None, truncated=bool(last.get("truncated")), metadata=dict(last["metadata"]))

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="grid_world",
            description="A small deterministic grid with walls, a goal (+1.0), a step penalty "
            "and a step limit.",
            version="0.1.0",
        )

    # -- helpers ----------------------------------------------------------------------------------

    def legal_actions(self) -> list[Move]:
        """Moves from the current cell that hit neither a wall nor the edge ([] once done)."""
        if self._done:
            return []
        return [m for m in MOVES if self._target(self._pos, m) is not None]

    def render(self) -> list[str]:
        """The map with the agent drawn as ``A`` (``G`` stays visible until the agent stands on it)."""
        rows = []
        for r in range(self._rows):
            cells = []
            for c in range(self._cols):
                if (r, c) == self._pos:
                    cells.append("A")
                elif (r, c) == self._goal:
                    cells.append("G")
                elif (r, c) in self._walls:
                    cells.append("#")
                else:
                    cells.append(".")
            rows.append("".join(cells))
        return rows

    def _start_cell(self, start: Any) -> tuple[int, int]:
        if (not isinstance(start, list | tuple) or len(start) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in start)):
            raise ValidationError(f"start must be [row, col], two integers, got {start!r}")
        cell = (start[0], start[1])
        if cell not in self._free:
            where = ("the goal" if cell == self._goal else "a wall" if cell in self._walls
                     else f"off the {self._rows}x{self._cols} grid")
            raise ValidationError(f"start {list(cell)} is {where}; pick a free cell, e.g. {list(self._free[0])}")
        return cell

    def _target(self, pos: tuple[int, int], move: str) -> tuple[int, int] | None:
        dr, dc = _DELTAS[move]
        r, c = pos[0] + dr, pos[1] + dc
        if not (0 <= r < self._rows and 0 <= c < self._cols) or (r, c) in self._walls:
            return None
        return (r, c)

    def _observe(
        self, *, reward: float | None, truncated: bool, metadata: dict[str, Any] | None = None
    ) -> GridObservation:
        self._last = {"truncated": truncated, "metadata": dict(metadata or {})}
        return GridObservation(
            position=list(self._pos), goal=list(self._goal), grid=self.render(),
            legal_actions=self.legal_actions(), truncated=truncated,
            reward=reward, done=self._done, metadata=metadata or {},
        )

