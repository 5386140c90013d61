"""What a served env looks like from outside: its ``GET /schema`` and, for MCP envs, its tools."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from openenv.images import image_fields

__all__ = ["EnvInfo", "fetch_schema", "is_mcp_schema", "list_tools"]


def fetch_schema(base_url: str, token: str | None = None, *, timeout_s: float = 10.0) -> dict[str, Any]:
    """``GET /schema`` of the server at ``base_url`` (``{"action": ..., "observation": ..., ...}``)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(base_url.rstrip("/") + "/schema", headers=headers, timeout=timeout_s)
    response.raise_for_status()
    doc = response.json()
    if not isinstance(doc, dict) or not isinstance(doc.get("action"), dict):
        raise ValueError(f"GET {base_url}/schema has no action schema: {json.dumps(doc)[:200]}")
    return doc


def is_mcp_schema(action_schema: dict[str, Any]) -> bool:
    """True when the action schema accepts MCP tool calls (``{"type": "call_tool", ...}``)."""
    return '"call_tool"' in json.dumps(action_schema)


async def list_tools(client: Any) -> list[dict[str, Any]]:
    """The tools of an MCP env, through a ``list_tools`` step on ``client`` (a started session)."""
    result = await client.step({"type": "list_tools"})
    obs = result.observation if isinstance(result.observation, dict) else {}
    tools = obs.get("tools") or []
    return [t for t in tools if isinstance(t, dict) and "name" in t]


@dataclass
class EnvInfo:
    """The schema of one env, plus its tools when it is an MCP env."""

    schema: dict[str, Any]
    tools: list[dict[str, Any]] = field(default_factory=list)

    @property
    def action_schema(self) -> dict[str, Any]:
        return dict(self.schema.get("action") or {})

    def __post_init__(self) -> None:
        self.mcp = is_mcp_schema(self.action_schema)  # asked on every step: computed once
        #: Observation fields declared as images (``openenv.types.Image``), reset observation included.
        self.image_fields: frozenset[str] = frozenset(
            name for key in ("observation", "reset_observation")
            for name in image_fields(self.schema.get(key) or {}))
