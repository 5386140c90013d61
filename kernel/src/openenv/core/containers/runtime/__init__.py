"""``openenv.core.containers.runtime``: upstream's provider base classes and built-in providers."""

from __future__ import annotations

from openenv.core.containers.runtime.providers import (
    ContainerProvider,
    DockerSwarmProvider,
    KubernetesProvider,
    LocalDockerProvider,
    RuntimeProvider,
)
from openenv.core.containers.runtime.uv_provider import UVProvider

__all__ = [
    "ContainerProvider",
    "DockerSwarmProvider",
    "KubernetesProvider",
    "LocalDockerProvider",
    "RuntimeProvider",
    "UVProvider",
]
