"""The ``docker`` provider: one hardened container per env server (Docker Engine or Podman).

Promises (``openenv.interfaces.Provider`` / ``ProviderHandle``), beyond the interface's:

* The container's port 8000 is published on 127.0.0.1 only, on a host port the engine picks
  (``("127.0.0.1", None)``) and that is read back from the container: no port race.
* Hardened by default (``options`` module): all capabilities dropped, ``no-new-privileges``,
  memory/CPU/pids limits, read-only root with a tmpfs ``/tmp`` (unless the image says its env
  needs a writable root), an isolated per-owner network (no peers, no outbound NAT), a tiny init
  as PID 1.
* Secrets (``spec.token``, ``spec.env_vars``) go only into the container's environment, never into
  its command line or our logs. (Anyone allowed to ``docker inspect`` can read a container's
  environment; such a user controls the engine, i.e. is root on its host, anyway.)
* Every resource is labelled (``naming.managed_labels``) with the owner process's ``owner_id()``.
* ``start`` returns only once ``/health`` and a ``/ws`` round-trip pass. A container that exits
  during start-up is reported at once with its exit code and log tail; any failure (a timeout, a
  bad option, Ctrl-C) removes the container and releases the network before re-raising.
* ``stop`` sends SIGTERM, SIGKILL after ``timeout_s``, and always removes the container; it is
  idempotent. Handles still running at interpreter exit are stopped by an ``atexit`` hook; a
  process killed with SIGKILL leaves its containers to ``gc``, which removes every container and
  network whose owner process is gone.
"""

from __future__ import annotations

import atexit
import builtins
import logging
import math
import threading
import uuid
import weakref
from typing import TYPE_CHECKING, Any, ClassVar

from openenv.interfaces import HandleInfo, LaunchSpec, Provider, ProviderHandle, owner_alive, owner_id
from openenv_provider_docker import networks
from openenv_provider_docker.engine import connect, not_found
from openenv_provider_docker.images import resolve_image, server_command, server_environment
from openenv_provider_docker.naming import (
    CONTAINER_PORT,
    LABEL_ENV,
    LABEL_OWNER,
    label_filters,
    managed_labels,
    resource_name,
)
from openenv_provider_docker.options import ContainerOptions, parse_options
from openenv_provider_docker.readiness import wait_until_ready

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

__all__ = ["DockerHandle", "DockerProvider", "published_port"]

log = logging.getLogger("openenv.provider.docker")

_PORT_KEY = f"{CONTAINER_PORT}/tcp"
_LIVE: weakref.WeakSet[DockerHandle] = weakref.WeakSet()


def published_port(attrs: dict[str, Any]) -> int | None:
    """The host port bound to the server's port on 127.0.0.1, from a container's attributes."""
    bindings = ((attrs.get("NetworkSettings") or {}).get("Ports") or {}).get(_PORT_KEY) or []
    for binding in bindings:
        if binding.get("HostPort") and binding.get("HostIp") in ("127.0.0.1", "", None):
            return int(binding["HostPort"])
    return None


def _exit_description(attrs: dict[str, Any]) -> str | None:
    state = attrs.get("State") or {}
    if state.get("Status") not in ("exited", "dead"):
        return None
    text = f"exited with code {state.get('ExitCode')}"
    if state.get("OOMKilled"):
        text += " (killed for using too much memory: raise options['memory'])"
    elif state.get("Error"):
        text += f" ({state['Error']})"
    return text


