"""OpenEnv Swarm provider: env servers as Docker Swarm services.

The provider lives in ``openenv_provider_swarm.provider:SwarmProvider``; this package module stays
import-light so that plugin discovery never imports the Docker SDK.
"""

from __future__ import annotations

__all__: list[str] = []
