"""Connecting to a Docker-API engine: Docker Engine, or Podman's Docker-compatible socket.

``connect()`` honours the Docker SDK's usual environment (``DOCKER_HOST``, ``DOCKER_TLS_VERIFY``,
``DOCKER_CERT_PATH``), pings the engine once and raises ``EngineUnavailable`` with what to do
when nothing answers. Podman: ``systemctl start podman.socket`` (or ``podman system service
--time=0 &``) and ``DOCKER_HOST=unix:///run/podman/podman.sock``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from openenv import interfaces

if TYPE_CHECKING:
    import docker

__all__ = ["EngineUnavailable", "api_version_at_least", "connect", "engine_problem", "not_found"]

_DEFAULT_HOST = "unix:///var/run/docker.sock"


class EngineUnavailable(interfaces.EngineUnavailable):
    """No Docker-API engine answers at the configured address."""


def _where() -> str:
    return os.environ.get("DOCKER_HOST") or _DEFAULT_HOST


def connect(timeout_s: float = 60.0) -> docker.DockerClient:
    """A client for the configured engine, already pinged. ``timeout_s`` bounds each API call."""
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env(timeout=int(max(1, timeout_s)))
        client.ping()
    except DockerException as exc:
        raise EngineUnavailable(
            f"No Docker engine answers at {_where()}: {exc}. Start one (`dockerd &`, or "
            "`.ci/docker-setup.sh` in this repository), or point DOCKER_HOST at a running engine, "
            "e.g. Podman: DOCKER_HOST=unix:///run/podman/podman.sock."
        ) from None
    return client


def engine_problem() -> str | None:
    """Why no engine can be used here (``None`` when one answers). For test skips and doctors."""
    try:
        client = connect(timeout_s=5)
    except EngineUnavailable as exc:
        return str(exc)
    client.close()
    return None


def api_version_at_least(client: docker.DockerClient, version: str) -> bool:
    """Whether the negotiated API version is ``version`` or newer (``"1.44"``)."""
    current = str(client.api.api_version)

    def parts(text: str) -> tuple[int, ...]:
        return tuple(int(p) for p in text.split(".") if p.isdigit())

    return parts(current) >= parts(version)


def not_found(exc: BaseException) -> bool:
    """Whether an SDK error means "no such object" (already gone: fine for idempotent cleanup)."""
    from docker.errors import NotFound

    if isinstance(exc, NotFound):
        return True
    response: Any = getattr(exc, "response", None)
    return getattr(response, "status_code", None) == 404
