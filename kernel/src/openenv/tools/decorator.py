"""The ``@tool`` decorator and the naming rules every tool obeys.

``@tool`` only marks a function with its options; specs are built when a registry adds it, bound
to the env instance. Reserved names (the control protocol) are refused at decoration and again at
registration, with a ``RuleViolation`` that says why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from openenv.env import CONTROL_NAMES
from openenv.errors import ConfigError, RuleViolation
from openenv.modes import Mode

__all__ = ["DEFAULT_TOOL_TIMEOUT_S", "RESERVED_TOOL_NAMES", "TOOL_ATTR", "check_mode", "check_name", "tool"]


#: Names of the control protocol; no tool may take them (docs/protocol.md §7.1).
RESERVED_TOOL_NAMES = CONTROL_NAMES
#: Deadline of a tool call when neither the tool nor the caller sets one (upstream's 30 s).
DEFAULT_TOOL_TIMEOUT_S = 30.0
# MCP's recommended tool-name alphabet; anything else breaks some clients.
_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


def check_mode(mode: Mode | str | None, tool_name: str) -> None:
    """A tool's ``mode`` is one of ``Mode``'s names or None (every mode); else ``ConfigError``."""
    if mode is not None and mode not in tuple(Mode):
        choices = ", ".join(repr(m.value) for m in Mode)
        raise ConfigError(f"Invalid mode {mode!r} for tool '{tool_name}'. Use {choices}, or None "
                          "(available in every mode).")


def check_name(name: str) -> None:
    if name in RESERVED_TOOL_NAMES:
        raise RuleViolation(
            f"Tool name '{name}' is reserved: reset, step, state and close are the control protocol "
            "of every environment, and a tool with that name would shadow it for agents. Rename the "
            f"tool (e.g. '{name}_env' or a verb describing what it does), or pass name=... to @tool."
        )
    if not _NAME_RE.match(name):
        raise RuleViolation(
            f"Tool name {name!r} is invalid: use 1-128 characters from A-Z, a-z, 0-9, '_', '-' and '.' "
            "(what MCP clients accept); pass name=... for a lambda or a callable object."
        )


# -- the decorator -------------------------------------------------------------------------------

TOOL_ATTR = "__openenv_tool__"


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    mode: Mode | str | None = None,
    timeout_s: float | None = None,
    description: str | None = None,
    title: str | None = None,
    annotations: dict[str, Any] | None = None,
) -> Any:
    """Mark a method of a ``ToolEnvironment`` (or a function for ``add_tool``) as a tool.

    Use bare (``@tool``) or with options: ``name`` (defaults to the function's name), ``mode``
    (``"simulation"``, ``"production"`` or ``None`` = every mode), ``timeout_s`` (defaults to the
    env's ``tool_timeout_s``), ``description`` (defaults to the docstring's text before its
    sections), ``title`` and MCP ``annotations``. The function is returned unchanged.
    """

    def mark(func: Callable[..., Any]) -> Callable[..., Any]:
        tool_name = name or func.__name__
        check_mode(mode, tool_name)
        check_name(tool_name)
        options = {"name": tool_name, "mode": mode, "timeout_s": timeout_s, "description": description,
                   "title": title, "annotations": annotations}
        setattr(func, TOOL_ATTR, options)
        return func

    if fn is not None:
        return mark(fn)
    return mark


