"""The per-owner network that ``network="isolated"`` containers and services join.

Why a network per owner (one per client process) and not one per container: Docker carves each
bridge network out of a small pool of address ranges (about 30 by default), so a network per
container would cap a machine at ~30 env servers; inside one owner's network, inter-container
traffic is switched off anyway, so its containers cannot reach each other.

Bridge variant (docker provider): ``enable_icc=false`` (containers on it cannot talk to each other)
and ``enable_ip_masquerade=false`` (no NAT: the container has no route out to the internet, while
the host still reaches its published port). An ``internal`` network would cut outbound traffic
too, but Docker does not publish ports of containers on internal networks at all, so the server
could not be reached: that is why it is not used.

Podman variant: Podman's bridge driver has no icc switch, so containers on one network always
reach each other; its ``isolate`` option keeps *other* networks out. So on Podman each container
gets a network of its own (``isolate=true``), which is what keeps one owner's servers apart there.
Podman's Docker-compatible network create silently drops driver options (4.3, measured: the
network came out without ``isolate``, and its containers reached each other), so the network is
created through Podman's own API (``/libpod/networks/create``) on the same socket.
Podman's default subnet pools hold tens of thousands of /24 networks, so the ~30-network cap that
rules this out on Docker does not apply. Outbound traffic stays possible (no masquerade switch
either): the README says so.

Overlay variant (swarm provider): a non-attachable overlay network per owner separates one owner's
services from everyone else's. Outbound traffic of Swarm tasks leaves through the node's shared
``docker_gwbridge``; cutting it is a node setting (see the swarm provider's README).

Promises: ``acquire`` returns the network name, creating it if needed; ``release`` removes it when
this process's last user releases it (best effort: if another endpoint is still attached, the
engine refuses and ``gc`` removes it once the owner is gone). Both are serialised per process, and
the owner is the process, so no other process creates or removes the same network.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from typing import TYPE_CHECKING

from openenv_provider_docker.engine import not_found
from openenv_provider_docker.naming import managed_labels, owner_network_name

if TYPE_CHECKING:
    import docker

__all__ = ["BRIDGE_ISOLATION_OPTIONS", "acquire", "is_podman", "release"]

log = logging.getLogger("openenv.provider.docker")

#: Driver options of the isolated bridge network (Docker Engine names).
BRIDGE_ISOLATION_OPTIONS = {
    "com.docker.network.bridge.enable_icc": "false",
    "com.docker.network.bridge.enable_ip_masquerade": "false",
}

_LOCK = threading.Lock()
_USERS: Counter[str] = Counter()
#: Networks this process removed (their removal may still be in progress in the engine).
_REMOVED: set[str] = set()


def _exists(client: docker.DockerClient, name: str) -> bool:
    # The engine's name filter matches substrings: compare exact names.
    return any(n.name == name for n in client.networks.list(names=[name]))


def is_podman(client: docker.DockerClient) -> bool:
    """Whether the engine is Podman's Docker-compatible service."""
    try:
        components = client.version().get("Components") or []
    except Exception:
        return False
    return any("podman" in str(c.get("Name", "")).lower() for c in components)


def acquire(client: docker.DockerClient, *, provider: str, owner: str, overlay: bool = False) -> str:
    """The owner's isolated network (created on first use; on Podman a new one per call, see the
    module docstring); pair every call with ``release``."""
    name = owner_network_name(provider, owner)
    podman = not overlay and is_podman(client)
    if podman:
        name = f"{name}-{uuid.uuid4().hex[:8]}"
    with _LOCK:
        if name in _REMOVED:
            # Swarm deletes overlay networks asynchronously: one this process just removed may
            # still be listed, and a service created on it would fail with "network not found".
            _REMOVED.discard(name)
            deadline = time.monotonic() + 15.0
            while _exists(client, name) and time.monotonic() < deadline:
                time.sleep(0.05)
        if not _exists(client, name):
            labels = managed_labels(provider=provider, owner=owner, env="")
            if overlay:
                client.networks.create(name, driver="overlay", attachable=False, labels=labels,
                                       scope="swarm")
            elif podman:
                _create_podman_network(client, name, labels)
            else:
                client.networks.create(name, driver="bridge", labels=labels,
                                       options=dict(BRIDGE_ISOLATION_OPTIONS))
        _USERS[name] += 1
    return name


def _create_podman_network(client: docker.DockerClient, name: str, labels: dict[str, str]) -> None:
    """A bridge network with ``isolate=true``, through Podman's own API (see the module docstring).
    Outbound access stays on: Podman has no masquerade switch either."""
    from docker.errors import create_api_error_from_http_exception
    from requests.exceptions import HTTPError

    response = client.api.post(f"{client.api.base_url}/v4.0.0/libpod/networks/create", json={
        "name": name, "driver": "bridge", "labels": labels, "options": {"isolate": "true"}})
    try:
        response.raise_for_status()
    except HTTPError as exc:
        raise create_api_error_from_http_exception(exc) from None


def release(client: docker.DockerClient, name: str, *, retry_s: float = 0.0) -> None:
    """Drop one use of ``name``; the last one removes the network (errors are logged, not raised).

    ``retry_s`` keeps retrying a refused removal that long: Swarm detaches a removed task's
    endpoint from an overlay network a moment after its container is gone.
    """
    from docker.errors import APIError

    with _LOCK:
        _USERS[name] -= 1
        if _USERS[name] > 0:
            return
        del _USERS[name]
        deadline = time.monotonic() + retry_s
        while True:
            try:
                client.networks.get(name).remove()
                _REMOVED.add(name)
                return
            except APIError as exc:
                if not_found(exc):
                    return
                if time.monotonic() >= deadline:
                    log.debug("network %s not removed now (gc will): %s", name, exc)
                    return
            except Exception as exc:  # an engine gone away: gc takes care of it later
                log.debug("network %s not removed now (gc will): %s", name, exc)
                return
            time.sleep(0.1)
