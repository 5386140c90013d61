"""Tool environments: typed tools an agent calls, the counterpart of upstream's ``MCPEnvironment``.

Declare tools as typed methods of a ``ToolEnvironment`` subclass::

    class Calc(ToolEnvironment):
        SUPPORTS_CONCURRENT_SESSIONS = True

        @tool
        def add(self, a: int, b: int = 0) -> int:
            '''Add two numbers.

            Args:
                a: The first number.
                b: The second number.
            '''
            return a + b

Promises (docs/protocol.md §7, §11 B5, B7, B8, B13, B15):

* **Schemas** come from the annotations through Pydantic (lists, dicts, optionals, literals, nested
  models, defaults), with per-parameter descriptions from the docstring's ``Args:`` section or from
  ``Annotated[..., Field(description=...)]``; ``additionalProperties`` is ``false``.
* **Calls are validated against the schema before the tool runs**. Failures are classified by where
  they happen, never by message text: lookup → ``tool_not_found``, validation → ``invalid_args``,
  an exception from the tool body → ``execution_error``, the deadline → ``timeout``.
* **Reserved names** (``reset``, ``step``, ``state``, ``close``) are refused whenever a tool is
  registered, with a ``RuleViolation`` that says why.
* **Modes**: a tool declared with ``mode="production"`` exists only when the env runs in production
  mode (``self.mode``, set on every instance by the session manager), and likewise for simulation;
  two variants of one name (one per mode) are allowed.
* **One registry, two renderings**: the step path lists exactly ``{name, description,
  input_schema}``; JSON-RPC lists the MCP keys ``name, title, description, inputSchema,
  outputSchema, annotations``.
* Agent code is never executed in the server process: there is no code mode here.

Sync tool bodies run on a worker thread so the deadline can be enforced; a body that ignores the
deadline keeps its thread until it returns (Python threads cannot be killed), but the caller gets
its ``timeout`` answer on time. Async tool bodies are cancelled at the deadline.

This module never imports an MCP library: the kernel stays light.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
import typing
import uuid
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic import ValidationError as PydanticValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, to_jsonable_python

from openenv.env import CONTROL_NAMES, Environment
from openenv.errors import ConfigError, RuleViolation, ValidationError, did_you_mean
from openenv.types import Action, Observation, State
from openenv.wire import validation_errors

__all__ = [
    "DEFAULT_TOOL_TIMEOUT_S",
    "MCP_ACTION_TYPES",
    "RESERVED_TOOL_NAMES",
    "CallToolAction",
    "CallToolObservation",
    "ListToolsAction",
    "ListToolsObservation",
    "Tool",
    "ToolAction",
    "ToolCallError",
    "ToolEnvironment",
    "ToolError",
    "ToolErrorType",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "dispatch_action",
    "tool",
]

#: Names of the control protocol; no tool may take them (docs/protocol.md §7.1).
RESERVED_TOOL_NAMES = CONTROL_NAMES
#: Deadline of a tool call when neither the tool nor the caller sets one (upstream's 30 s).
DEFAULT_TOOL_TIMEOUT_S = 30.0
_MODES = ("simulation", "production")
# MCP's recommended tool-name alphabet; anything else breaks some clients.
_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


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
        return schema

    @classmethod
    def accepting(cls, other: type[Action] | None) -> type[ToolAction]:
        """A ``ToolAction`` that also accepts ``other`` actions (those without an MCP ``type``)."""
        if other is None or other is cls.other_action_type:
            return cls
        name = f"ToolAction[{other.__name__}]"
        return type(name, (cls,), {"other_action_type": other, "__module__": cls.__module__})


# -- results and errors --------------------------------------------------------------------------


class ToolCallError(Exception):
    """A tool call failed; ``error_type`` says where. Tools may raise it to choose the class."""

    def __init__(self, error_type: ToolErrorType | str, message: str) -> None:
        super().__init__(message)
        self.error_type = ToolErrorType(error_type)
        self.message = message

    def to_tool_error(self) -> ToolError:
        return ToolError(error_type=self.error_type, message=self.message)


@dataclass
class ToolResult:
    """A serialized tool result (docs/protocol.md §4.5 kind A). Tools may return one for full control.

    ``content`` holds MCP content blocks (``{"type": "text", "text": ...}``, images, …),
    ``structured_content`` a JSON object or ``None``, ``data`` the plain value a client returns.
    """

    content: list[dict[str, Any]]
    structured_content: dict[str, Any] | None = None
    data: Any = None
    is_error: bool = False

    def to_wire(self) -> dict[str, Any]:
        """The OpenEnv-dialect dict: ``content``, ``structured_content``, ``data``, ``is_error``."""
        return {"content": self.content, "structured_content": self.structured_content,
                "data": self.data, "is_error": self.is_error}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


# -- tool specs and schemas ---------------------------------------------------------------------


@dataclass
class ToolSpec:
    """One registered tool: its callable, schemas and options."""

    name: str
    fn: Callable[..., Any]
    description: str
    mode: str | None
    timeout_s: float | None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    arguments_model: type[BaseModel]
    is_async: bool
    title: str | None = None
    annotations: dict[str, Any] | None = None
    #: Python parameter name of each schema property (they differ only for keyword-ish names).
    param_names: dict[str, str] = field(default_factory=dict)
    wraps_result: bool = True
    _returns: TypeAdapter[Any] | None = field(default=None, repr=False)

    def step_entry(self) -> Tool:
        """The step-path listing entry: exactly ``{name, description, input_schema}``."""
        return Tool(name=self.name, description=self.description, input_schema=self.input_schema)

    def mcp_entry(self) -> dict[str, Any]:
        """The JSON-RPC listing entry: the MCP-standard keys only (docs/protocol.md §11 B15)."""
        return {"name": self.name, "title": self.title, "description": self.description,
                "inputSchema": self.input_schema, "outputSchema": self.output_schema,
                "annotations": self.annotations}

    def validate(self, arguments: Any) -> dict[str, Any]:
        """Validate ``arguments`` against the input schema; keyword arguments for the tool."""
        if not isinstance(arguments, dict):
            raise ToolCallError(
                ToolErrorType.INVALID_ARGS,
                f"Invalid arguments for tool '{self.name}': expected an object of named arguments, "
                f"got {type(arguments).__name__}.",
            )
        try:
            model = self.arguments_model.model_validate(arguments)
        except PydanticValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}"
                for err in exc.errors(include_url=False)
            )
            raise ToolCallError(
                ToolErrorType.INVALID_ARGS,
                f"Invalid arguments for tool '{self.name}': {problems}. The tool's input schema "
                "(tools/list) says which arguments it takes.",
            ) from None
        # Only what the caller gave: parameters left out keep the function's own defaults.
        kwargs = {self.param_names[name]: getattr(model, name) for name in model.model_fields_set
                  if name in self.param_names}
        if model.model_extra:
            kwargs.update(model.model_extra)
        return kwargs

    def serialize(self, value: Any) -> ToolResult:
        """Turn a tool's return value into the kind-A result (text content + structured content)."""
        if isinstance(value, ToolResult):
            return value
        if self._returns is not None:
            try:
                data = self._returns.dump_python(value, mode="json")
            except Exception:
                data = to_jsonable_python(value, fallback=str)
        else:
            data = to_jsonable_python(value, fallback=str)
        if data is None:
            return ToolResult(content=[], structured_content=None if not self.output_schema
                              else {"result": None}, data=None)
        wrap = not isinstance(data, dict) or (self.output_schema is not None and self.wraps_result)
        structured = {"result": data} if wrap else data
        return ToolResult(content=[{"type": "text", "text": _text(data)}], structured_content=structured,
                          data=data)


