"""Wire types of tool envs (docs/protocol.md §7.1): the tool listing, the two MCP actions and their observations.

``dispatch_action`` and ``ToolAction`` validate an action object the way docs/protocol.md §2.5 dispatches it:
on its ``type`` key, ``list_tools`` / ``call_tool`` first, anything else to the env's own type.
"""

from __future__ import annotations

import typing
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from openenv.errors import ValidationError
from openenv.types import Action, Observation
from openenv.wire import validation_errors

__all__ = [
    "MCP_ACTION_TYPES",
    "CallToolAction",
    "CallToolObservation",
    "ListToolsAction",
    "ListToolsObservation",
    "Tool",
    "ToolAction",
    "ToolError",
    "ToolErrorType",
    "dispatch_action",
]


# -- wire types (docs/protocol.md §7.1) ------------------------------------------------------------------------


class ToolErrorType(StrEnum):
    """Where a tool call failed."""

    EXECUTION_ERROR = "execution_error"
    INVALID_ARGS = "invalid_args"
    TRANSPORT_ERROR = "transport_error"
    TOOL_NOT_FOUND = "tool_not_found"
    TIMEOUT = "timeout"


class ToolError(BaseModel):
    """An in-band tool failure. Exactly ``error_type`` and ``message`` (upstream parses it strictly)."""

    model_config = ConfigDict(extra="forbid")

    error_type: ToolErrorType = Field(description="Where the call failed")
    message: str = Field(description="What went wrong and what to do about it")


class Tool(BaseModel):
    """A tool as listed on the step path: exactly ``{name, description, input_schema}``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Unique identifier of the tool")
    description: str = Field(description="What the tool does")
    input_schema: dict[str, Any] = Field(description="JSON Schema of the tool's arguments")


class ListToolsAction(Action):
    """Ask for the tools visible in the env's mode. Needs no ``reset`` first."""

    type: Literal["list_tools"] = Field(default="list_tools", description="Action type discriminator")


class CallToolAction(Action):
    """Call one tool. ``type`` defaults to ``"call_tool"``, so it may be omitted."""

    type: Literal["call_tool"] = Field(default="call_tool", description="Action type discriminator")
    tool_name: str = Field(description="Name of the tool to call")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Arguments of the call")


class ListToolsObservation(Observation):
    """The tools visible in the env's mode."""

    tools: list[Tool] = Field(description="Available tools with their input schemas")


class CallToolObservation(Observation):
    """Outcome of a tool call: ``result`` (docs/protocol.md §4.5 kind A shape) or an in-band ``error``."""

    tool_name: str = Field(description="Name of the tool that was called")
    result: Any = Field(default=None, description="The serialized tool result")
    error: ToolError | None = Field(default=None, description="Why the call failed, if it did")


#: Action types for which ``{"type": "list_tools"|"call_tool"}`` objects are MCP actions (§2.5).
MCP_ACTION_TYPES: tuple[type[Action], ...] = (Action, ListToolsAction, CallToolAction)


def dispatch_action(data: Any, other: type[Action] | None = None) -> Action:
    """Validate an action object the way docs/protocol.md §2.5 dispatches it.

    ``{"type": "list_tools"}`` → ``ListToolsAction``; ``{"type": "call_tool", ...}`` →
    ``CallToolAction``; anything else → ``other`` when given, else ``CallToolAction`` (whose
    ``type`` defaults, so ``{"tool_name": ...}`` alone is a call). Raises the kernel's
    ``ValidationError`` with errors located relative to the action (``["tool_name"]``).
    """
    kind = data.get("type") if isinstance(data, dict) else None
    if kind == "list_tools":
        target: type[Action] = ListToolsAction
    elif kind == "call_tool" or other is None:
        target = CallToolAction
    else:
        target = other
    try:
        return target.model_validate(data)
    except PydanticValidationError as exc:
        raise ValidationError("Invalid message", data={"errors": validation_errors(exc)}) from None


class ToolAction(Action):
    """The action type of tool envs: validation dispatches on ``type`` (see ``dispatch_action``).

    It is never instantiated: ``model_validate`` returns a ``ListToolsAction``, a
    ``CallToolAction`` or an instance of ``other_action_type``. Its JSON Schema (``GET /schema``)
    is a ``oneOf`` over the accepted actions (docs/protocol.md §11 B17).
    """

    other_action_type: ClassVar[type[Action] | None] = None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        return dispatch_action(obj, cls.other_action_type)

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        members: list[Any] = [ListToolsAction, CallToolAction]
        if cls.other_action_type is not None:
            members.append(cls.other_action_type)
        schema = TypeAdapter(typing.Union[tuple(members)]).json_schema()  # type: ignore[arg-type]  # noqa: UP007
        if "anyOf" in schema:
            schema["oneOf"] = schema.pop("anyOf")
        if cls.other_action_type is None:
            schema["discriminator"] = {"propertyName": "type"}
            # Upstream's tool envs serve the generic ``Action`` schema, and peers recognise a tool
            # env by that title (verifiers' OpenEnv taskset then lists the tools and shows the
            # model CallToolAction's schema); a tool env that also takes other actions is not one
            # of those and keeps no title.
            schema["title"] = "Action"
        return schema

    @classmethod
    def accepting(cls, other: type[Action] | None) -> type[ToolAction]:
        """A ``ToolAction`` that also accepts ``other`` actions (those without an MCP ``type``)."""
        if other is None or other is cls.other_action_type:
            return cls
        name = f"ToolAction[{other.__name__}]"
        return type(name, (cls,), {"other_action_type": other, "__module__": cls.__module__})

