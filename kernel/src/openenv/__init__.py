"""OpenEnv: isolated execution environments for agentic reinforcement learning.

The top-level names are imported lazily so that ``import openenv`` (and the CLI's start-up) stays
cheap; see ``__all__`` for the public surface.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "Action": "openenv.types",
    "Observation": "openenv.types",
    "State": "openenv.types",
    "StepResult": "openenv.types",
    "EnvironmentMetadata": "openenv.types",
    "Image": "openenv.types",
    "ImageSpec": "openenv.types",
    "observation_payload": "openenv.types",
    "Environment": "openenv.env",
    "hookimpl": "openenv.hookspecs",
    "EnvClient": "openenv.client",
    "SyncEnvClient": "openenv.client",
    "GenericEnvClient": "openenv.client",
    "EnvPool": "openenv.pool",
    "SyncEnvPool": "openenv.pool",
    "PoolUnavailableError": "openenv.pool",
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
    "Task": "openenv.tasks",
    "Split": "openenv.tasks",
    "TaskSource": "openenv.tasks",
    "TaskFile": "openenv.tasks",
    "SeedTasks": "openenv.tasks",
    "InlineTasks": "openenv.tasks",
    "TaskError": "openenv.tasks",
    # Upstream OpenEnv's top-level names (docs/coming-from-openenv.md): its getting-started snippet.
    "AutoEnv": "openenv.core.auto",
    "AutoAction": "openenv.core.auto",
    "GenericAction": "openenv.core.generic_client",
}

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
    from openenv.pool import EnvPool, PoolUnavailableError, SyncEnvPool
    from openenv.server import ServerConfig, create_app, serve
    from openenv.tasks import InlineTasks, SeedTasks, Split, Task, TaskError, TaskFile, TaskSource
    from openenv.types import (
        Action,
        EnvironmentMetadata,
        Image,
        ImageSpec,
        Observation,
        State,
        StepResult,
        observation_payload,
    )


__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS, also=["__version__"])
