"""``openenv.core.env_server``: upstream's env-author API, served by this OpenEnv's kernel.

Names load lazily from the submodules (``interfaces``, ``types``, ``http_server``,
``mcp_environment``, ``mcp_types``, ``serialization``, ``exceptions``, ``base_transforms``), so
importing this package is cheap. The web interface (``create_web_interface_app``,
``WebInterfaceManager``) and ``GetEndpointConfig`` are not provided: importing them works (so an app
that imports them next to supported names keeps loading), and *calling* one raises
``UnsupportedFeature`` naming the alternative.
"""

from __future__ import annotations

from typing import Any

from openenv.core._unsupported import unsupported_callable
from openenv.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(["Environment", "Transform", "TaskProvider", "Message", "ModelTokenizer"], "interfaces"),
    **dict.fromkeys([
        "Action", "Observation", "State", "EnvironmentMetadata", "SchemaResponse", "HealthResponse",
        "ListTasksRequest", "NumTasksRequest", "GetTaskRequest", "GetTaskRangeRequest", "HealthStatus",
        "ServerMode", "WSErrorCode", "BaseMessage", "WSIncomingMessage", "WSResetMessage", "WSStepMessage",
        "WSStateMessage", "WSCloseMessage", "WSObservationResponse", "WSStateResponse", "WSErrorResponse",
        "ConcurrencyConfig", "ServerCapacityStatus", "SessionInfo", "CodeExecResult",
    ], "types"),
    **dict.fromkeys([
        "OpenEnvError", "ConcurrencyConfigurationError", "SessionCapacityError", "SessionNotFoundError",
        "SessionCreationError", "EnvironmentFactoryError",
    ], "exceptions"),
    **dict.fromkeys(["CompositeTransform", "NullTransform"], "base_transforms"),
    **dict.fromkeys(["HTTPEnvServer", "create_app", "create_fastapi_app"], "http_server"),
    **dict.fromkeys(
        ["deserialize_action", "deserialize_action_with_preprocessing", "serialize_observation"], "serialization"
    ),
    **dict.fromkeys([
        "Tool", "ToolError", "ToolErrorType", "ListToolsAction", "CallToolAction", "ListToolsObservation",
        "CallToolObservation", "WSMCPMessage", "WSMCPResponse", "RESERVED_TOOL_NAMES", "JsonRpcErrorCode",
        "JsonRpcError", "JsonRpcRequest", "JsonRpcResponse", "McpMethod",
    ], "mcp_types"),
    "MCPEnvironment": "mcp_environment",
}

_REFUSED: dict[str, tuple[str, str]] = {
    "create_web_interface_app": (
        "serve the env with create_app(...); a web UI, when installed, is a transport plugin that mounts "
        "itself on every server",
        "The Gradio web interface bypassed sessions and capacity (docs/protocol.md §11 B12)",
    ),
    "WebInterfaceManager": (
        "drive the env through a normal session (EnvClient, or HTTP with an OpenEnv-Session-Id header)",
        "The web interface's shared env bypassed sessions and capacity (docs/protocol.md §11 B12)",
    ),
    "GetEndpointConfig": (
        "add routes to the app create_app returns with app.add_route(path, endpoint, methods=['GET'])",
        "Custom GET endpoints were a feature of upstream's HTTPEnvServer",
    ),
}

def _refused(name: str) -> Any:
    if name in _REFUSED:
        # A stand-in that refuses when used, never at import (docs/coming-from-openenv.md).
        alternative, why = _REFUSED[name]
        stand_in = unsupported_callable(f"`openenv.core.env_server.{name}`", alternative, why)
        globals()[name] = stand_in
        return stand_in
    raise AttributeError(f"module 'openenv.core.env_server' has no attribute {name!r}")


__getattr__, __dir__, __all__ = lazy_exports(__name__, {name: f".{sub}" for name, sub in _EXPORTS.items()},
                                             fallback=_refused)
