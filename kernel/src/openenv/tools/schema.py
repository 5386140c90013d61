"""A tool's schemas from its annotations (through Pydantic), its validation and its results.

``build_spec`` turns a (bound) function into a ``ToolSpec``: the input schema (lists, dicts,
optionals, literals, nested models, defaults; ``additionalProperties`` false unless the function
takes ``**kwargs``), the output schema from the return annotation, and the arguments model that
validates every call before the tool runs.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic import ValidationError as PydanticValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, to_jsonable_python

from openenv.errors import ConfigError, RuleViolation
from openenv.tools.decorator import check_mode, check_name
from openenv.tools.docstrings import parse_docstring
from openenv.tools.errors import ToolCallError
from openenv.tools.wire import Tool, ToolErrorType

__all__ = ["ToolResult", "ToolSpec", "build_spec"]


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
    check_name(tool_name)
    check_mode(mode, tool_name)
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


