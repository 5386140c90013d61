"""Echo environment: echoes a message back, reward 0.1 per character.

Names are imported on first use: loading the plugin hook module (``openenv_env_echo.plugin``),
which imports this package, must not import the env or the client stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_env_echo.client import EchoEnvClient
    from openenv_env_echo.env import AsyncEchoEnv, EchoEnv
    from openenv_env_echo.models import EchoAction, EchoObservation

__all__ = ["AsyncEchoEnv", "EchoAction", "EchoEnv", "EchoEnvClient", "EchoObservation"]

_EXPORTS = {
    "AsyncEchoEnv": "openenv_env_echo.env",
    "EchoEnv": "openenv_env_echo.env",
    "EchoAction": "openenv_env_echo.models",
    "EchoObservation": "openenv_env_echo.models",
    "EchoEnvClient": "openenv_env_echo.client",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_env_echo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