_SECTION_RE = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns|Return|Yields|"
    r"Raises|Examples?|Notes?|Warnings?|See Also|Attributes|Todo):\s*$"
)
_ARG_RE = re.compile(r"^(\*{0,2}[A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_RE = re.compile(r"^:param\s+(?:[^:]*\s)?([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into (description, {parameter: description}).

    Google style (``Args:`` with indented ``name (type): text`` entries, continuation lines
    indented deeper) and Sphinx ``:param name: text`` lines are understood. The description is the
    text before the first section.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    desc: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    base_indent: int | None = None
    for line in lines:
        stripped = line.strip()
        sphinx = _SPHINX_RE.match(stripped)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            section = "sphinx"
            continue
        head = _SECTION_RE.match(stripped)
        if head and (len(line) - len(line.lstrip())) == 0:
            section, current, base_indent = head.group(1), None, None
            continue
        if section is None:
            desc.append(line)
            continue
        if section in ("Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"):
            if not stripped:
                current = None
                continue
            indent = len(line) - len(line.lstrip())
            if base_indent is None:
                base_indent = indent
            match = _ARG_RE.match(stripped)
            if match and indent <= base_indent:
                current = match.group(1).lstrip("*")
                params[current] = match.group(3).strip()
            elif current is not None:
                params[current] = (params[current] + " " + stripped).strip()
        elif section == "sphinx" and current is not None and stripped and not stripped.startswith(":"):
            params[current] = (params[current] + " " + stripped).strip()
    return "\n".join(desc).strip(), params


def _strip_titles(schema: Any) -> Any:
    """Remove Pydantic's generated ``title`` keywords (keeps properties that are *named* title)."""
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
                out[key] = {k: _strip_titles(v) for k, v in value.items()}
            else:
                out[key] = _strip_titles(value)
        return out
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


def _has_description(annotation: Any) -> bool:
    if typing.get_origin(annotation) is Annotated:
        return any(isinstance(m, FieldInfo) and m.description for m in annotation.__metadata__)
    return False


def build_spec(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    mode: str | None = None,
    timeout_s: float | None = None,
    description: str | None = None,
    title: str | None = None,
    annotations: dict[str, Any] | None = None,
) -> ToolSpec:
    """Inspect a (bound) function and build its ``ToolSpec``. Raises ``RuleViolation`` on a bad tool."""
    tool_name = name or getattr(fn, "__name__", None) or type(fn).__name__
    _check_name(tool_name)
    if mode is not None and mode not in _MODES:
        raise ConfigError(f"Invalid mode {mode!r} for tool '{tool_name}'. Use 'simulation', "
                          "'production', or None (available in every mode).")
    if timeout_s is not None and not timeout_s > 0:
        raise ConfigError(f"timeout_s of tool '{tool_name}' must be positive, got {timeout_s!r}.")
    target = inspect.unwrap(fn)
    doc_desc, doc_params = parse_docstring(inspect.getdoc(target))
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception as exc:
        raise RuleViolation(
            f"Tool '{tool_name}': its type annotations cannot be resolved ({exc}). Import every type "
            "used in the signature at module level."
        ) from exc
    sig = inspect.signature(fn)
    fields: dict[str, Any] = {}
    param_names: dict[str, str] = {}
    allow_extra = False
    for index, param in enumerate(sig.parameters.values()):
        if param.kind is param.VAR_KEYWORD:
            allow_extra = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.POSITIONAL_ONLY):
            raise RuleViolation(
                f"Tool '{tool_name}': parameter '{param.name}' is positional-only or *args; tools are "
                "called with named arguments only. Make it a regular or keyword-only parameter."
            )
        annotation = hints.get(param.name, Any)
        default = PydanticUndefined if param.default is param.empty else param.default
        desc = None if _has_description(annotation) else doc_params.get(param.name)
        # Internal field names avoid clashes with BaseModel attributes (a parameter called
        # ``json`` or ``schema``); the alias is what the schema and the caller see.
        info = Field(default=default, alias=param.name, description=desc) if desc else Field(
            default=default, alias=param.name)
        fields[f"p{index}"] = (annotation, info)
        param_names[f"p{index}"] = param.name
    try:
        model = create_model(  # type: ignore[call-overload]
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="allow" if allow_extra else "forbid", arbitrary_types_allowed=True,
                                  populate_by_name=False),
            **fields,
        )
        input_schema = _strip_titles(model.model_json_schema(by_alias=True))
    except Exception as exc:
        raise RuleViolation(
            f"Tool '{tool_name}': no JSON Schema can be derived from its signature ({exc}). Use "
            "JSON-compatible parameter types (str, int, float, bool, list, dict, Literal, Optional, "
            "Pydantic models, TypedDicts)."
        ) from exc
    input_schema.setdefault("properties", {})
    input_schema["additionalProperties"] = allow_extra
    output_schema, returns, wraps = _output_schema(hints.get("return", inspect.Signature.empty))
    return ToolSpec(
        name=tool_name, fn=fn, description=description if description is not None else doc_desc,
        mode=mode, timeout_s=timeout_s, input_schema=input_schema, output_schema=output_schema,
        arguments_model=model, is_async=inspect.iscoroutinefunction(target), title=title,
        annotations=annotations,
        param_names=param_names, wraps_result=wraps,
        _returns=returns,
    )


def _output_schema(ret: Any) -> tuple[dict[str, Any] | None, TypeAdapter[Any] | None, bool]:
    """(outputSchema, adapter for the return value, whether the value is wrapped as ``result``)."""
    if ret is inspect.Signature.empty or ret is None or ret is type(None) or ret is Any:
        return None, None, True
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(ret)
        schema = _strip_titles(adapter.json_schema(mode="serialization"))
    except Exception:
        return None, None, True
    if schema.get("type") == "object" and "$ref" not in schema:
        return schema, adapter, False
    if "$ref" in schema and isinstance(schema.get("$defs"), dict):
        ref = schema["$ref"].rsplit("/", 1)[-1]
        if schema["$defs"].get(ref, {}).get("type") == "object":
            return schema, adapter, False
    defs = schema.pop("$defs", None)
    # ``x-fastmcp-wrap-result`` (an extension keyword inside the schema, as upstream sends it) tells
    # FastMCP clients to unwrap ``{"result": ...}`` into the plain value.
    wrapped: dict[str, Any] = {"type": "object", "properties": {"result": schema}, "required": ["result"],
                               "x-fastmcp-wrap-result": True}
    if defs:
        wrapped["$defs"] = defs
    return wrapped, adapter, True


def _check_name(name: str) -> None:
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

_TOOL_ATTR = "__openenv_tool__"


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    mode: str | None = None,
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
        if mode is not None and mode not in _MODES:
            raise ConfigError(f"Invalid mode {mode!r} for tool '{tool_name}'. Use 'simulation', "
                              "'production', or None (available in every mode).")
        _check_name(tool_name)
        options = {"name": tool_name, "mode": mode, "timeout_s": timeout_s, "description": description,
                   "title": title, "annotations": annotations}
        setattr(func, _TOOL_ATTR, options)
        return func

    if fn is not None:
        return mark(fn)
    return mark


# -- the registry --------------------------------------------------------------------------------


class ToolRegistry:
    """The tools of one env instance, with mode filtering, validation, deadlines and error classes.

    Thread-safe for registration and lookup. ``close()`` stops the worker threads of sync tools.
    """

    def __init__(self, *, default_timeout_s: float | None = DEFAULT_TOOL_TIMEOUT_S,
                 inline_sync: bool = False) -> None:
        self.default_timeout_s = default_timeout_s
        # Thread-affine envs run sync tool bodies on their own thread (no deadline enforcement).
        self.inline_sync = inline_sync
        self._by_name: dict[str, dict[str | None, ToolSpec]] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    # registration

    def add(self, fn: Callable[..., Any], **options: Any) -> ToolSpec:
        """Register ``fn`` (options as for ``@tool``; defaults from a ``@tool`` mark on ``fn``)."""
        marked = dict(getattr(inspect.unwrap(fn), _TOOL_ATTR, None) or {})
        marked.update({k: v for k, v in options.items() if v is not None})
        spec = build_spec(fn, **marked)
        return self.add_spec(spec)

    def add_spec(self, spec: ToolSpec) -> ToolSpec:
        """Register a built spec. Refuses reserved names and overlapping same-name variants."""
        _check_name(spec.name)
        with self._lock:
            variants = self._by_name.setdefault(spec.name, {})
            clash = [m for m in variants if m is None or spec.mode is None or m == spec.mode]
            if clash:
                where = "every mode" if spec.mode is None else f"{spec.mode} mode"
                raise RuleViolation(
                    f"Tool '{spec.name}' is already registered for "
                    f"{'every mode' if clash[0] is None else clash[0] + ' mode'}; another variant for "
                    f"{where} would make calls ambiguous. Remove the first one (remove_tool) or give "
                    "the variants distinct modes ('simulation' and 'production')."
                )
            variants[spec.mode] = spec
        return spec

    def remove(self, name: str, mode: str | None = None) -> None:
        """Remove one variant of a tool (``KeyError`` if it does not exist)."""
        with self._lock:
            variants = self._by_name[name]
            del variants[mode]
            if not variants:
                del self._by_name[name]

    # lookup

    def visible(self, mode: str | None) -> list[ToolSpec]:
        """Tools visible in ``mode``, in registration order."""
        with self._lock:
            items = [dict(v) for v in self._by_name.values()]
        out = []
        for variants in items:
            spec = variants.get(None) or variants.get(mode)
            if spec is not None:
                out.append(spec)
        return out

    def get(self, name: str, mode: str | None) -> ToolSpec:
        """The variant of ``name`` visible in ``mode``; ``ToolCallError(tool_not_found)`` otherwise."""
        with self._lock:
            variants = dict(self._by_name.get(name, {}))
        spec = variants.get(None) or variants.get(mode)
        if spec is not None:
            return spec
        if variants:
            other = ", ".join(sorted(m for m in variants if m))
            raise ToolCallError(
                ToolErrorType.TOOL_NOT_FOUND,
                f"Tool '{name}' not available in {mode} mode (it exists only in {other} mode).",
            )
        known = [s.name for s in self.visible(mode)]
        raise ToolCallError(
            ToolErrorType.TOOL_NOT_FOUND,
            f"Unknown tool: '{name}'.{did_you_mean(name, known)} Available tools: "
            f"{', '.join(known) if known else 'none'}.",
        )

    # calling

    def _deadline(self, spec: ToolSpec, timeout_s: float | None) -> float | None:
        if timeout_s is not None:
            return timeout_s
        return spec.timeout_s if spec.timeout_s is not None else self.default_timeout_s

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(4, thread_name_prefix="openenv-tool")
                # Idle workers exit when the pool is collected, even if close() is never called.
                weakref.finalize(self, self._pool.shutdown, wait=False)
            return self._pool

    def call(self, name: str, arguments: Any, *, mode: str | None,
             timeout_s: float | None = None) -> tuple[ToolSpec, Any]:
        """Look up, validate and run a tool from synchronous code. Returns (spec, raw value).

        Raises ``ToolCallError`` classified by where the call failed.
        """
        spec = self.get(name, mode)
        kwargs = spec.validate(arguments)
        deadline = self._deadline(spec, timeout_s)
        try:
            if spec.is_async:
                return spec, self._run_coroutine(spec, kwargs, deadline)
            if self.inline_sync or deadline is None:
                return spec, _guarded(spec.fn, kwargs)
            future = self._executor().submit(_guarded, spec.fn, kwargs)
            try:
                return spec, future.result(deadline)
            except TimeoutError:
                future.cancel()
                raise _timeout(spec, deadline) from None
        except _BodyError as exc:
            raise _execution_error(spec, exc.original) from exc.original
        except (ToolCallError, KeyboardInterrupt):
            raise
        except (Exception, SystemExit) as exc:  # e.g. the worker pool was shut down
            raise _execution_error(spec, exc) from exc

    def _run_coroutine(self, spec: ToolSpec, kwargs: dict[str, Any], deadline: float | None) -> Any:
        async def run() -> Any:
            try:
                return await asyncio.wait_for(_guarded_async(spec.fn, kwargs), deadline)
            except TimeoutError:
                raise _timeout(spec, deadline) from None  # type: ignore[arg-type]

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(run())
        # Called from a thread that runs an event loop (an inline env): use a helper thread.
        return self._executor().submit(asyncio.run, run()).result()

    async def call_async(self, name: str, arguments: Any, *, mode: str | None,
                         timeout_s: float | None = None) -> tuple[ToolSpec, Any]:
        """The async twin of ``call``: async tools are awaited, sync ones run on a worker thread."""
        spec = self.get(name, mode)
        kwargs = spec.validate(arguments)
        deadline = self._deadline(spec, timeout_s)
        try:
            if spec.is_async:
                awaitable: Any = _guarded_async(spec.fn, kwargs)
            elif self.inline_sync:
                return spec, _guarded(spec.fn, kwargs)
            else:
                loop = asyncio.get_running_loop()
                awaitable = loop.run_in_executor(self._executor(), _guarded, spec.fn, kwargs)
            try:
                return spec, await asyncio.wait_for(awaitable, deadline)
            except TimeoutError:
                raise _timeout(spec, deadline) from None  # type: ignore[arg-type]
        except _BodyError as exc:
            raise _execution_error(spec, exc.original) from exc.original
        except (ToolCallError, KeyboardInterrupt):
            raise
        except (Exception, SystemExit) as exc:
            raise _execution_error(spec, exc) from exc

    def close(self) -> None:
        """Stop the worker threads (a tool still running keeps its thread until it returns)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


class _BodyError(Exception):
    """Carries an exception raised by a tool body, so it is never mistaken for the deadline."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


def _guarded(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    try:
        return fn(**kwargs)
    except ToolCallError:
        raise
    except (Exception, SystemExit) as exc:
        raise _BodyError(exc) from exc


async def _guarded_async(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    try:
        return await fn(**kwargs)
    except ToolCallError:
        raise
    except (Exception, SystemExit) as exc:
        raise _BodyError(exc) from exc


def _timeout(spec: ToolSpec, deadline: float) -> ToolCallError:
    return ToolCallError(ToolErrorType.TIMEOUT, f"Tool '{spec.name}' timed out after {deadline} seconds")


def _execution_error(spec: ToolSpec, exc: BaseException) -> ToolCallError:
    text = str(exc) or type(exc).__name__
    return ToolCallError(ToolErrorType.EXECUTION_ERROR, f"Error calling tool '{spec.name}': {text}")


# -- the environment base ------------------------------------------------------------------------


ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)


class ToolEnvironment(Environment[ActT, ObsT, StateT], Generic[ActT, ObsT, StateT]):
    """An environment whose actions are tool calls (plus, optionally, actions of its own).

    * Tools: methods marked ``@tool`` (collected per instance, bound to it) and functions added
      with ``add_tool`` at run time. The listing and every call are filtered by ``self.mode``.
    * ``step`` handles ``ListToolsAction`` and ``CallToolAction``; any other action goes to
      ``step_other`` (declare its type with ``other_action_type``, or parametrise
      ``ToolEnvironment[MyAction, MyObservation, MyState]``).
    * Rewards: ``reward_for_tool_call`` decides reward and done of every tool call, on every
      path (``/ws`` steps, HTTP steps and JSON-RPC ``tools/call`` all run through ``step``).
    * Episode bookkeeping: the default ``reset``/``state`` keep a ``State`` whose ``step_count``
      counts every step; override them (and ``step_other``) for a richer env.

    Sync by default (the session manager runs ``step`` on the session's worker; sync tool bodies
    run on a tool worker thread under their deadline). An ``async`` tool, or an override of
    ``step_other_async`` or ``reset_async``, makes the env async: ``step_async`` then awaits tool
    calls on the event loop. With ``THREAD_AFFINITY`` or ``BLOCKING = False`` sync tool bodies run
    inline on the env's thread, without a deadline (the session's ``step_timeout_s`` still applies).
    """

    action_type: ClassVar[type[Action]] = ToolAction
    observation_type: ClassVar[type[Observation]] = CallToolObservation
    #: What the default ``reset`` returns (``GET /schema`` → ``reset_observation``).
    reset_observation_type: ClassVar[type[Observation]] = Observation
    #: Non-tool actions this env accepts (validated when the object's ``type`` is not an MCP one).
    other_action_type: ClassVar[type[Action] | None] = None
    #: Deadline of tool calls that set none themselves.
    tool_timeout_s: ClassVar[float | None] = DEFAULT_TOOL_TIMEOUT_S

    __tool_methods__: ClassVar[tuple[str, ...]] = ()
    __async_tools__: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # ``ToolEnvironment[Any, ...]``: typing.Any is a class on Python 3.11, so the kernel's type
        # inference may have stored it; forget such non-model entries (the base's types apply).
        for attr, base in (("action_type", Action), ("observation_type", Observation), ("state_type", State)):
            value = cls.__dict__.get(attr)
            if value is not None and not (isinstance(value, type) and issubclass(value, base)):
                delattr(cls, attr)
        # A generic parameter (ToolEnvironment[MyAction, ...]) names the env's own action type.
        inferred = cls.__dict__.get("action_type")
        if inferred is not None and not issubclass(inferred, ToolAction):
            if issubclass(inferred, ListToolsAction | CallToolAction) or inferred is Action:
                cls.action_type = ToolAction.accepting(cls.other_action_type)
            else:
                cls.other_action_type = inferred
                cls.action_type = ToolAction.accepting(inferred)
        elif "other_action_type" in cls.__dict__:
            cls.action_type = ToolAction.accepting(cls.other_action_type)
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            for attr, value in klass.__dict__.items():
                func = value.__func__ if isinstance(value, staticmethod | classmethod) else value
                options = getattr(func, _TOOL_ATTR, None)
                if options is None:
                    if attr in names:  # overridden by a non-tool attribute
                        names.remove(attr)
                    continue
                if attr in CONTROL_NAMES:
                    raise RuleViolation(f"{cls.__qualname__}.{attr}: reset, step, state and close "
                                        "cannot be tools; rename the method.")
                if attr not in names:
                    names.append(attr)
        cls.__tool_methods__ = tuple(names)
        # An async tool makes the env async: the session manager then awaits step_async on the loop.
        cls.__async_tools__ = any(inspect.iscoroutinefunction(getattr(cls, n)) for n in names)

    def __init__(self, transform: Any = None, rubric: Any = None) -> None:
        super().__init__(transform=transform, rubric=rubric)
        self._episode = State(episode_id=str(uuid.uuid4()), step_count=0)

    # -- tools ----------------------------------------------------------------------------------

    @property
    def tool_registry(self) -> ToolRegistry:
        """This instance's registry (built on first use from the ``@tool`` methods)."""
        registry: ToolRegistry | None = self.__dict__.get("_tool_registry")
        if registry is None:
            # Thread-affine envs keep tool bodies on their own thread; non-blocking envs declared
            # their work cheap. Both run sync tool bodies inline, without a deadline.
            inline = bool(self.THREAD_AFFINITY) or not self.BLOCKING
            registry = ToolRegistry(default_timeout_s=self.tool_timeout_s, inline_sync=inline)
            for attr in type(self).__tool_methods__:
                registry.add(getattr(self, attr))
            self.__dict__["_tool_registry"] = registry
        return registry

    def add_tool(self, fn: Callable[..., Any], **options: Any) -> ToolSpec:
        """Register a tool at run time (same options as ``@tool``; reserved names are refused)."""
        return self.tool_registry.add(fn, **options)

    def remove_tool(self, name: str, mode: str | None = None) -> None:
        """Remove a tool variant added earlier."""
        self.tool_registry.remove(name, mode)

    def list_tools(self) -> list[ToolSpec]:
        """The tools visible in this env's mode."""
        return self.tool_registry.visible(self.mode)

    # -- hooks for subclasses -------------------------------------------------------------------

    def reward_for_tool_call(
        self, tool_name: str, arguments: dict[str, Any], result: Any, error: ToolError | None
    ) -> tuple[float | None, bool]:
        """Reward and done after a tool call (``result`` is the tool's raw return value, ``None``
        on error). Default: no reward, not done."""
        return None, False

    def step_other(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """Handle an action that is not a tool action. Override it with ``other_action_type``."""
        raise NotImplementedError(
            f"{type(self).__qualname__} accepts only list_tools and call_tool actions; to accept "
            f"{type(action).__name__}, set other_action_type and implement step_other."
        )

    async def step_other_async(self, action: Action, timeout_s: float | None = None,
                               **kwargs: Any) -> Observation:
        """Async twin of ``step_other``; overriding it makes the env async."""
        return self.step_other(action, timeout_s=timeout_s, **kwargs)

    @classmethod
    def is_async(cls) -> bool:
        return (cls.__async_tools__ or cls.step_other_async is not ToolEnvironment.step_other_async
                or cls.reset_async is not Environment.reset_async
                or cls.step_async is not ToolEnvironment.step_async)

    # -- the protocol ---------------------------------------------------------------------------

    def reset(self, seed: int | None = None, episode_id: str | None = None,  # type: ignore[override]
              **kwargs: Any) -> Observation:
        """Start a new episode (new ``episode_id`` unless given, ``step_count`` 0)."""
        self._episode = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return Observation(done=False, reward=0.0)

    @property
    def state(self) -> State:  # type: ignore[override]
        episode = self.__dict__.get("_episode")
        if episode is None:
            episode = self.__dict__["_episode"] = State(episode_id=str(uuid.uuid4()), step_count=0)
        return episode  # type: ignore[no-any-return]

    def _count_step(self) -> None:
        episode = self.__dict__.get("_episode")
        if episode is None:  # a subclass that skipped super().__init__()
            episode = self.__dict__["_episode"] = State(episode_id=str(uuid.uuid4()), step_count=0)
        episode.step_count += 1

    def step(self, action: Action, timeout_s: float | None = None,  # type: ignore[override]
             **kwargs: Any) -> Observation:
        self._count_step()
        if isinstance(action, ListToolsAction):
            return self._list_observation()
        if isinstance(action, CallToolAction):
            try:
                spec, value = self.tool_registry.call(action.tool_name, action.arguments, mode=self.mode,
                                                      timeout_s=timeout_s)
            except ToolCallError as exc:
                return self._call_observation(action, None, None, exc)
            return self._call_observation(action, spec, value, None)
        return self.step_other(action, timeout_s=timeout_s, **kwargs)

    async def step_async(self, action: Action, timeout_s: float | None = None,  # type: ignore[override]
                         **kwargs: Any) -> Observation:
        self._count_step()
        if isinstance(action, ListToolsAction):
            return self._list_observation()
        if isinstance(action, CallToolAction):
            try:
                spec, value = await self.tool_registry.call_async(
                    action.tool_name, action.arguments, mode=self.mode, timeout_s=timeout_s)
            except ToolCallError as exc:
                return self._call_observation(action, None, None, exc)
            return self._call_observation(action, spec, value, None)
        return await self.step_other_async(action, timeout_s=timeout_s, **kwargs)

    def close(self) -> None:
        registry: ToolRegistry | None = self.__dict__.get("_tool_registry")
        if registry is not None:
            registry.close()

    # -- helpers --------------------------------------------------------------------------------

    def _list_observation(self) -> ListToolsObservation:
        try:
            tools = [spec.step_entry() for spec in self.list_tools()]
        except Exception as exc:  # a broken runtime tool must not break the session
            return ListToolsObservation(tools=[], metadata={"error": str(exc), "error_type": "list_tools_failed"})
        return ListToolsObservation(tools=tools)

    def _call_observation(self, action: CallToolAction, spec: ToolSpec | None, value: Any,
                          failure: ToolCallError | None) -> CallToolObservation:
        error = failure.to_tool_error() if failure is not None else None
        result = None
        if spec is not None:
            try:
                result = spec.serialize(value).to_wire()
            except Exception as exc:
                error = ToolError(error_type=ToolErrorType.EXECUTION_ERROR,
                                  message=f"Tool '{action.tool_name}' returned a value that cannot be "
                                  f"serialized to JSON: {exc}")
                value = None
        reward, done = self.reward_for_tool_call(action.tool_name, action.arguments,
                                                 value if error is None else None, error)
        return CallToolObservation(tool_name=action.tool_name, result=result, error=error,
                                   reward=reward, done=done)
