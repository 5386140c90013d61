"""OpenEnv: isolated execution environments for agentic reinforcement learning.

The top-level names are imported lazily so that ``import openenv`` (and the CLI's start-up) stays
cheap; see ``__all__`` for the public surface.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Action": "openenv.types",
    "Observation": "openenv.types",
    "State": "openenv.types",
    "StepResult": "openenv.types",
    "EnvironmentMetadata": "openenv.types",
    "observation_payload": "openenv.types",
    "Environment": "openenv.env",
    "hookimpl": "openenv.hookspecs",
    "EnvClient": "openenv.client",
    "SyncEnvClient": "openenv.client",
    "GenericEnvClient": "openenv.client",
    "create_app": "openenv.server",
    "serve": "openenv.server",
    "ServerConfig": "openenv.server",
    "OpenEnvError": "openenv.errors",
    "CapacityError": "openenv.errors",
    "ExecutionError": "openenv.errors",
    "FactoryError": "openenv.errors",
    "SessionError": "openenv.errors",
    "SessionLostError": "openenv.errors",
    "ValidationError": "openenv.errors",
    "get_plugin_manager": "openenv.plugins",
    # Upstream OpenEnv's top-level names (docs/coming-from-openenv.md): its getting-started snippet.
    "AutoEnv": "openenv.core.auto",
    "AutoAction": "openenv.core.auto",
    "GenericAction": "openenv.core.generic_client",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:
    from openenv.client import EnvClient, GenericEnvClient, SyncEnvClient
    from openenv.core.auto import AutoAction, AutoEnv
    from openenv.core.generic_client import GenericAction
    from openenv.env import Environment
    from openenv.errors import (
        CapacityError,
        ExecutionError,
        FactoryError,
        OpenEnvError,
        SessionError,
        SessionLostError,
        ValidationError,
    )
    from openenv.hookspecs import hookimpl
    from openenv.plugins import get_plugin_manager
    from openenv.server import ServerConfig, create_app, serve
    from openenv.types import Action, EnvironmentMetadata, Observation, State, StepResult, observation_payload


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