class DockerHandle(ProviderHandle):
    """A running env server container. ``base_url`` is ``http://127.0.0.1:<host port>``."""

    provider = "docker"

    def __init__(self, client: docker.DockerClient, container: Container, *, env: str,
                 token: str | None, network: str | None) -> None:
        self._client = client
        self._container = container
        self._network = network
        self._token = token
        self._lock = threading.Lock()
        self._stopped = False
        self.env = env
        self.id = container.id
        self.name = container.name
        self.base_url = ""
        _LIVE.add(self)

    # -- start-up ---------------------------------------------------------------------------------

    def _learn_port(self) -> None:
        """Read the engine-assigned host port; raise at once if the container already died."""
        self._container.reload()
        gone = _exit_description(self._container.attrs)
        if gone is not None:
            raise RuntimeError(f"container {self.name} {gone} during start-up."
                               f"\n--- last log lines ---\n{self.logs(50) or '(no log output)'}")
        port = published_port(self._container.attrs)
        if port is None:
            raise RuntimeError(f"container {self.name} has no port published on 127.0.0.1 for "
                               f"{_PORT_KEY}: {self._container.attrs['NetworkSettings'].get('Ports')}")
        self.base_url = f"http://127.0.0.1:{port}"

    def _exited(self) -> str | None:
        try:
            self._container.reload()
        except Exception as exc:
            if not_found(exc):
                return "was removed"
            raise
        return _exit_description(self._container.attrs)

    def wait_ready(self, timeout_s: float) -> None:
        wait_until_ready(self.base_url, timeout_s=timeout_s, token=self._token, exited=self._exited,
                         log_tail=lambda: self.logs(50), what=f"container {self.name}")

    # -- state ------------------------------------------------------------------------------------

    def is_running(self) -> bool:
        if self._stopped:
            return False
        try:
            self._container.reload()
        except Exception as exc:
            if not_found(exc):
                return False
            raise
        return self._container.status == "running"

    def logs(self, tail: int = 50) -> str:
        try:
            raw = self._container.logs(stdout=True, stderr=True, tail=max(0, tail))
        except Exception as exc:
            if not_found(exc):
                return ""
            raise
        return raw.decode("utf-8", errors="replace").rstrip("\n")

    # -- stop -------------------------------------------------------------------------------------

    def stop(self, timeout_s: float = 10.0) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        try:
            if timeout_s > 0:
                try:
                    # The engine sends SIGTERM, then SIGKILL once the grace period is over.
                    self._container.stop(timeout=math.ceil(timeout_s))
                except Exception as exc:
                    if not not_found(exc):
                        log.warning("stopping container %s failed (%s); removing it by force",
                                    self.name, exc)
        finally:
            self._remove()

    def _remove(self) -> None:
        from docker.errors import APIError

        try:
            try:
                self._container.remove(force=True, v=True)
            except APIError as exc:
                # 409 "removal already in progress" means someone (gc, the engine) is on it.
                if not not_found(exc) and getattr(exc.response, "status_code", None) != 409:
                    raise
        finally:
            _LIVE.discard(self)
            if self._network is not None:
                network, self._network = self._network, None
                networks.release(self._client, network)

    def __repr__(self) -> str:
        return f"DockerHandle(name={self.name!r}, base_url={self.base_url!r}, env={self.env!r})"


