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

Modules: ``wire`` (listing, actions, observations), ``decorator`` (``@tool``, naming rules),
``docstrings`` and ``schema`` (schemas from annotations, validation, results), ``errors`` (error
classification), ``registry`` (``ToolRegistry``: mode variants, deadlines), ``environment``
(``ToolEnvironment``). Import from ``openenv.tools``; the submodules are an implementation detail.

This package never imports an MCP library: the kernel stays light.
"""

from __future__ import annotations

from openenv.tools.decorator import DEFAULT_TOOL_TIMEOUT_S, RESERVED_TOOL_NAMES, tool
from openenv.tools.docstrings import parse_docstring
from openenv.tools.environment import ToolEnvironment
from openenv.tools.errors import ToolCallError
from openenv.tools.registry import ToolRegistry
from openenv.tools.schema import ToolResult, ToolSpec, build_spec
from openenv.tools.wire import (
    MCP_ACTION_TYPES,
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolAction,
    ToolError,
    ToolErrorType,
    dispatch_action,
)

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
    "build_spec",
    "dispatch_action",
    "parse_docstring",
    "tool",
]
