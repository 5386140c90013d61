"""``openenv.core.containers``: upstream's provider API (``containers.runtime``), for real.

``ContainerProvider`` and ``RuntimeProvider`` keep upstream's contract, so third-party provider
packages written for upstream (``openenv-sprites``, ``openenv-openshell``) subclass them unchanged.
Any subclass works with ``EnvClient.from_docker_image(image, provider=...)`` and, discovered from
its installed distribution, appears in ``openenv providers list`` through an adapter onto our
``Provider`` interface (``openenv.core.containers.adapter``). ``LocalDockerProvider`` and
``UVProvider`` are adapters onto our ``docker`` and ``local`` provider plugins.
"""

from __future__ import annotations

__all__ = ["runtime"]

from openenv.core.containers import runtime
