"""``openenv.core.env_server.mcp_types``: the MCP action/observation/tool types and JSON-RPC models.

The tool types *are* the kernel's (``openenv.tools``): ``CallToolAction``, ``ListToolsAction``,
``CallToolObservation``, ``ListToolsObservation``, ``Tool``, ``ToolError``, ``ToolErrorType`` and
``RESERVED_TOOL_NAMES``. The JSON-RPC models are upstream's declarations for code that builds or
parses JSON-RPC itself; the MCP transport plugin does its own parsing.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from openenv.core.env_server.types import BaseMessage
from openenv.tools import (
    RESERVED_TOOL_NAMES,
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolError,
    ToolErrorType,
)

__all__ = [
    "RESERVED_TOOL_NAMES",
    "CallToolAction",
    "CallToolObservation",
    "JsonRpcError",
    "JsonRpcErrorCode",
    "JsonRpcRequest",
    "JsonRpcResponse",
    "ListToolsAction",
    "ListToolsObservation",
    "McpMethod",
    "Tool",
    "ToolError",
    "ToolErrorType",
    "WSMCPMessage",
    "WSMCPResponse",
]


class JsonRpcErrorCode(int, Enum):
    """Standard JSON-RPC 2.0 error codes."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    SERVER_ERROR = -32000


_DEFAULT_MESSAGES = {
    JsonRpcErrorCode.PARSE_ERROR: "Parse error",
    JsonRpcErrorCode.INVALID_REQUEST: "Invalid Request",
    JsonRpcErrorCode.METHOD_NOT_FOUND: "Method not found",
    JsonRpcErrorCode.INVALID_PARAMS: "Invalid params",
    JsonRpcErrorCode.INTERNAL_ERROR: "Internal error",
    JsonRpcErrorCode.SERVER_ERROR: "Server error",
}


class McpMethod(str, Enum):
    """The MCP methods of upstream's dialect."""

    TOOLS_LIST = "tools/list"
    TOOLS_CALL = "tools/call"


class JsonRpcError(BaseModel):
    """A JSON-RPC error object."""

    model_config = ConfigDict(extra="forbid")

    code: int
    message: str
    data: Any = None

    @classmethod
    def from_code(cls, code: JsonRpcErrorCode, message: str | None = None, data: Any = None) -> JsonRpcError:
        return cls(code=code.value, message=message or _DEFAULT_MESSAGES.get(code, "Unknown error"), data=data)


class JsonRpcRequest(BaseModel):
    """A JSON-RPC 2.0 request."""

    model_config = ConfigDict(extra="forbid")

    jsonrpc: Literal["2.0"]
    method: str
    params: dict[str, Any] = Field(default_factory=dict)
    id: str | int | None = None


class JsonRpcResponse(BaseModel):
    """A JSON-RPC 2.0 response; ``model_dump`` keeps ``result`` or ``error``, never both."""

    model_config = ConfigDict(extra="forbid")

    jsonrpc: Literal["2.0"] = "2.0"
    result: Any = None
    error: JsonRpcError | None = None
    id: str | int | None = None

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        data: dict[str, Any] = {"jsonrpc": self.jsonrpc, "id": self.id}
        if self.error is not None:
            data["error"] = self.error.model_dump()
        else:
            data["result"] = self.result
        return data

    def model_dump_json(self, **kwargs: Any) -> str:  # type: ignore[override]
        import json

        return json.dumps(self.model_dump())

    @classmethod
    def success(cls, result: Any, request_id: str | int | None = None) -> JsonRpcResponse:
        return cls(result=result, id=request_id)

    @classmethod
    def error_response(cls, code: JsonRpcErrorCode, message: str | None = None, data: Any = None,
                       request_id: str | int | None = None) -> JsonRpcResponse:
        return cls(error=JsonRpcError.from_code(code, message, data), id=request_id)


class WSMCPMessage(BaseMessage):
    """A JSON-RPC request tunnelled in ``/ws`` (``{"type": "mcp", "data": {...}}``)."""

    type: Literal["mcp"] = "mcp"
    data: dict[str, Any]


class WSMCPResponse(BaseModel):
    """The reply frame of a tunnelled JSON-RPC request."""

    model_config = ConfigDict(extra="forbid")

    type: str = "mcp"
    data: dict[str, Any]
