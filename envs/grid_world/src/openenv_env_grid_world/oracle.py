"""A shortest-path policy for grid_world: breadth-first search over the observed map.

``openenv validate grid_world`` plays it (the manifest's ``oracle``) and checks it beats the random
policy; it is also a baseline a trained agent should match.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from openenv_env_grid_world.models import MOVES, GridObservation

_DELTA = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def solve(obs: GridObservation | Mapping[str, Any]) -> dict[str, str]:
    """The first move of a shortest path from the agent to the goal (any legal move if none)."""
    data = obs.model_dump() if isinstance(obs, GridObservation) else dict(obs)
    grid: list[str] = list(data.get("grid") or [])
    legal = [m for m in data.get("legal_actions") or MOVES if m in _DELTA]
    start = tuple(data.get("position") or ())
    goal = tuple(data.get("goal") or ())
    if len(start) != 2 or len(goal) != 2 or not grid:
        return {"move": legal[0] if legal else MOVES[0]}
    first: dict[tuple[int, int], str] = {}
    queue: deque[tuple[int, int]] = deque([(start[0], start[1])])
    seen = {(start[0], start[1])}
    while queue:
        r, c = queue.popleft()
        if (r, c) == goal:
            return {"move": first[(r, c)]}
        for move in MOVES:
            dr, dc = _DELTA[move]
            nr, nc = r + dr, c + dc
            if not (0 <= nr < len(grid) and 0 <= nc < len(grid[nr])) or grid[nr][nc] == "#":
                continue
            if (nr, nc) in seen:
                continue
            seen.add((nr, nc))
            first[(nr, nc)] = first.get((r, c), move)
            queue.append((nr, nc))
    return {"move": legal[0] if legal else MOVES[0]}
