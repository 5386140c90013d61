"""The maze's oracle: breadth-first search on the observed map gives a shortest path to the exit.

``solve(obs)`` is a policy (the next move from an observation or its dict); ``shortest_path``
returns every move at once. Both read only the observation, as an agent would.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from openenv_env_maze.models import MOVES, MazeObservation, Move

__all__ = ["shortest_path", "solve"]

_DELTAS: dict[str, tuple[int, int]] = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def shortest_path(grid: Sequence[str], start: Sequence[int], goal: Sequence[int]) -> list[Move]:
    """The moves of a shortest path from ``start`` to ``goal`` on ``grid`` ('#' walls); raises
    ``ValueError`` when the goal cannot be reached."""
    begin, end = (int(start[0]), int(start[1])), (int(goal[0]), int(goal[1]))
    came: dict[tuple[int, int], tuple[tuple[int, int], Move] | None] = {begin: None}
    queue = deque([begin])
    while queue:  # each square enters the queue at most once
        here = queue.popleft()
        if here == end:
            break
        for move in MOVES:
            dr, dc = _DELTAS[move]
            nxt = (here[0] + dr, here[1] + dc)
            if (0 <= nxt[0] < len(grid) and 0 <= nxt[1] < len(grid[nxt[0]])
                    and grid[nxt[0]][nxt[1]] != "#" and nxt not in came):
                came[nxt] = (here, move)
                queue.append(nxt)
    if end not in came:
        raise ValueError(f"the exit {list(end)} cannot be reached from {list(begin)}")
    path: list[Move] = []
    node = end
    while (link := came[node]) is not None:
        node, move = link
        path.append(move)
    return path[::-1]


def solve(obs: MazeObservation | Mapping[str, Any]) -> dict[str, str]:
    """The next move of a shortest path, as an action dict (``{"move": "down"}``)."""
    data = obs.model_dump() if isinstance(obs, MazeObservation) else obs
    path = shortest_path(data["grid"], data["position"], data["goal"])
    if not path:
        raise ValueError("the agent is already at the exit; the episode is over")
    return {"move": path[0]}
