"""Plugin hooks of openenvkit-provider-kubernetes: the ``kubernetes`` provider.

A lazy reference only: importing this module (as ``openenv plugins list`` does) never imports the
``kubernetes`` client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["openenv_register_providers"]


@hookimpl
def openenv_register_providers(registry: Registry) -> None:
    """Register ``kubernetes``: hardened Pods reached by port-forward through the API server."""
    registry.register(
        "kubernetes", "openenv_provider_kubernetes.provider:KubernetesProvider",
        description="Hardened Pods (+ Service) on a Kubernetes cluster; port-forward through the API or Service URL",
    )
