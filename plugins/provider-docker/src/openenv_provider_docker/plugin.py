"""Plugin hooks of openenvkit-provider-docker: the ``docker`` provider and the ``build`` command.

Lazy references only: importing this module (as ``openenv plugins list`` does) never imports the
Docker SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import CommandRegistry, ProviderRegistry

__all__ = ["openenv_register_commands", "openenv_register_providers"]


@hookimpl
def openenv_register_providers(registry: ProviderRegistry) -> None:
    """Register ``docker``: hardened containers on Docker Engine or Podman's Docker API."""
    registry.register(
        "docker", "openenv_provider_docker.provider:DockerProvider",
        description="Hardened containers on Docker Engine (or Podman via DOCKER_HOST); port on 127.0.0.1",
    )


@hookimpl
def openenv_register_commands(registry: CommandRegistry) -> None:
    """Register ``openenv build`` and ``openenv push``."""
    registry.register(
        "build", "openenv_provider_docker.cli:build",
        description="Build a container image for an env package (offline install of host-built wheels).",
    )
    registry.register(
        "push", "openenv_provider_docker.push:push",
        description="Push an env to an OCI registry (built with `openenv build`) or a Hugging Face Space.",
    )
