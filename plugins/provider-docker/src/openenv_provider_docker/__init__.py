"""OpenEnv Docker provider: env servers in hardened containers, and ``openenv build``.

Import the pieces from their modules (``openenv_provider_docker.provider:DockerProvider``,
``openenv_provider_docker.build:build_image``); this package module stays import-light so that
plugin discovery never imports the Docker SDK.
"""

from __future__ import annotations

__all__: list[str] = []
