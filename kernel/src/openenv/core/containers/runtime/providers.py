"""Upstream's provider contract: ``ContainerProvider`` (an image → a base URL) and ``RuntimeProvider``.

Both keep upstream's documented abstract methods and context-manager behaviour, so subclasses
written for upstream work unchanged. ``LocalDockerProvider`` runs the image through our ``docker``
provider plugin (``openenvkit-provider-docker``); Docker Swarm and upstream's Kubernetes stub are
not provided (stand-ins that fail when built, naming our provider plugins).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Literal, TypeVar

from openenv.core._unsupported import unsupported_callable

__all__ = ["ContainerProvider", "DockerSwarmProvider", "KubernetesProvider", "LocalDockerProvider",
           "RuntimeProvider", "wait_for_health"]

_ProviderT = TypeVar("_ProviderT", bound="ContainerProvider")


class ContainerProvider(ABC):
    """Starts one container from an image and gives its base URL (upstream's contract)."""

    @abstractmethod
    def start_container(self, image: str, port: int | None = None, env_vars: dict[str, str] | None = None,
                        **kwargs: Any) -> str:
        """Start a container from ``image``; return the base URL to connect to. ``RuntimeError`` on failure."""

    @abstractmethod
    def stop_container(self) -> None:
        """Stop and remove the container ``start_container`` started."""

    @abstractmethod
    def wait_for_ready(self, base_url: str, timeout_s: float = 30.0) -> None:
        """Block until the server at ``base_url`` answers; ``TimeoutError`` when it does not in time."""

    def close(self) -> None:
        """Release resources held beyond the container (SDK clients); a no-op by default."""
        return None

    def __enter__(self: _ProviderT) -> _ProviderT:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool | None:
        self.close()
        return None


class RuntimeProvider(ABC):
    """Starts an env server that is not a container (upstream's ``UVProvider``); ``with`` starts and stops it."""

    @abstractmethod
    def start(self, port: int | None = None, env_vars: dict[str, str] | None = None, **kwargs: Any) -> str:
        """Start the runtime; return its base URL."""

    @abstractmethod
    def stop(self) -> None:
        """Stop the runtime."""

    @abstractmethod
    def wait_for_ready(self, timeout_s: float = 30.0) -> None:
        """Block until the runtime answers."""

    def __enter__(self) -> RuntimeProvider:
        self.start()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        self.stop()
        return False


def wait_for_health(base_url: str, timeout_s: float) -> None:
    """Poll ``GET /health`` until it answers 200 (bounded by ``timeout_s``); ``TimeoutError`` otherwise."""
    import time
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while True:
        try:
            with urllib.request.urlopen(base_url.rstrip("/") + "/health", timeout=2.0) as reply:
                if reply.status == 200:
                    return
                last = f"HTTP {reply.status}"
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        if time.monotonic() >= deadline:
            raise TimeoutError(f"The server at {base_url} was not ready within {timeout_s:g} s ({last}).")
        time.sleep(0.2)


class LocalDockerProvider(ContainerProvider):
    """Runs the image on the local Docker engine through our ``docker`` provider plugin."""

    def __init__(self) -> None:
        self._handle: Any = None

    def start_container(self, image: str, port: int | None = None, env_vars: dict[str, str] | None = None,
                        **kwargs: Any) -> str:
        from openenv.interfaces import LaunchSpec
        from openenv.plugins import get_plugin_manager

        pm = get_plugin_manager()
        provider = pm.catalog.providers.load(pm.choose_provider(image, "docker"))()
        options = {key: value for key, value in kwargs.items() if value is not None}
        self._handle = provider.start(LaunchSpec(env=image, image=image, env_vars=dict(env_vars or {}),
                                                 options=options))
        return str(self._handle.base_url)

    def stop_container(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.stop()

    def wait_for_ready(self, base_url: str, timeout_s: float = 30.0) -> None:
        wait_for_health(base_url, timeout_s)


DockerSwarmProvider = unsupported_callable(
    "`DockerSwarmProvider`", "start replicas with a provider plugin (`openenv providers list`), e.g. "
    "from_provider(env, provider='kubernetes')", "Docker Swarm is not a provider here")
KubernetesProvider = unsupported_callable(
    "`KubernetesProvider`", "from_provider(env, provider='kubernetes') with openenvkit-provider-kubernetes",
    "Upstream's KubernetesProvider is an empty stub")
