"""``openenv.core.env_server.serialization``: upstream's helpers, as calls into the kernel.

* ``serialize_observation`` is the kernel's ``observation_payload`` (docs/protocol.md §2.4): the ``/ws``
  envelope. Upstream's version silently turned a NaN reward into ``null``; this one raises
  ``ValueError`` (docs/protocol.md §11 B6).
* ``deserialize_action`` validates like the server does (docs/protocol.md §2.5): an object whose ``type`` is
  ``list_tools``/``call_tool`` becomes the MCP action when ``action_cls`` is the base ``Action`` or
  an MCP action class; anything else is ``action_cls.model_validate``. Pydantic's
  ``ValidationError`` propagates, as upstream.
"""

from __future__ import annotations

import json
from typing import Any

from openenv.types import Action, Observation, observation_payload

__all__ = ["deserialize_action", "deserialize_action_with_preprocessing", "serialize_observation"]


def _mcp_actions() -> dict[str, type[Action]]:
    from openenv.tools import CallToolAction, ListToolsAction

    return {"list_tools": ListToolsAction, "call_tool": CallToolAction}


def deserialize_action(action_data: dict[str, Any], action_cls: type[Action]) -> Action:
    """Validate ``action_data`` as ``action_cls`` (or as an MCP action, see module docstring)."""
    kind = action_data.get("type") if isinstance(action_data, dict) else None
    if kind in ("list_tools", "call_tool"):
        mcp = _mcp_actions()
        if action_cls is Action or action_cls in mcp.values():
            return mcp[kind].model_validate(action_data)
    return action_cls.model_validate(action_data)


def deserialize_action_with_preprocessing(action_data: dict[str, Any], action_cls: type[Action]) -> Action:
    """``deserialize_action`` after upstream's web-form conversions.

    A ``call_tool`` ``arguments`` given as a JSON string is parsed, and a string ``action_id`` that
    is an integer becomes one. (Upstream also turned ``tokens`` into a torch tensor; that needs
    torch and an env that declares a tensor field, so it is left to the env's own validator.)
    """
    data = dict(action_data)
    if data.get("type") == "call_tool" and isinstance(data.get("arguments"), str):
        try:
            data["arguments"] = json.loads(data["arguments"])
        except ValueError:
            pass  # let validation report the bad value
    action_id = data.get("action_id")
    if isinstance(action_id, str) and action_id.strip().lstrip("-").isdigit():
        data["action_id"] = int(action_id)
    return deserialize_action(data, action_cls)


def serialize_observation(observation: Observation) -> dict[str, Any]:
    """The wire envelope of ``observation``: ``{"observation", "reward", "done"[, "metadata"]}``."""
    return observation_payload(observation)
