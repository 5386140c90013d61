"""A ``harbor_env`` written the way upstream 0.10 documents an env with a Task API, served by OUR
server: upstream's imports (``openenv.core``, our compat layer), an ``MCPEnvironment`` with a FastMCP
tool, and ``list_splits`` / ``list_tasks`` / ``num_tasks`` / ``get_task`` / ``get_task_range``
returning ``HarborTaskRef`` shapes (``index``, ``task_id``, ``task_name``, ``dataset``,
``instruction``), as upstream's harbor env does. Upstream's ``HarborEnv`` client drives it.

``openenv serve harbor_env:app`` (with this folder on the path).
"""

from __future__ import annotations

import json
from typing import Any
from uuid import uuid4

from fastmcp import FastMCP

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, Observation, State

__all__ = ["DATASETS", "HarborStyleEnv", "app"]

#: Two "datasets" (harbor's splits), each a list of task directory names.
DATASETS: dict[str, list[str]] = {
    "terminal-bench@2.0": [f"tb-task-{i:03d}" for i in range(12)],
    "swebench-verified": ["astropy__astropy-12907", "django__django-11099", "sympy__sympy-20590"],
}


def _ref(split: str, index: int) -> dict[str, Any]:
    name = DATASETS[split][index]
    return {"index": index, "task_id": f"{split}/{name}", "task_name": name, "dataset": split,
            "instruction": f"Solve {name}."}


class HarborStyleEnv(MCPEnvironment):
    """Task discovery over the Task API, one MCP tool (``capabilities``) for execution."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("harbor_env")

        @mcp.tool
        def capabilities() -> str:
            """Datasets this server offers."""
            return json.dumps({"datasets": sorted(DATASETS)})

        super().__init__(mcp)
        self._state = State(episode_id=str(uuid4()), step_count=0)

    # --- Task API (discovered by duck typing, as upstream does) ----------
    def list_splits(self) -> list[dict[str, Any]]:
        return [{"name": name, "num_tasks": len(tasks)} for name, tasks in DATASETS.items()]

    def num_tasks(self, split: str) -> int:
        return len(DATASETS[split])

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return [_ref(split, i) for i in range(len(DATASETS[split]))]

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        if not 0 <= index < len(DATASETS[split]):
            raise IndexError(f"task index {index} out of range for {split!r}")
        return _ref(split, index)

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[dict[str, Any]]:
        return [_ref(split, i) for i in range(len(DATASETS[split]))[start:stop]]

    # --- Environment ------------------------------------------------------
    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        return Observation(done=False, reward=0.0, metadata={"status": "ready"})

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return Observation(done=False, reward=0.0, metadata={"error": f"Unknown action {type(action).__name__}"})

    @property
    def state(self) -> State:
        return self._state


app = create_app(HarborStyleEnv, CallToolAction, CallToolObservation, env_name="harbor_env",
                 max_concurrent_envs=2)