class DockerProvider(Provider):
    """Starts env servers as hardened containers; see the module docstring for the promises."""

    name: ClassVar[str] = "docker"

    def __init__(self, client: docker.DockerClient | None = None) -> None:
        self._client_obj = client
        self._client_lock = threading.Lock()

    def client(self) -> docker.DockerClient:
        """The engine client (connected on first use; ``EngineUnavailable`` if none answers)."""
        with self._client_lock:
            if self._client_obj is None:
                self._client_obj = connect()
            return self._client_obj

    def start(self, spec: LaunchSpec) -> DockerHandle:
        opts = parse_options(spec.options, provider=self.name)
        client = self.client()
        image = resolve_image(client, spec, opts, provider=self.name)
        owner = owner_id()
        labels = managed_labels(provider=self.name, owner=owner, env=image.env, extra=opts.labels)
        network: str | None = None
        handle: DockerHandle | None = None
        container = None
        try:
            network = (networks.acquire(client, provider=self.name, owner=owner)
                       if opts.network == "isolated" else None)
            container = client.containers.create(**self._create_args(
                client, spec, opts, image.id, server_command(image, spec), labels,
                network or opts.network, image.read_only_ok, image.env))
            handle = DockerHandle(client, container, env=image.env, token=spec.token, network=network)
            network = None  # the handle releases it from now on
            container.start()
            handle._learn_port()
            handle.wait_ready(spec.startup_timeout_s)
            return handle
        except BaseException:
            if handle is not None:
                handle.stop(timeout_s=0)
            else:
                if container is not None:
                    try:
                        container.remove(force=True, v=True)
                    except Exception as exc:
                        log.warning("could not remove container %s after a failed start: %s",
                                    container.name, exc)
                if network is not None:
                    networks.release(client, network)
            raise

    def _create_args(self, client: docker.DockerClient, spec: LaunchSpec, opts: ContainerOptions,
                     image_id: str, command: list[str] | None, labels: dict[str, str],
                     network: str, image_read_only_ok: bool, env: str) -> dict[str, Any]:
        from docker.types import Ulimit

        read_only = opts.read_only if opts.read_only is not None else image_read_only_ok
        args: dict[str, Any] = {
            "image": image_id,
            "command": command,
            "name": resource_name(env, uuid.uuid4().hex[:10]),
            "detach": True,
            "environment": server_environment(spec),
            "labels": labels,
            "ports": {_PORT_KEY: ("127.0.0.1", None)},
            "cap_drop": ["ALL"],
            "cap_add": list(opts.cap_add) or None,
            "security_opt": ["no-new-privileges"],
            "pids_limit": opts.pids_limit,
            "mem_limit": opts.memory_bytes,
            "memswap_limit": opts.memory_bytes,  # no swap on top of the memory limit
            "nano_cpus": opts.nano_cpus,
            "read_only": read_only,
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={opts.tmpfs_size}"},
            "init": opts.init,
            "network": network,
            # Explicit, so the container never inherits the engine's (often huge) default.
            "ulimits": [Ulimit(name="nofile", soft=opts.nofile, hard=opts.nofile)],
        }
        if opts.user is not None:
            args["user"] = opts.user
        if not networks.is_podman(client):
            # Bounded logs: a chatty env must not fill the host's disk. (Podman picks its own driver.)
            args["log_config"] = {"Type": "json-file", "Config": {"max-size": "10m", "max-file": "2"}}
        return args

    # -- list / gc --------------------------------------------------------------------------------

    def list(self, *, all_owners: bool = False) -> list[HandleInfo]:
        client = self.client()
        owner = None if all_owners else owner_id()
        containers = client.containers.list(all=True, filters={"label": label_filters(self.name, owner)})
        return [self._info(c) for c in containers]

    def _info(self, container: Container) -> HandleInfo:
        port = published_port(container.attrs)
        return HandleInfo(
            provider=self.name,
            id=container.id,
            owner=container.labels.get(LABEL_OWNER, ""),
            base_url=f"http://127.0.0.1:{port}" if port else None,
            status=container.status,
            env=container.labels.get(LABEL_ENV) or None,
        )

    def gc(self) -> builtins.list[HandleInfo]:
        from docker.errors import APIError

        client = self.client()
        removed: list[HandleInfo] = []
        for container in client.containers.list(all=True, filters={"label": label_filters(self.name)}):
            if owner_alive(container.labels.get(LABEL_OWNER, "")):
                continue
            info = self._info(container)
            try:
                container.remove(force=True, v=True)
            except APIError as exc:
                if not not_found(exc):
                    log.warning("gc: could not remove container %s: %s", container.name, exc)
                    continue
            info.status = "removed"
            removed.append(info)
        for network in client.networks.list(filters={"label": label_filters(self.name)}):
            if owner_alive(network.attrs.get("Labels", {}).get(LABEL_OWNER, "")):
                continue
            try:
                network.remove()
                log.info("gc: removed network %s", network.name)
            except APIError as exc:
                log.debug("gc: network %s not removed: %s", network.name, exc)
        return removed


@atexit.register
def _stop_live_handles() -> None:
    """Stop containers this process still runs when it exits normally (SIGKILL leaves them to gc)."""
    for handle in list(_LIVE):
        try:
            handle.stop(timeout_s=2.0)
        except Exception as exc:  # at exit there is no one to raise to
            log.warning("could not stop %r at exit: %s", handle, exc)
