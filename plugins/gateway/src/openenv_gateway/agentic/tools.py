"""Which names the env's tools get inside a harness that has tools of its own."""

from __future__ import annotations

from collections.abc import Collection

from openenv.tools import RESERVED_TOOL_NAMES
from openenv.tools.wire import Tool

__all__ = ["resolve_tool_conflicts"]


def resolve_tool_conflicts(env_tools: list[Tool], harness_builtin_tools: Collection[str],
                           prefix: str = "env_") -> list[Tool]:
    """The env's tools renamed where they would clash with the harness's built-ins (``prefix`` +
    name); a new list, the input is left alone.

    ``ValueError`` rather than a silent choice when: a tool takes a control name (``reset``,
    ``step``, ``state``, ``close``), two env tools share a name, or the prefixed name is taken too.
    """
    reserved = sorted({tool.name for tool in env_tools} & set(RESERVED_TOOL_NAMES))
    if reserved:
        raise ValueError("Tool names are reserved for orchestration controls: " + ", ".join(reserved))
    names: set[str] = set()
    for tool in env_tools:
        if tool.name in names:
            raise ValueError(f"Duplicate environment tool name: {tool.name}")
        names.add(tool.name)
    builtins = set(harness_builtin_tools)
    out: list[Tool] = []
    used: set[str] = set()
    for tool in env_tools:
        name = tool.name
        if name in builtins:
            renamed = prefix + name
            if renamed in builtins or renamed in names:
                raise ValueError(f"Cannot resolve tool name conflict: '{name}' collides with a harness "
                                 f"built-in tool and '{renamed}' is also taken")
            name = renamed
        if name in used:
            raise ValueError(f"Tool name conflict after prefixing: {name}")
        used.add(name)
        out.append(tool.model_copy(update={"name": name}))
    return out
