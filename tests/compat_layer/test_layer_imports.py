"""The import surface: upstream's module paths and names resolve, or refuse with the alternative.

Also guards that nothing under ``openenv.core`` is imported by ``import openenv`` or the CLI.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import openenv
from openenv.core import UnsupportedFeature

#: ``openenv.core.env_server.__all__`` of upstream 0.10.
UPSTREAM_ENV_SERVER = [
    "Environment", "Transform", "TaskProvider", "Message", "ModelTokenizer", "Action", "Observation", "State",
    "SchemaResponse", "HealthResponse", "ListTasksRequest", "NumTasksRequest", "GetTaskRequest",
    "GetTaskRangeRequest", "HealthStatus", "ServerMode", "WSErrorCode", "BaseMessage", "WSIncomingMessage",
    "WSResetMessage", "WSStepMessage", "WSStateMessage", "WSCloseMessage", "WSObservationResponse",
    "WSStateResponse", "WSErrorResponse", "ConcurrencyConfig", "ServerCapacityStatus", "SessionInfo",
    "OpenEnvError", "ConcurrencyConfigurationError", "SessionCapacityError", "SessionNotFoundError",
    "SessionCreationError", "EnvironmentFactoryError", "CompositeTransform", "NullTransform", "HTTPEnvServer",
    "create_app", "create_fastapi_app", "create_web_interface_app", "WebInterfaceManager", "deserialize_action",
    "deserialize_action_with_preprocessing", "serialize_observation", "GetEndpointConfig", "Tool", "ToolError",
    "ToolErrorType", "ListToolsAction", "CallToolAction", "ListToolsObservation", "CallToolObservation",
    "WSMCPMessage", "WSMCPResponse", "RESERVED_TOOL_NAMES", "MCPEnvironment", "JsonRpcErrorCode", "JsonRpcError",
    "JsonRpcRequest", "JsonRpcResponse", "McpMethod",
]
#: Names of upstream's ``openenv.core`` beyond those.
UPSTREAM_CORE = ["EnvClient", "SyncEnvClient", "GenericEnvClient", "GenericAction", "MCPClientBase",
                 "MCPToolClient", "AnthropicClient", "LLMClient", "LLMResponse", "OpenAIClient", "ToolCall",
                 "create_llm_client"]
REFUSED = {"create_web_interface_app", "WebInterfaceManager", "GetEndpointConfig", "AnthropicClient", "LLMClient",
           "OpenAIClient", "create_llm_client"}

MODULES = [
    "openenv.core", "openenv.core.env_server", "openenv.core.env_server.interfaces", "openenv.core.env_server.types",
    "openenv.core.env_server.http_server", "openenv.core.env_server.mcp_environment",
    "openenv.core.env_server.mcp_types", "openenv.core.env_server.serialization",
    "openenv.core.env_server.exceptions", "openenv.core.env_server.base_transforms", "openenv.core.env_client",
    "openenv.core.client_types", "openenv.core.generic_client", "openenv.core.sync_client",
    "openenv.core.mcp_client", "openenv.core.rubrics", "openenv.core.utils",
]


@pytest.mark.parametrize("module", MODULES)
def test_upstream_module_paths_import(module: str) -> None:
    mod = importlib.import_module(module)
    for name in getattr(mod, "__all__", []):
        getattr(mod, name)


@pytest.mark.parametrize("name", UPSTREAM_ENV_SERVER + UPSTREAM_CORE)
def test_every_upstream_name_resolves_or_refuses_with_an_alternative(name: str) -> None:
    import openenv.core as core

    if name in REFUSED:
        stand_in = getattr(core, name)  # importing works; using it fails (issue 32)
        with pytest.raises(UnsupportedFeature) as info:
            stand_in()
        assert "Instead:" in str(info.value) and isinstance(info.value, ImportError)
    else:
        assert getattr(core, name) is not None


def test_star_import_of_env_server() -> None:
    namespace: dict[str, object] = {}
    exec("from openenv.core.env_server import *", namespace)
    assert {"Environment", "create_app", "MCPEnvironment", "CallToolAction"} <= set(namespace)


def test_data_types_are_the_kernel_s() -> None:
    from openenv.core.client_types import StepResult
    from openenv.core.env_server import types
    from openenv.core.env_server.mcp_types import CallToolAction
    from openenv.core.env_server.serialization import deserialize_action, serialize_observation

    assert (types.Action, types.Observation, types.State) == (openenv.Action, openenv.Observation, openenv.State)
    assert StepResult is openenv.StepResult
    assert isinstance(deserialize_action({"type": "call_tool", "tool_name": "t"}, types.Action), CallToolAction)
    assert serialize_observation(types.Observation(reward=1, metadata={"k": 1})) == {
        "observation": {"metadata": {"k": 1}}, "reward": 1, "done": False, "metadata": {"k": 1}}


def test_boolean_rewards_are_refused_at_construction() -> None:
    """A deliberate difference (docs/protocol.md §11 B6): upstream accepted ``reward=True``."""
    from pydantic import ValidationError

    from openenv.core.env_server.types import Observation

    with pytest.raises(ValidationError, match="not a boolean"):
        Observation(reward=True)


def test_exceptions_derive_from_the_kernel_s() -> None:
    from openenv.core.env_server.exceptions import EnvironmentFactoryError, SessionCapacityError
    from openenv.errors import CapacityError, FactoryError

    err = SessionCapacityError(3, 3)
    assert isinstance(err, CapacityError) and (err.active_sessions, err.max_sessions) == (3, 3)
    assert str(err) == "Server error: Server at capacity: 3/3 sessions active. Cannot accept new connections. " \
                       "(code: CAPACITY_REACHED)"
    assert isinstance(EnvironmentFactoryError("make"), FactoryError)


@pytest.mark.parametrize(("statement", "alternative"), [
    ("from openenv.core.containers.runtime import KubernetesProvider; KubernetesProvider()", "provider='kubernetes'"),
    ("from openenv.core.llm_client import OpenAIClient; OpenAIClient()", "SDK"),
    ("from openenv.core.env_server.web_interface import create_web_interface_app; create_web_interface_app()",
     "transport plugin"),
    ("from openenv.core.env_server import GetEndpointConfig; GetEndpointConfig()", "app.add_route"),
])
def test_unsupported_features_name_the_alternative(statement: str, alternative: str) -> None:
    with pytest.raises(UnsupportedFeature) as info:
        exec(statement, {})
    assert alternative in str(info.value) and "docs/coming-from-openenv.md" in str(info.value)


def test_utils() -> None:
    from openenv.core.utils import convert_to_ws_url, run_async_safely

    async def answer() -> int:
        return 42

    assert run_async_safely(answer()) == 42
    assert convert_to_ws_url("https://h/p/") == "wss://h/p" and convert_to_ws_url("localhost:8000") == "ws://localhost:8000"


@pytest.mark.parametrize("argv", [["-c", "import openenv; openenv.__version__"], ["-m", "openenv", "--help"],
                                  ["-m", "openenv", "plugins", "list", "--json"]])
def test_openenv_core_is_never_imported_by_the_kernel_or_the_cli(argv: list[str]) -> None:
    probe = ("import atexit, json, sys; atexit.register(lambda: sys.__stderr__.write('MODULES=' + json.dumps("
             "sorted(m for m in sys.modules if m.startswith('openenv.core'))) + '\\n'))")
    if argv[0] == "-c":
        cmd = [sys.executable, "-c", probe + "; " + argv[1]]
    else:
        cmd = [sys.executable, "-c", probe + "; import runpy; sys.argv = ['openenv', *" + repr(argv[2:]) + "]; "
               "runpy.run_module('openenv', run_name='__main__', alter_sys=True)"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    line = [x for x in done.stderr.splitlines() if x.startswith("MODULES=")]
    assert line, done.stderr
    assert json.loads(line[-1].removeprefix("MODULES=")) == []
