"""What the ``docker`` and ``swarm`` providers share: the handle's life and the provider's start/gc.

A container (``docker``) and a service (``swarm``) differ in how they are created, watched and
removed; everything around that is the same and lives here.

Promises:

* ``EngineHandle.stop`` runs once (idempotent, thread-safe): the subclass's ``_remove`` (graceful,
  forced after ``timeout_s``), then, whatever happened there, the handle is forgotten and the
  owner network released. Handles still live when the interpreter exits normally are stopped by
  one ``atexit`` hook (``stop_live_handles``); a process killed with SIGKILL leaves them to ``gc``.
* ``is_running``/``logs`` treat a resource the engine no longer knows as stopped and silent.
* ``EngineProvider.start`` resolves the image, labels everything with this process's
  ``owner_id()``, takes the owner's isolated network when asked, creates the resource and returns
  only once it is ready. Any failure (a timeout, a bad option, Ctrl-C) removes what was created
  and releases the network before re-raising.
* ``EngineProvider.gc_containers``/``gc_networks`` remove this provider's containers and networks
  whose owner process is gone, and nothing else (selection by ``naming.label_filters``).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from abc import abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from openenv.interfaces import LaunchSpec, Provider, ProviderHandle, owner_alive, owner_id
from openenv_provider_docker import networks
from openenv_provider_docker.engine import connect, not_found
from openenv_provider_docker.images import ResolvedImage, resolve_image
from openenv_provider_docker.naming import CONTAINER_PORT, LABEL_OWNER, label_filters, managed_labels
from openenv_provider_docker.options import ContainerOptions

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

__all__ = [
    "PORT_KEY",
    "EngineHandle",
    "EngineProvider",
    "port_bindings",
    "remove_container",
    "stop_live_handles",
]

#: The server's port in the engine's port maps (``NetworkSettings.Ports``).
PORT_KEY = f"{CONTAINER_PORT}/tcp"

_LIVE: weakref.WeakSet[EngineHandle] = weakref.WeakSet()

HandleT = TypeVar("HandleT", bound="EngineHandle")


def _log(provider: str) -> logging.Logger:
    return logging.getLogger(f"openenv.provider.{provider}")


def port_bindings(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """The host bindings of the server's port, from a container's attributes."""
    return list(((attrs.get("NetworkSettings") or {}).get("Ports") or {}).get(PORT_KEY) or [])


#: How long ``remove_container`` waits for a removal someone else started (409) to finish.
REMOVAL_WAIT_S = 30.0


def remove_container(container: Container) -> None:
    """Remove a container by force, with its anonymous volumes; returns once it is gone.

    One that is gone already counts as removed. One whose removal is in progress (409: someone, gc
    or the engine, is on it) is waited for, at most ``REMOVAL_WAIT_S``, so a caller that lists
    containers right after (a leak check, ``ps``) does not see it. Any other engine error is raised.
    """
    from docker.errors import APIError

    try:
        container.remove(force=True, v=True)
    except APIError as exc:
        if not_found(exc):
            return
        if getattr(exc.response, "status_code", None) != 409:
            raise
        deadline = time.monotonic() + REMOVAL_WAIT_S
        while time.monotonic() < deadline:
            try:
                container.reload()
            except APIError as gone:
                if not_found(gone):
                    return
                raise
            time.sleep(0.1)


class EngineHandle(ProviderHandle):
    """A running env server on a Docker engine: a container or a Swarm service."""

    provider: str = ""
    #: How long the exit hook lets ``stop`` take.
    exit_stop_timeout_s: ClassVar[float] = 2.0
    #: How long releasing the network retries a refused removal (``networks.release``).
    network_retry_s: ClassVar[float] = 0.0

    def __init__(self, client: docker.DockerClient, resource: Any, *, env: str, token: str | None,
                 network: str | None, startup_timeout_s: float = 60.0) -> None:
        self._client = client
        self._token = token
        self._network = network
        self._lock = threading.Lock()
        self._stopped = False
        self.env = env
        self.id: str = resource.id
        self.name: str = resource.name
        # The address is known once the resource runs: only then is this a ProviderHandle.
        base_url = self._begin(startup_timeout_s)
        super().__init__(provider=self.provider, id=resource.id, base_url=base_url)
        _LIVE.add(self)

    # -- what a container and a service do differently --------------------------------------------

    @abstractmethod
    def _begin(self, timeout_s: float) -> str:
        """Start the resource and return its base URL (called once, from ``__init__``).

        Raises if it cannot start within ``timeout_s``; the provider then removes the resource.
        """

    @abstractmethod
    def _running(self) -> bool:
        """Whether the server runs (may raise the engine's not-found error)."""

    @abstractmethod
    def _read_logs(self, tail: int) -> bytes:
        """The last ``tail`` lines of output (may raise the engine's not-found error)."""

    @abstractmethod
    def _remove(self, timeout_s: float) -> None:
        """Stop (SIGTERM, SIGKILL after ``timeout_s``; at once when it is 0) and remove."""

    # -- the shared life ---------------------------------------------------------------------------

    def is_running(self) -> bool:
        if self._stopped:
            return False
        try:
            return self._running()
        except Exception as exc:
            if not_found(exc):
                return False
            raise

    def logs(self, tail: int = 50) -> str:
        try:
            raw = self._read_logs(max(0, tail))
        except Exception as exc:
            if not_found(exc):
                return ""
            raise
        return raw.decode("utf-8", errors="replace").rstrip("\n")

    def stop(self, timeout_s: float = 10.0) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        try:
            self._remove(timeout_s)
        finally:
            _LIVE.discard(self)
            if self._network is not None:
                network, self._network = self._network, None
                networks.release(self._client, network, retry_s=self.network_retry_s)


class EngineProvider(Provider, Generic[HandleT]):
    """Starts env servers on a Docker engine; subclasses say what they create and how."""

    name: ClassVar[str] = ""
    #: What ``start`` creates, for messages (``"container"``, ``"service"``).
    resource_kind: ClassVar[str] = ""
    #: Whether the owner's isolated network is a Swarm overlay network.
    overlay_network: ClassVar[bool] = False

    def __init__(self, client: docker.DockerClient | None = None) -> None:
        self._client_obj = client
        self._client_lock = threading.Lock()

    def client(self) -> docker.DockerClient:
        """The engine client (connected on first use; ``EngineUnavailable`` if none answers)."""
        with self._client_lock:
            if self._client_obj is None:
                self._client_obj = self._connect()
            return self._client_obj

    def _connect(self) -> docker.DockerClient:
        """Connect to the engine (subclasses add checks of what it must be)."""
        return connect()

    @abstractmethod
    def _options(self, spec: LaunchSpec) -> ContainerOptions:
        """``spec.options`` checked for this provider (``ConfigError`` names a bad one)."""

    @abstractmethod
    def _create(self, client: docker.DockerClient, spec: LaunchSpec, opts: ContainerOptions,
                image: ResolvedImage, labels: dict[str, str], network: str | None) -> Any:
        """Create the container or service (not started yet where the engine separates the two)."""

    @abstractmethod
    def _handle(self, client: docker.DockerClient, resource: Any, spec: LaunchSpec,
                opts: ContainerOptions, env: str, network: str | None) -> HandleT:
        """The handle that owns ``resource`` (and, from now on, ``network``)."""

    @abstractmethod
    def _discard(self, client: docker.DockerClient, resource: Any) -> None:
        """Remove a resource that no handle owns yet, at once."""

    def start(self, spec: LaunchSpec) -> HandleT:
        opts = self._options(spec)
        client = self.client()
        image = resolve_image(client, spec, opts, provider=self.name)
        owner = owner_id()
        labels = managed_labels(provider=self.name, owner=owner, env=image.env, extra=opts.labels)
        network: str | None = None
        handle: HandleT | None = None
        resource = None
        try:
            if opts.network == "isolated":
                network = networks.acquire(client, provider=self.name, owner=owner,
                                           overlay=self.overlay_network)
            deadline = time.monotonic() + spec.startup_timeout_s
            resource = self._create(client, spec, opts, image, labels, network)
            handle = self._handle(client, resource, spec, opts, image.env, network)
            network = None  # the handle releases it from now on
            handle.wait_ready(max(0.0, deadline - time.monotonic()))
            return handle
        except BaseException:
            if handle is not None:
                handle.stop(timeout_s=0)
            else:
                if resource is not None:
                    try:
                        self._discard(client, resource)
                    except Exception as exc:
                        _log(self.name).warning("could not remove %s %s after a failed start: %s",
                                                self.resource_kind, resource.name, exc)
                if network is not None:
                    networks.release(client, network)
            raise

    # -- gc ----------------------------------------------------------------------------------------

    def gc_containers(self, client: docker.DockerClient) -> list[Container]:
        """Remove this provider's containers whose owner process is gone; returns those removed."""
        from docker.errors import APIError

        removed = []
        for container in client.containers.list(all=True, filters={"label": label_filters(self.name)}):
            if owner_alive(container.labels.get(LABEL_OWNER, "")):
                continue
            try:
                remove_container(container)
            except APIError as exc:
                _log(self.name).warning("gc: could not remove container %s: %s", container.name, exc)
                continue
            removed.append(container)
        return removed

    def gc_networks(self, client: docker.DockerClient) -> None:
        """Remove this provider's networks whose owner process is gone (in use: left for later)."""
        from docker.errors import APIError

        for network in client.networks.list(filters={"label": label_filters(self.name)}):
            if owner_alive((network.attrs.get("Labels") or {}).get(LABEL_OWNER, "")):
                continue
            try:
                network.remove()
                _log(self.name).info("gc: removed network %s", network.name)
            except APIError as exc:
                _log(self.name).debug("gc: network %s not removed: %s", network.name, exc)


@atexit.register
def stop_live_handles() -> None:
    """Stop what this process still runs when it exits normally (SIGKILL leaves it to gc)."""
    for handle in list(_LIVE):
        try:
            handle.stop(timeout_s=handle.exit_stop_timeout_s)
        except Exception as exc:  # at exit there is no one to raise to
            _log(handle.provider).warning("could not stop %r at exit: %s", handle, exc)
